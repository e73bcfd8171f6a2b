//! Facts the docs state that a test can keep true: every relative link of README.md,
//! CONTRIBUTING.md and docs/ resolves (the file, and an `#anchor` to one of its headings), and
//! so does every pointer to a section written in prose or code (`README "Install"`,
//! `docs/contributing/spec.md §4.2`); every rule of `Rule` has its section in docs/rules.md
//! (with a before/after YAML and what happens without it) and its row in the README's rule
//! table; every example file is linked from the docs or admitted by a test; every example
//! policy lists every setting, or defers to the pair's one settings file; the README names
//! this version; CI's budget is the workflows' timeout; and all of that markdown stays within
//! 2,920 lines.
use jobset_multislice_policy::settings::KEYS;
use multislice_host::{files_under, workspace_root};
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The markdown a reader is sent through, relative to the workspace root: the README,
/// CONTRIBUTING.md and everything under docs/.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("CONTRIBUTING.md")];
    let docs = files_under(Path::new("docs"));
    files.extend(
        docs.into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "md")),
    );
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(workspace_root().join(path))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of a markdown text outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor for a heading: lowercase, every character but letters, digits, `-`, `_`
/// and spaces dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The headings of a markdown text, as written (without the `#`s).
fn headings(text: &str) -> Vec<String> {
    prose(text)
        .into_iter()
        .filter_map(|l| {
            let rest = l.trim_start_matches('#');
            (rest.len() < l.len() && rest.starts_with(' ')).then(|| rest.trim().to_string())
        })
        .collect()
}

/// The anchors of a markdown text; a repeated heading gets `-1`, `-2`, … as on GitHub.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for heading in headings(text) {
        let base = slug(&heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.insert(anchor);
    }
    out
}

/// The targets of the inline links `[text](target)` of a markdown text, outside code.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        // Inline code never holds a link: drop it first.
        let line: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    out
}

/// `base/relative` with `.` and `..` resolved, as a path from the workspace root.
fn join(base: &Path, relative: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for part in base.join(relative).components() {
        match part {
            Component::ParentDir => assert!(out.pop(), "{relative} leaves the repository"),
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Every broken relative link of the docs, as `file: target (why)`.
fn broken_links() -> Vec<String> {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let dir = file.parent().unwrap_or(Path::new(""));
        for target in link_targets(&read(&file)) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                join(dir, path)
            };
            if !workspace_root().join(&resolved).exists() {
                broken.push(format!(
                    "{}: {target} (no file {})",
                    file.display(),
                    resolved.display()
                ));
                continue;
            }
            if anchor.is_empty() {
                continue;
            }
            if resolved.extension().is_none_or(|x| x != "md") {
                broken.push(format!(
                    "{}: {target} (an anchor into a non-markdown file)",
                    file.display()
                ));
            } else if !anchors(&read(&resolved)).contains(anchor) {
                broken.push(format!(
                    "{}: {target} (no heading #{anchor})",
                    file.display()
                ));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_of_the_docs_resolves() {
    assert_eq!(broken_links(), Vec::<String>::new());
}

#[test]
fn the_anchor_of_a_heading_is_githubs() {
    assert_eq!(
        slug("G1 — group names are DNS-1035 labels"),
        "g1--group-names-are-dns-1035-labels"
    );
    assert_eq!(
        slug("Warnings at `kubectl apply`"),
        "warnings-at-kubectl-apply"
    );
    assert_eq!(slug("Kubewarden's own tools"), "kubewardens-own-tools");
    let twice = anchors("# A\n## A\n```\n# not a heading\n```\n");
    assert_eq!(twice, ["a", "a-1"].map(String::from).into());
}

/// The rule ids, as the `Rule` enum of src/violation.rs declares them.
pub(crate) fn rule_ids() -> Vec<String> {
    let source = read(Path::new("src/violation.rs"));
    let body = source
        .split_once("pub enum Rule {")
        .and_then(|(_, rest)| rest.split_once('}'))
        .expect("src/violation.rs declares `pub enum Rule`")
        .0;
    body.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with("#["))
        .map(|l| l.trim_end_matches(',').to_string())
        .collect()
}

#[test]
fn every_rule_has_its_section_in_docs_rules_and_its_row_in_the_readme() {
    let ids = rule_ids();
    assert!(ids.len() >= 21, "read {ids:?} from src/violation.rs");
    let rules = read(Path::new("docs/rules.md"));
    let sections = headings(&rules);
    let readme = read(Path::new("README.md"));
    for id in &ids {
        let section = sections
            .iter()
            .find(|h| h.starts_with(&format!("{id} — ")))
            .unwrap_or_else(|| panic!("docs/rules.md has no section `### {id} — …`"));
        let body = rules
            .split(&format!("\n### {section}\n"))
            .nth(1)
            .and_then(|rest| rest.split("\n### ").next())
            .unwrap();
        assert!(
            body.contains("**Before → after:**\n\n```yaml\n"),
            "docs/rules.md, {id}: no before/after YAML"
        );
        assert!(
            body.contains("**Without the") || body.contains("Seen on the real control plane"),
            "docs/rules.md, {id}: not what happens without it"
        );
        let row = format!("| [{id}](docs/rules.md#{}) |", slug(section));
        assert!(
            readme.lines().any(|l| l.starts_with(&row)),
            "README's rule table has no row `{row}`"
        );
    }
}

#[test]
fn every_example_is_linked_from_the_docs_or_admitted_by_a_test() {
    let mut linked = BTreeSet::new();
    for file in markdown_files() {
        let dir = file.parent().unwrap_or(Path::new(""));
        for target in link_targets(&read(&file)) {
            let path = target.split('#').next().unwrap();
            if !path.is_empty() && !path.contains("://") {
                linked.insert(join(dir, path));
            }
        }
    }
    let mut unaccounted = Vec::new();
    for path in files_under(Path::new("examples")) {
        // As tests/wasm/shipping.rs (every example's stated verdict) and e2e.bats select the
        // examples they admit: a JobSet, or a Job.
        let admitted = read(&path)
            .lines()
            .any(|l| l == "kind: JobSet" || l == "kind: Job");
        // A kustomization's folder (examples/single/, …) is one unit: a link to a file of it.
        let folder_linked = path.parent() != Some(Path::new("examples"))
            && linked.iter().any(|l| l.parent() == path.parent());
        if !admitted && !linked.contains(&path) && !folder_linked {
            unaccounted.push(path.display().to_string());
        }
    }
    unaccounted.sort();
    assert_eq!(
        unaccounted,
        Vec::<String>::new(),
        "neither linked nor admitted"
    );
}

/// The files a pointer to a section may be written in: the source, docs, examples, scripts and
/// build files of the workspace. CHANGELOG.md is left out: its entries point at sections as
/// they were when each was written.
fn pointer_sources() -> Vec<PathBuf> {
    const SOURCE: [&str; 8] = ["rs", "md", "yml", "yaml", "toml", "py", "sh", "bats"];
    let mut out = Vec::new();
    let mut dirs = vec![PathBuf::new()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(workspace_root().join(&dir)).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = dir.join(&name);
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                let hidden = name.starts_with('.') && name != ".ci" && name != ".github";
                if !hidden && name != "target" && name != "node_modules" {
                    dirs.push(path);
                }
            } else if kind.is_file()
                && name != "CHANGELOG.md"
                && (name == "Makefile"
                    || dir.starts_with(".ci")
                    || path
                        .extension()
                        .is_some_and(|x| SOURCE.contains(&&*x.to_string_lossy())))
            {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// What a pointer names: a heading by its text, or a numbered section of the contract.
#[derive(Debug)]
enum Target {
    Heading(String),
    Section(String),
}

/// The pointers of a text, as (file as written, target): `README "Install"`,
/// `docs/contributing/testing.md "A real control plane"`, `docs/contributing/spec.md §4.2`,
/// `SPEC §3`, and lists such as `§4.2–§4.4` or `§3, §4.2 and §4.3`.
fn pointers(text: &str) -> Vec<(String, Target)> {
    // A quote escaped in a string literal of code is a quote of the text it writes.
    let text = text.replace("\\\"", "\"");
    let mut out = Vec::new();
    for (i, _) in text.match_indices(' ') {
        let start = text[..i]
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace() || "([<`'\"".contains(*c))
            .map_or(0, |(s, c)| s + c.len_utf8());
        let file = &text[start..i];
        let after = &text[i + 1..];
        let names_a_file = file == "README" || file.ends_with(".md");
        // A heading starts with a capital: `notes.md "${args[@]}"` in a script is no pointer.
        let quoted_heading = after
            .strip_prefix('"')
            .is_some_and(|q| q.starts_with(|c: char| c.is_uppercase()));
        if names_a_file && quoted_heading {
            let quoted = &after[1..];
            if let Some(end) = quoted.find(['"', '\n']) {
                if quoted[end..].starts_with('"') {
                    out.push((file.to_string(), Target::Heading(quoted[..end].to_string())));
                }
            }
        } else if (file == "SPEC" || file.ends_with("spec.md")) && after.starts_with('§') {
            let mut rest = after;
            while let Some(number) = rest.strip_prefix('§') {
                let end = number
                    .find(|c: char| !c.is_ascii_digit() && c != '.')
                    .unwrap_or(number.len());
                let section = number[..end].trim_end_matches('.');
                if section.is_empty() {
                    break;
                }
                out.push((file.to_string(), Target::Section(section.to_string())));
                rest = number[end..]
                    .trim_start_matches([',', ' ', '–', '-'])
                    .trim_start_matches("and ");
            }
        }
    }
    out
}

/// Every pointer to a section that names no such section, as `source: pointer (why)`.
fn broken_pointers() -> Vec<String> {
    let mut broken = Vec::new();
    for source in pointer_sources() {
        let Ok(text) = std::fs::read_to_string(workspace_root().join(&source)) else {
            continue;
        };
        for (file, target) in pointers(&text) {
            let path = match file.as_str() {
                "README" => PathBuf::from("README.md"),
                "SPEC" => PathBuf::from("docs/contributing/spec.md"),
                f if workspace_root().join(f).is_file() => PathBuf::from(f),
                f => join(source.parent().unwrap_or(Path::new("")), f),
            };
            let why = if !workspace_root().join(&path).is_file() {
                Some(format!("no file {file}"))
            } else {
                let headings = headings(&read(&path));
                let found = match &target {
                    // A shell script splits a quoted name to put a `'` in it: its text up to
                    // the split counts where a heading starts with it.
                    Target::Heading(h) => headings
                        .iter()
                        .any(|x| x == h || (h.ends_with('\'') && x.starts_with(h.as_str()))),
                    Target::Section(n) => {
                        let prefix = if n.contains('.') {
                            format!("{n} ")
                        } else {
                            format!("{n}. ")
                        };
                        headings.iter().any(|x| x.starts_with(&prefix))
                    }
                };
                (!found).then(|| format!("no section {target:?} in {}", path.display()))
            };
            if let Some(why) = why {
                broken.push(format!("{}: {file} {target:?} ({why})", source.display()));
            }
        }
    }
    broken
}

#[test]
fn every_pointer_to_a_section_resolves() {
    assert_eq!(broken_pointers(), Vec::<String>::new());
}

#[test]
fn pointers_are_read_as_written() {
    let found: Vec<String> = pointers(
        "see README \"Install\" and (docs/contributing/spec.md §4.2–§4.4, §5) or SPEC §3; \
         echo \"x (see docs/a.md \\\"Kubewarden's own tools\\\")\"",
    )
    .into_iter()
    .map(|(file, target)| format!("{file} {target:?}"))
    .collect();
    assert_eq!(
        found,
        [
            "README Heading(\"Install\")",
            "docs/contributing/spec.md Section(\"4.2\")",
            "docs/contributing/spec.md Section(\"4.4\")",
            "docs/contributing/spec.md Section(\"5\")",
            "SPEC Section(\"3\")",
            "docs/a.md Heading(\"Kubewarden's own tools\")",
        ]
    );
}

/// Every `:vX.Y.Z` tag the README names (the module to push and to point the manifests at) is
/// this version's.
#[test]
fn the_readme_names_this_version() {
    let version = read(Path::new("Cargo.toml"))
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap()
        .to_string();
    let readme = read(Path::new("README.md"));
    let tags: Vec<&str> = readme
        .match_indices(":v")
        .map(|(i, _)| {
            let tag = &readme[i + 2..];
            let end = tag
                .find(|c: char| !c.is_ascii_digit() && c != '.')
                .unwrap_or(tag.len());
            tag[..end].trim_end_matches('.')
        })
        .filter(|t| t.contains('.'))
        .collect();
    assert!(!tags.is_empty(), "README names no :vX.Y.Z tag");
    for tag in tags {
        assert_eq!(tag, version, "README names v{tag}");
    }
}

/// The `settings:` block of a policy manifest: its lines after `  settings:`, as written.
fn settings_block(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| *l != "  settings:")
        .skip(1)
        .take_while(|l| l.starts_with("    ") || l.is_empty())
        .collect()
}

/// Each half of the pair sets these itself; examples/pair-settings.yaml, merged into both,
/// must not name them even as a comment, since a value there replaces the half's own (an
/// uncommented `queueCheck` would undo the queue-check half's `refuse`).
const EACH_HALFS_OWN: [&str; 2] = ["role", "queueCheck"];

/// Every example policy lists every setting in its `settings:` block, set or as a comment, so
/// that a user sees them all where they deploy; or it is a half of the pair, which defers to
/// examples/pair-settings.yaml (its one settings source) and sets only what is its own; and
/// pair-settings.yaml lists every setting but each half's own.
#[test]
fn every_example_policy_lists_every_setting_or_defers_to_the_pairs() {
    let mut seen = 0;
    for path in files_under(Path::new("examples")) {
        let text = read(&path);
        let is_policy = text
            .lines()
            .any(|l| l == "kind: ClusterAdmissionPolicy" || l == "kind: AdmissionPolicy");
        if !is_policy {
            continue;
        }
        seen += 1;
        let block = settings_block(&text);
        let key_of = |line: &str| -> Option<(bool, String)> {
            let line = line.trim_start();
            let (commented, line) = match line.strip_prefix('#') {
                Some(rest) => (true, rest.trim_start()),
                None => (false, line),
            };
            let key = line.split(':').next()?;
            KEYS.contains(&key).then(|| (commented, key.to_string()))
        };
        let keys: Vec<(bool, String)> = block.iter().copied().filter_map(key_of).collect();
        if path == Path::new("examples/pair-settings.yaml") {
            let named: Vec<&str> = keys.iter().map(|k| k.1.as_str()).collect();
            let missing: Vec<&&str> = KEYS
                .iter()
                .filter(|k| !named.contains(*k) && !EACH_HALFS_OWN.contains(*k))
                .collect();
            assert!(missing.is_empty(), "{}: lacks {missing:?}", path.display());
            assert!(
                named.iter().all(|k| !EACH_HALFS_OWN.contains(k)),
                "{}: names {named:?}, where {EACH_HALFS_OWN:?} are each half's own",
                path.display()
            );
        } else if block.iter().any(|l| l.contains("pair-settings.yaml")) {
            let set: Vec<&str> = keys.iter().filter(|k| !k.0).map(|k| k.1.as_str()).collect();
            assert!(
                set.iter().all(|k| EACH_HALFS_OWN.contains(k)),
                "{}: a half of the pair sets {set:?}, which pair-settings.yaml holds",
                path.display()
            );
        } else {
            let named: Vec<&str> = keys.iter().map(|k| k.1.as_str()).collect();
            let missing: Vec<&&str> = KEYS.iter().filter(|k| !named.contains(*k)).collect();
            assert!(
                missing.is_empty(),
                "{}: its settings list lacks {missing:?}",
                path.display()
            );
        }
    }
    assert!(seen >= 6, "read {seen} example policies");
}

/// The docs stay within 2,920 lines: one home for each fact, and links to it elsewhere (issue 44;
/// 2,300 until the control plane gained the policy's host process and its outage, label and
/// release cases, issue 51; 2,400 until docs/operations.md, the operator's page of issue 52, came
/// in: it counts, since an operator reads it as the rest, and the README gave it what it held on
/// upgrade and uninstall; 2,700 until issue 51's rules P1–P3 and E2, four sections with their
/// before/after and what happens without them, and the facts-across-releases rule; 2,800 until
/// issue 60's "Topology-aware scheduling" section of docs/kueue-gke-xpk.md, up to 80 lines, and
/// issue 61's audit, signing and operations-page facts, up to 40).
#[test]
fn the_markdown_stays_short() {
    let counts: Vec<(PathBuf, usize)> = markdown_files()
        .into_iter()
        .map(|file| {
            let lines = read(&file).lines().count();
            (file, lines)
        })
        .collect();
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    let each: Vec<String> = counts
        .iter()
        .map(|(file, n)| format!("{}: {n}", file.display()))
        .collect();
    let said = read(Path::new("docs/contributing/testing.md"));
    assert!(
        said.contains("(at most 2,920 lines)"),
        "testing.md states another cap"
    );
    assert!(
        total <= 2_920,
        "README.md, CONTRIBUTING.md and docs/ have {total} lines, more than 2,920: give each fact \
         one home and link to it ({})",
        each.join(", ")
    );
}

/// The Kubewarden release the GitHub workflows install (kwctl by `kwctl-version:`, policy-server
/// by its image tag): one version, in every workflow.
fn kubewarden_version_of_the_workflows() -> String {
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(workspace_root().join(".github/workflows")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("kwctl-version: ") {
                found.insert(v.to_string());
            }
            if let Some((_, tag)) = line.split_once("ghcr.io/kubewarden/policy-server:") {
                found.insert(tag.split_whitespace().next().unwrap().to_string());
            }
        }
    }
    assert_eq!(found.len(), 1, "the workflows install {found:?}");
    found.pop_first().unwrap()
}

/// Every "kwctl and policy-server vX" (or "policy-server and kwctl vX") the docs name is the
/// release the workflows install, and the README, testing.md and BENCHMARKS.md name it.
#[test]
fn the_docs_name_the_kubewarden_release_the_workflows_install() {
    let version = kubewarden_version_of_the_workflows();
    let mut files = markdown_files();
    files.push(PathBuf::from("BENCHMARKS.md"));
    let mut named = BTreeSet::new();
    for file in &files {
        let text = read(file).replace('\n', " ");
        for phrase in ["kwctl and policy-server ", "policy-server and kwctl "] {
            for (i, _) in text.match_indices(phrase) {
                let next = text[i + phrase.len()..].split([' ', ',', ';', ')']).next();
                let Some(word) =
                    next.filter(|w| w.starts_with(|c: char| c.is_ascii_digit() || c == 'v'))
                else {
                    continue;
                };
                let word = word.trim_end_matches('.');
                if word
                    .trim_start_matches('v')
                    .starts_with(|c: char| c.is_ascii_digit())
                {
                    assert_eq!(word, version, "{} names {phrase}{word}", file.display());
                    named.insert(file.clone());
                }
            }
        }
    }
    for file in ["README.md", "docs/contributing/testing.md", "BENCHMARKS.md"] {
        assert!(
            named.contains(Path::new(file)),
            "{file} does not name kwctl and policy-server {version}"
        );
    }
}

/// CI's budget for a cold `.ci/run` is what the workflows hold it to: every workflow step that
/// runs `.ci/run` has a `timeout-minutes`, one figure in all, and testing.md's "CI's N-minute
/// budget" is that figure.
#[test]
fn testing_md_states_the_timeout_the_workflows_give_ci() {
    let mut minutes = BTreeSet::new();
    let mut steps = Vec::new();
    for entry in std::fs::read_dir(workspace_root().join(".github/workflows")).unwrap() {
        let path = entry.unwrap().path();
        let workflow = multislice_host::fixtures::load_yaml(&path).unwrap();
        for job in workflow["jobs"]
            .as_object()
            .into_iter()
            .flat_map(|j| j.values())
        {
            for step in job["steps"].as_array().into_iter().flatten() {
                if step["run"].as_str().map(str::trim) != Some("bash .ci/run") {
                    continue;
                }
                let timeout = step["timeout-minutes"].as_u64();
                steps.push(format!("{}: {timeout:?}", path.display()));
                minutes.insert(timeout);
            }
        }
    }
    assert_eq!(steps.len(), 2, "the workflows run .ci/run in {steps:?}");
    assert_eq!(
        minutes.len(),
        1,
        "the .ci/run steps' timeout-minutes: {steps:?}"
    );
    let minutes = minutes
        .pop_first()
        .flatten()
        .expect("a .ci/run step has no timeout-minutes");
    let testing = read(Path::new("docs/contributing/testing.md")).replace('\n', " ");
    let said = format!("CI's {minutes}-minute budget (`timeout-minutes` of the workflows'");
    assert!(testing.contains(&said), "testing.md does not say {said:?}");
}

/// testing.md's count of the bad-input corpus is the corpus's.
#[test]
fn testing_md_counts_the_bad_input_corpus() {
    let count = |dir: &str| {
        std::fs::read_dir(workspace_root().join(dir))
            .unwrap()
            .count()
    };
    let said = format!(
        "(`test_data/bad/`): {} requests and {} settings documents",
        count("test_data/bad/requests"),
        count("test_data/bad/settings")
    );
    let testing = read(Path::new("docs/contributing/testing.md")).replace("\n  ", " ");
    assert!(testing.contains(&said), "testing.md does not say {said:?}");
}

/// Each cold time has one home: a figure of minutes or seconds beside the word "cold" appears
/// only where it is measured, in the README's "From source" (preview, test, wasmtime),
/// testing.md's "A real control plane" (cluster-deps, Kueue, `.ci/run`) and the Makefile's
/// registry build; everywhere else points there. CHANGELOG.md is history, and left out.
#[test]
fn every_cold_time_has_one_home() {
    const HOMES: [&str; 3] = ["README.md", "docs/contributing/testing.md", "Makefile"];
    let figure = |line: &str| {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || "(),;".contains(c))
            .collect();
        words.windows(2).any(|w| {
            w[0].trim_start_matches('~')
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
                && ["min", "minutes", "s"].contains(&w[1])
        })
    };
    let mut strays = Vec::new();
    for source in pointer_sources() {
        let Ok(text) = std::fs::read_to_string(workspace_root().join(&source)) else {
            continue;
        };
        if HOMES.contains(&source.to_str().unwrap()) {
            continue;
        }
        for line in text.lines() {
            if line.contains("cold") && figure(line) {
                strays.push(format!("{}: {}", source.display(), line.trim()));
            }
        }
    }
    assert_eq!(strays, Vec::<String>::new(), "a cold time outside its home");
}
