//! The commands of docs/operations.md as the page writes them, for the tests that run them:
//! tests/native/operations.rs names the test that runs each, and `make cluster-test`'s part
//! `operations` runs its share from this text, so the page cannot say one thing while the tests
//! run another.
//!
//! A command is a line of a `console` block (where the block shows output, the lines after
//! `$ `, and the lines below one what it prints; a line ending in `\` goes on on the next), or
//! an inline code span of at least three words that starts with `kubectl`, `kwctl`, `helm` or
//! `cosign` (two words name a command, as "`cosign sign`", without running it). It is marked
//! when its paragraph or list item (for a block, the one just before it) says
//! "real cluster only: <what the test control plane lacks>".
use crate::workspace_root;
use anyhow::{anyhow, Result};

const TOOLS: [&str; 4] = ["kubectl", "kwctl", "helm", "cosign"];
const MARK: &str = "real cluster only: ";

/// One command of the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The `## ` section it is in.
    pub section: String,
    /// As written, on one line: a block's continued lines joined, a span's line breaks made
    /// spaces.
    pub text: String,
    /// The lines the page shows it printing.
    pub output: Vec<String>,
    /// What the mark says the test control plane lacks, when it is marked.
    pub mark: Option<String>,
}

/// The page's text.
pub fn page() -> Result<String> {
    let path = workspace_root().join("docs/operations.md");
    std::fs::read_to_string(&path).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// The page's commands, in order.
pub fn commands(page: &str) -> Vec<Command> {
    let mut out = Vec::new();
    let mut section = String::new();
    // The paragraph or list item being read, and the last one finished.
    let mut unit: Vec<String> = Vec::new();
    let mut last_unit = String::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        let starts_unit = trimmed.is_empty()
            || trimmed.starts_with('#')
            || trimmed.starts_with("```")
            || trimmed.starts_with("- ")
            || trimmed
                .split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if starts_unit && !unit.is_empty() {
            last_unit = unit.join(" ");
            out.extend(spans(&section, &last_unit));
            unit.clear();
        }
        if let Some(heading) = trimmed.strip_prefix("## ") {
            section = heading.to_string();
            last_unit.clear();
        } else if let Some(info) = trimmed.strip_prefix("```") {
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.trim().starts_with("```"))
                .collect();
            if ["console", "shell", "sh", "bash"].contains(&info) {
                out.extend(block(&section, &body, mark(&last_unit)));
            }
            last_unit.clear();
        } else if !trimmed.is_empty() && !trimmed.starts_with('#') {
            unit.push(trimmed.to_string());
        }
    }
    if !unit.is_empty() {
        out.extend(spans(&section, &unit.join(" ")));
    }
    out
}

/// The commands of one section, in order.
pub fn in_section<'a>(commands: &'a [Command], section: &str) -> Vec<&'a Command> {
    commands.iter().filter(|c| c.section == section).collect()
}

/// The bodies of the fenced blocks of one section whose info string is `info` (`yaml`), in
/// order.
pub fn fenced(page: &str, section: &str, info: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if let Some(heading) = trimmed.strip_prefix("## ") {
            current = heading.to_string();
        } else if let Some(found) = trimmed.strip_prefix("```") {
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.trim().starts_with("```"))
                .collect();
            if current == section && found == info {
                out.push(body.join("\n") + "\n");
            }
        }
    }
    out
}

/// What a unit's mark says is lacking, if it has one (up to the first `)` or `.`).
fn mark(unit: &str) -> Option<String> {
    let (_, rest) = unit.split_once(MARK)?;
    let reason = rest.split([')', '.']).next().unwrap_or_default().trim();
    (!reason.is_empty()).then(|| reason.to_string())
}

fn block(section: &str, body: &[&str], mark: Option<String>) -> Vec<Command> {
    let prompted = body.iter().any(|l| l.trim_start().starts_with("$ "));
    let mut out: Vec<Command> = Vec::new();
    let mut continued = false;
    for line in body {
        let line = line.trim();
        let (command, rest) = match line.strip_prefix("$ ") {
            Some(rest) => (true, rest),
            None => (!prompted && !continued, line),
        };
        let text = rest.strip_suffix('\\').unwrap_or(rest).trim_end();
        if continued {
            if let Some(last) = out.last_mut() {
                last.text = format!("{} {}", last.text, text);
            }
        } else if command {
            out.push(Command {
                section: section.to_string(),
                text: text.to_string(),
                output: Vec::new(),
                mark: mark.clone(),
            });
        } else if let Some(last) = out.last_mut() {
            last.output.push(line.to_string());
        }
        continued = rest.ends_with('\\');
    }
    out
}

fn spans(section: &str, unit: &str) -> Vec<Command> {
    let mark = mark(unit);
    unit.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            let words: Vec<&str> = span.split_whitespace().collect();
            words.len() >= 3 && TOOLS.contains(&words[0])
        })
        .map(|span| Command {
            section: section.to_string(),
            text: span.split_whitespace().collect::<Vec<_>>().join(" "),
            output: Vec::new(),
            mark: mark.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# T\n\n## One\n\nRun (real cluster only: Helm):\n\n```console\nhelm repo add a \\\n    b\nhelm install c\n```\n\nThen:\n\n```console\n$ kubectl get x\nprinted\n$ kubectl get y\n```\n\n## Two\n\n- **Item** `kubectl -n\n  ns get z` and `kwctl push`.\n- (real cluster only: logs). `kubectl logs deploy/p`\n\n```yaml\nkubectl not a command\n```\n";

    #[test]
    fn blocks_spans_outputs_and_marks_are_read() {
        let got: Vec<(String, String, Vec<String>, Option<String>)> = commands(PAGE)
            .into_iter()
            .map(|c| (c.section, c.text, c.output, c.mark))
            .collect();
        let helm = Some("Helm".to_string());
        let logs = Some("logs".to_string());
        let s = |x: &str| x.to_string();
        assert_eq!(
            got,
            vec![
                (s("One"), s("helm repo add a b"), vec![], helm.clone()),
                (s("One"), s("helm install c"), vec![], helm),
                (s("One"), s("kubectl get x"), vec![s("printed")], None),
                (s("One"), s("kubectl get y"), vec![], None),
                (s("Two"), s("kubectl -n ns get z"), vec![], None),
                (s("Two"), s("kubectl logs deploy/p"), vec![], logs),
            ]
        );
        assert_eq!(fenced(PAGE, "Two", "yaml"), ["kubectl not a command\n"]);
    }
}
