//! Every `$(NAME)` an example's containers write resolves: the kubelet expands it in env values,
//! `command` and `args` from the container's env, and leaves a name it does not know as the
//! literal text, which the process then receives. Checked on the final pods of every JobSet and
//! Job of examples/ (the policy's env included), under the settings of each example manifest.
use crate::common::*;
use multislice_host::controller::JobSetApi;
use multislice_host::preview::{run_job, run_jobset, yaml_documents, PodRow};
use multislice_host::workspace_root;
use serde_json::json;

/// The names a text refers to with `$(NAME)`; `$$` escapes.
fn references(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        let after = &rest[pos + 1..];
        if let Some(escaped) = after.strip_prefix('$') {
            rest = escaped;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    out.push(&inner[..end]);
                    rest = &inner[end + 1..];
                }
                None => rest = inner,
            }
        } else {
            rest = after;
        }
    }
    out
}

fn unresolved(row: &PodRow) -> Vec<String> {
    let defined: Vec<&str> = row.env.iter().map(|(n, _)| n.as_str()).collect();
    // A resolved env value still holding `$(NAME)` named nothing defined before it.
    let in_env = row.env.iter().flat_map(|(_, v)| references(v));
    let in_args = row
        .command_args
        .iter()
        .flat_map(|a| references(a))
        .filter(|name| !defined.contains(name));
    in_env
        .chain(in_args)
        .map(|name| format!("{} {}: $({name})", row.pod, row.container))
        .collect()
}

#[test]
fn every_reference_an_example_writes_resolves() {
    let mut files: Vec<_> = std::fs::read_dir(workspace_root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let settings = [
        json!({}),
        json!({"tpuWorkerEnv": true}),
        json!({"jaxEnv": "always"}),
    ];
    let mut checked = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        for doc in yaml_documents(&text).unwrap() {
            for settings in &settings {
                let rows = match doc["kind"].as_str() {
                    Some("JobSet") => run_jobset(policy(), &doc, settings, JobSetApi::V09),
                    Some("Job") => run_job(policy(), &doc, settings),
                    _ => continue,
                }
                .unwrap()
                .1;
                assert!(!rows.is_empty(), "{}: no pods", path.display());
                let bad: Vec<String> = rows.iter().flat_map(unresolved).collect();
                assert!(
                    bad.is_empty(),
                    "{} under {settings}: references nothing defines: {bad:?}",
                    path.display()
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 8, "only {checked} runs");
}

#[test]
fn an_undefined_reference_is_caught() {
    let row = PodRow {
        pod: "p".into(),
        container: "c".into(),
        group: String::new(),
        env: vec![("A".into(), "1".into()), ("B".into(), "x-$(LATER)".into())],
        command_args: vec!["--a=$(A)".into(), "--c=$(C)".into(), "$$(ESCAPED)".into()],
    };
    assert_eq!(unresolved(&row), ["p c: $(LATER)", "p c: $(C)"]);
}
