//! The shape of the source tree (CONTRIBUTING.md "Source map"): no import circle in any crate of the
//! workspace, no file of `src/` over 400 lines or sharing its name with another, the env
//! names spelled in `src/keys.rs` alone, and the test host's copy of them equal to it.
use jobset_multislice_policy::keys;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace; `SOURCE_TREE_ROOT` points the checks at another checkout (to see them
/// find the circles of an older tree, say).
fn root() -> PathBuf {
    std::env::var_os("SOURCE_TREE_ROOT")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The crate roots of the workspace: libraries, binaries and test binaries.
fn crate_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = [
        "src/lib.rs",
        "host/src/lib.rs",
        "tests/gen/src/lib.rs",
        "bench/src/main.rs",
        "bench/src/lib.rs",
        "bench/baseline/src/lib.rs",
        "cluster/src/lib.rs",
    ]
    .iter()
    .map(|p| root().join(p))
    .collect();
    for dir in [
        "tests",
        "cluster/tests",
        "host/src/bin",
        "bench/src/bin",
        "cluster/src/bin",
    ] {
        let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.join("main.rs").is_file() {
                roots.push(path.join("main.rs"));
            } else if path.extension().is_some_and(|e| e == "rs") {
                roots.push(path);
            }
        }
    }
    roots.retain(|p| p.is_file());
    roots.sort();
    roots
}

/// A file's code without its comments and its `#[cfg(test)]` module: what the module itself
/// reaches.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names a file declares with `mod name;`.
fn declared_children(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("pub(crate) mod "))
                .or_else(|| line.strip_prefix("mod "))?;
            rest.strip_suffix(';').map(str::to_string)
        })
        .collect()
}

/// Every file module of the crate at `root_file`, by module path (the root is "").
fn modules(root_file: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut todo = vec![(String::new(), root_file.to_path_buf(), true)];
    while let Some((name, file, owns_dir)) = todo.pop() {
        let dir = if owns_dir {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        for child in declared_children(&code_of(&file)) {
            let flat = dir.join(format!("{child}.rs"));
            let nested = dir.join(&child).join("mod.rs");
            let child_name = if name.is_empty() {
                child.clone()
            } else {
                format!("{name}::{child}")
            };
            if flat.is_file() {
                todo.push((child_name, flat, false));
            } else if nested.is_file() {
                todo.push((child_name, nested, true));
            }
        }
        out.insert(name, file);
    }
    out
}

/// The paths of a `use` tree, braces expanded: `a::{b, c::{d}}` gives `a::b` and `a::c::d`.
fn expand_use(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or("").to_string()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| {
            expand_use(p)
                .into_iter()
                .map(move |q| format!("{prefix}{q}"))
        })
        .collect()
}

/// The paths a module's code names: its `use` trees, and with `inline`, the `crate::`,
/// `super::` and child-module paths written in the code too.
fn named_paths(code: &str, children: &[String], inline: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let at_word_start = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        let after = &rest[i + 4..];
        let end = after.find(';').unwrap_or(after.len());
        if at_word_start {
            out.extend(expand_use(&after[..end]));
        }
        rest = &after[end.min(after.len())..];
    }
    if !inline {
        return out;
    }
    let bytes = code.as_bytes();
    let heads: Vec<&str> = ["crate", "super", "self"]
        .into_iter()
        .chain(children.iter().map(String::as_str))
        .collect();
    for head in heads {
        let needle = format!("{head}::");
        let mut from = 0;
        while let Some(i) = code[from..].find(&needle) {
            let start = from + i;
            let word_start = start == 0
                || !(bytes[start - 1].is_ascii_alphanumeric()
                    || bytes[start - 1] == b'_'
                    || bytes[start - 1] == b':');
            let end = code[start..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| start + e);
            if word_start {
                out.push(code[start..end].to_string());
            }
            from = end.max(start + 1);
        }
    }
    out
}

/// The deepest module of `known` that `path`, written in module `from`, lands in.
fn resolve(path: &str, from: &str, known: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut segments = path.split("::").filter(|s| !s.is_empty()).peekable();
    let mut at: Vec<&str> = if from.is_empty() {
        Vec::new()
    } else {
        from.split("::").collect()
    };
    match *segments.peek()? {
        "crate" => {
            at.clear();
            segments.next();
        }
        "self" => {
            segments.next();
        }
        "super" => {
            while segments.peek() == Some(&"super") {
                segments.next();
                at.pop();
            }
        }
        _ => {}
    }
    for segment in segments {
        let mut next = at.clone();
        next.push(segment);
        if !known.contains_key(&next.join("::")) {
            break;
        }
        at = next;
    }
    Some(at.join("::"))
}

/// The import circles of one crate: each a set of modules that reach each other through
/// `use` lines, and with `inline`, through paths written in the code as well (a parent
/// calling `child::f()` while the child imports from the parent).
fn circles(root_file: &Path, inline: bool) -> Vec<Vec<String>> {
    let known = modules(root_file);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, file) in &known {
        let code = code_of(file);
        let children = declared_children(&code);
        let targets = edges.entry(name.clone()).or_default();
        for path in named_paths(&code, &children, inline) {
            if let Some(to) = resolve(&path, name, &known) {
                if to != *name {
                    targets.insert(to);
                }
            }
        }
    }
    // Two modules are in one circle when each reaches the other.
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<String> = edges[from].iter().cloned().collect();
        while let Some(m) = todo.pop() {
            if seen.insert(m.clone()) {
                todo.extend(edges.get(&m).into_iter().flatten().cloned());
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        known.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for m in known.keys() {
        let circle: Vec<String> = known
            .keys()
            .filter(|n| *n == m || (reached[m].contains(*n) && reached[*n].contains(m)))
            .cloned()
            .collect();
        if circle.len() > 1 && !out.contains(&circle) {
            out.push(circle);
        }
    }
    out
}

/// A circle as issue 21 defines it: modules that reach each other through `use crate::`,
/// `use super::` (or child) lines, in any crate of the workspace. The policy crate is held to
/// more: no circle through inline paths either.
#[test]
fn no_crate_of_the_workspace_has_an_import_circle() {
    let mut found = Vec::new();
    let mut modules_seen = 0;
    for root_file in crate_roots() {
        modules_seen += modules(&root_file).len();
        let policy = root_file == root().join("src/lib.rs");
        for circle in circles(&root_file, policy) {
            found.push(format!("{}: {}", root_file.display(), circle.join(" ↔ ")));
        }
    }
    println!("{modules_seen} modules checked");
    assert!(modules_seen > 60, "only {modules_seen} modules found");
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_circle_check_finds_a_circle() {
    let dir = std::env::temp_dir().join(format!("circle-check-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "mod c;\nuse crate::b::B;\n").unwrap();
    std::fs::write(dir.join("a/c.rs"), "use super::A;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "use crate::a::{c::{self}, A};\n").unwrap();
    std::fs::write(dir.join("d.rs"), "mod e;\nfn f() { e::g() }\n").unwrap();
    std::fs::create_dir_all(dir.join("d")).unwrap();
    std::fs::write(dir.join("d/e.rs"), "use super::f;\n").unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\nmod d;\n").unwrap();
    let by_use = circles(&dir.join("lib.rs"), false);
    let by_any_path = circles(&dir.join("lib.rs"), true);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(by_use, vec![vec!["a", "a::c", "b"]]);
    assert_eq!(by_any_path, vec![vec!["a", "a::c", "b"], vec!["d", "d::e"]]);
}

fn src_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root().join("src")];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_file_of_src_is_over_400_lines() {
    for path in src_files() {
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 400, "{}: {lines} lines", path.display());
    }
}

#[test]
fn no_two_files_of_src_share_a_name() {
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for path in src_files() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name == "mod.rs" {
            continue;
        }
        if let Some(other) = seen.insert(name.clone(), path.clone()) {
            panic!("{} and {} share a name", other.display(), path.display());
        }
    }
}

#[test]
fn the_env_names_are_spelled_in_keys_rs_alone() {
    for path in src_files() {
        if path.ends_with("src/keys.rs") {
            continue;
        }
        let code = code_of(&path);
        for name in keys::POLICY_ENV {
            assert!(
                !code.contains(&format!("\"{name}\"")),
                "{} spells {name}; use keys.rs",
                path.display()
            );
        }
    }
}

/// The test host keeps its own list on purpose: it must judge the policy without sharing its
/// code (and the policy crate dev-depends on it).
#[test]
fn the_host_lists_the_same_env_names_as_the_policy() {
    assert_eq!(multislice_host::judges::POLICY_ENV, keys::POLICY_ENV);
}

/// The layers of `src/`, lowest first (CONTRIBUTING.md "Source map", and the comments of `src/lib.rs`):
/// a module may name modules of its own layer and of the layers below, never above. A module is in
/// the layer of the longest entry that names it or a module above it (`facts` is a foundation, and
/// `jobset_facts`, which computes them from the groups, a plan).
const LAYERS: [(&str, &[&str]); 6] = [
    (
        "foundations",
        &[
            "error",
            "json",
            "keys",
            "quantity",
            "facts",
            "affinity_mark",
            "spelling",
            "names",
            "k8s_syntax",
            "paths",
        ],
    ),
    (
        "configuration",
        &["accelerators", "settings", "slice_fit", "topology"],
    ),
    ("views", &["views"]),
    (
        "plans",
        &[
            "groups",
            "job_facts",
            "jobset_facts",
            "multikueue",
            "narrowing",
            "placement",
            "queue_fit",
            "pods",
            "rules",
            "tas",
            "violation",
            "warnings",
        ],
    ),
    ("patches", &["mutate"]),
    ("the edge", &["admission"]),
];

fn layer_of(module: &str) -> Option<usize> {
    let within = |entry: &str| module == entry || module.starts_with(&format!("{entry}::"));
    LAYERS
        .iter()
        .enumerate()
        .flat_map(|(layer, (_, mods))| mods.iter().map(move |m| (layer, m)))
        .filter(|(_, m)| within(m))
        .max_by_key(|(_, m)| m.len())
        .map(|(layer, _)| layer)
}

/// The imports of `src/` that climb from a lower layer to a higher one, as "from → to".
fn upward_imports(root_file: &Path) -> Vec<String> {
    let known = modules(root_file);
    let mut out = Vec::new();
    for (name, file) in &known {
        let Some(from) = layer_of(name) else {
            continue;
        };
        let code = code_of(file);
        let children = declared_children(&code);
        for path in named_paths(&code, &children, true) {
            let Some(to) = resolve(&path, name, &known) else {
                continue;
            };
            if layer_of(&to).is_some_and(|l| l > from) {
                let line = format!(
                    "{name} ({}) → {to} ({})",
                    LAYERS[from].0,
                    LAYERS[layer_of(&to).unwrap()].0
                );
                if !out.contains(&line) {
                    out.push(line);
                }
            }
        }
    }
    out
}

#[test]
fn every_module_of_src_has_a_layer() {
    let lib = root().join("src/lib.rs");
    let top: BTreeSet<String> = modules(&lib)
        .keys()
        .filter(|m| !m.is_empty())
        .map(|m| m.split("::").next().unwrap().to_string())
        .collect();
    let unplaced: Vec<&String> = top.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(unplaced.is_empty(), "modules without a layer: {unplaced:?}");
}

#[test]
fn no_module_of_src_imports_from_a_higher_layer() {
    let found = upward_imports(&root().join("src/lib.rs"));
    assert!(found.is_empty(), "upward imports:\n{}", found.join("\n"));
}

#[test]
fn the_layer_check_finds_an_upward_import() {
    let dir = std::env::temp_dir().join(format!("layer-check-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("views")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod keys;\nmod views;\nmod mutate;\n").unwrap();
    std::fs::write(dir.join("keys.rs"), "pub const K: &str = \"k\";\n").unwrap();
    std::fs::write(dir.join("views/mod.rs"), "mod pod_view;\n").unwrap();
    std::fs::write(
        dir.join("views/pod_view.rs"),
        "use crate::keys::K;\nfn f() { crate::mutate::g() }\n",
    )
    .unwrap();
    std::fs::write(dir.join("mutate.rs"), "use crate::views::pod_view;\n").unwrap();
    let found = upward_imports(&dir.join("lib.rs"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, vec!["views::pod_view (views) → mutate (patches)"]);
}
