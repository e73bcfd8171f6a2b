//! The recommended pair has one settings source: examples/kustomization.yaml applies
//! examples/pair-settings.yaml to both halves, and examples/policy/ gives every policy the same
//! module and matchConditions. Rendered here as `kubectl kustomize examples/` renders it
//! (multislice_host::kustomization; `make cluster-test` applies the same with real kubectl).
use jobset_multislice_policy::settings::{Settings, KEYS};
use multislice_host::fixtures::load_yaml;
use multislice_host::kustomization::render;
use multislice_host::workspace_root;
use serde_json::{json, Map, Value};

const MUTATE: &str = "examples/cluster-admission-policy-mutate.yaml";
const VALIDATE: &str = "examples/cluster-admission-policy-validate.yaml";

fn yaml(path: &str) -> Value {
    load_yaml(&workspace_root().join(path)).unwrap()
}

fn rendered(dir: &str) -> Vec<Value> {
    render(&workspace_root().join(dir)).unwrap()
}

fn settings_of<'a>(docs: &'a [Value], name: &str) -> &'a Map<String, Value> {
    docs.iter()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {name} rendered"))["spec"]["settings"]
        .as_object()
        .unwrap_or_else(|| panic!("{name} has no settings"))
}

fn without(settings: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    let mut rest = settings.clone();
    for key in keys {
        rest.remove(*key);
    }
    rest
}

#[test]
fn the_kustomization_renders_the_pair_with_one_set_of_settings() {
    let docs = rendered("examples");
    assert_eq!(docs.len(), 2, "the kustomization lists the two halves");
    let mutate = settings_of(&docs, "jobset-multislice-mutate");
    let validate = settings_of(&docs, "jobset-multislice-validate");
    assert_eq!(mutate["role"], json!("mutate"));
    assert_eq!(validate["role"], json!("validate"));
    assert_eq!(without(mutate, &["role"]), without(validate, &["role"]));
    // The patch carries them: the halves hold nothing but their role.
    let patch = yaml("examples/pair-settings.yaml");
    let shared = patch["spec"]["settings"].as_object().unwrap();
    assert!(!shared.is_empty(), "pair-settings.yaml sets nothing");
    assert_eq!(&without(mutate, &["role"]), shared);
    for half in [MUTATE, VALIDATE] {
        let own = yaml(half)["spec"]["settings"].as_object().unwrap().clone();
        assert_eq!(own.keys().collect::<Vec<_>>(), ["role"], "{half}");
    }
    for settings in [mutate, validate] {
        for key in settings.keys() {
            assert!(KEYS.contains(&key.as_str()), "unknown setting {key}");
        }
        let parsed = Settings::from_json(&Value::Object(settings.clone()));
        assert!(parsed.is_ok(), "{parsed:?}");
    }
}

/// The pair with the queue-check component (as cluster/kustomize/queue-check/ lists it, and
/// examples/kustomization.yaml's comment says) gets the same settings on both halves, plus the
/// validating half's own `queueCheck`.
#[test]
fn the_queue_check_half_renders_with_the_same_settings() {
    let docs = rendered("cluster/kustomize/queue-check");
    let mutate = settings_of(&docs, "jobset-multislice-mutate");
    let validate = settings_of(&docs, "jobset-multislice-validate");
    assert_eq!(validate["queueCheck"], json!("refuse"));
    assert_eq!(mutate.get("queueCheck"), None);
    assert_eq!(
        without(mutate, &["role"]),
        without(validate, &["role", "queueCheck"])
    );
    assert!(Settings::from_json(&Value::Object(validate.clone())).is_ok());
}

/// The module and the matchConditions have one home, examples/policy/: every policy of every
/// kustomization of examples/ renders with the same two.
#[test]
fn every_policy_gets_the_module_and_conditions_of_one_home() {
    let mut all = Vec::new();
    for dir in ["examples", "examples/single", "examples/namespaced"] {
        all.extend(rendered(dir));
    }
    assert_eq!(all.len(), 4);
    let first = &all[0]["spec"];
    assert!(first["module"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(first["matchConditions"]
        .as_array()
        .is_some_and(|c| c.len() == 2));
    for doc in &all {
        let name = &doc["metadata"]["name"];
        assert_eq!(doc["spec"]["module"], first["module"], "{name}");
        assert_eq!(
            doc["spec"]["matchConditions"], first["matchConditions"],
            "{name}"
        );
    }
    // Written nowhere else: outside examples/policy/, no line but a comment names either.
    for path in walk(&workspace_root().join("examples")) {
        let relative = path
            .strip_prefix(workspace_root())
            .unwrap()
            .display()
            .to_string();
        if relative.starts_with("examples/policy/") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
            for word in ["module", "matchConditions", "registry://"] {
                assert!(!line.contains(word), "{relative} writes {word}: {line}");
            }
        }
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.extension().is_some_and(|x| x == "yaml") {
            out.push(path);
        }
    }
    out
}
