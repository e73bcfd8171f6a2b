//! Facts the docs state that a test can keep true: every relative link of README.md,
//! CONTRIBUTING.md and docs/ resolves (the file, and an `#anchor` to one of its headings);
//! every rule of `Rule` has its section in docs/rules.md (with a before/after YAML and what
//! happens without it) and its row in the README's rule table; and every example file is linked
//! from the docs or admitted by a test.
use multislice_host::workspace_root;
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The markdown a reader is sent through, relative to the workspace root: the README,
/// CONTRIBUTING.md and everything under docs/.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("CONTRIBUTING.md")];
    let mut docs = Vec::new();
    let mut dirs = vec![PathBuf::from("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(workspace_root().join(&dir)).unwrap() {
            let path = dir.join(entry.unwrap().file_name());
            if workspace_root().join(&path).is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "md") {
                docs.push(path);
            }
        }
    }
    docs.sort();
    files.extend(docs);
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
fn rule_ids() -> Vec<String> {
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
    for entry in std::fs::read_dir(workspace_root().join("examples")).unwrap() {
        let name = entry.unwrap().file_name();
        let path = Path::new("examples").join(&name);
        // As tests/wasm/shipping.rs (every example's stated verdict) and e2e.bats select the
        // examples they admit: a JobSet, or a Job.
        let admitted = read(&path)
            .lines()
            .any(|l| l == "kind: JobSet" || l == "kind: Job");
        if !admitted && !linked.contains(&path) {
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
