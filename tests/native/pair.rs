//! The recommended pair has one settings source: examples/kustomization.yaml applies
//! examples/pair-settings.yaml to both halves. This renders the pair as `kubectl apply -k
//! examples/` would, without kustomize: each patch of the kustomization is a merge patch
//! (RFC 7386, which is what kustomize's strategic merge does on a kind it has no schema for:
//! maps merge key by key, anything else is replaced) of the patch file's `spec` onto every
//! resource its target selects. The target's `name` is read as kustomize's regular expression
//! in the one form used here: literal text with at most one `(a|b|…)` group.
use jobset_multislice_policy::settings::{Settings, KEYS};
use multislice_host::fixtures::load_yaml;
use multislice_host::workspace_root;
use serde_json::{json, Map, Value};

const KUSTOMIZATION: &str = "examples/kustomization.yaml";
const MUTATE: &str = "examples/cluster-admission-policy-mutate.yaml";
const VALIDATE: &str = "examples/cluster-admission-policy-validate.yaml";
const QUEUE_CHECK: &str = "examples/cluster-admission-policy-validate-queue-check.yaml";

fn yaml(path: &str) -> Value {
    load_yaml(&workspace_root().join(path)).unwrap()
}

/// RFC 7386: `patch` merged into `target`.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let target = target.as_object_mut().unwrap();
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// The names a target's `name` pattern matches: `a-(b|c)` is `a-b` and `a-c`.
fn names(pattern: &str) -> Vec<String> {
    match pattern.split_once('(') {
        None => vec![pattern.to_string()],
        Some((head, rest)) => {
            let (group, tail) = rest.split_once(')').expect("a closed group");
            assert!(!tail.contains('('), "one group at most: {pattern}");
            group
                .split('|')
                .map(|alt| format!("{head}{alt}{tail}"))
                .collect()
        }
    }
}

/// The kustomization's resources, rendered with `resources` in place of its own list when
/// given: every patch applied to the resources its target selects.
fn render(resources: Option<&[&str]>) -> Vec<Value> {
    let kustomization = yaml(KUSTOMIZATION);
    let listed: Vec<String> = kustomization["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| format!("examples/{}", r.as_str().unwrap()))
        .collect();
    let files: Vec<String> = match resources {
        Some(r) => r.iter().map(|f| f.to_string()).collect(),
        None => listed,
    };
    let mut docs: Vec<Value> = files.iter().map(|f| yaml(f)).collect();
    for patch in kustomization["patches"].as_array().expect("patches") {
        let target = &patch["target"];
        let body = yaml(&format!("examples/{}", patch["path"].as_str().unwrap()));
        let selected = names(target["name"].as_str().unwrap());
        let mut hits = 0;
        for doc in &mut docs {
            let kind_matches = doc["kind"] == target["kind"];
            let group_matches = doc["apiVersion"]
                .as_str()
                .is_some_and(|v| v.split('/').next() == target["group"].as_str());
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            if kind_matches && group_matches && selected.iter().any(|n| n == name) {
                merge(&mut doc["spec"], &body["spec"]);
                hits += 1;
            }
        }
        assert_eq!(hits, selected.len(), "{patch} selects {selected:?}");
    }
    docs
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
    let docs = render(None);
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

/// The queue-check manifest takes the validating half's place in the kustomization (as its
/// comment says) and gets the same settings, plus its own `queueCheck`.
#[test]
fn the_queue_check_half_renders_with_the_same_settings() {
    let docs = render(Some(&[MUTATE, QUEUE_CHECK]));
    let mutate = settings_of(&docs, "jobset-multislice-mutate");
    let validate = settings_of(&docs, "jobset-multislice-validate");
    assert_eq!(validate["queueCheck"], json!("refuse"));
    assert_eq!(
        without(mutate, &["role"]),
        without(validate, &["role", "queueCheck"])
    );
    assert!(Settings::from_json(&Value::Object(validate.clone())).is_ok());
}

#[test]
fn the_merge_is_rfc_7386() {
    let mut target = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2]});
    merge(
        &mut target,
        &json!({"b": {"c": null, "f": 4}, "e": [3], "g": "x"}),
    );
    assert_eq!(
        target,
        json!({"a": 1, "b": {"d": 3, "f": 4}, "e": [3], "g": "x"})
    );
    assert_eq!(names("p-(a|b)"), ["p-a", "p-b"]);
    assert_eq!(names("p"), ["p"]);
}
