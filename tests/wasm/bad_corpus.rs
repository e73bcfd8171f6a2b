//! The bad-input corpus of test_data/bad/ through the real module: every request gets its
//! recorded outcome, and none traps or errors in the host.
use crate::common::*;
use multislice_host::fixtures::load_json;
use multislice_host::workspace_root;
use multislice_host::SettingsOutcome;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    accepted: bool,
    #[serde(default)]
    mutated: bool,
    #[serde(default)]
    code: Option<u16>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Corpus {
    requests: BTreeMap<String, Expected>,
    settings: BTreeMap<String, String>,
}

fn corpus() -> Corpus {
    serde_json::from_value(
        load_json(&workspace_root().join("test_data/bad/expected.json")).unwrap(),
    )
    .unwrap()
}

fn names(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(workspace_root().join(dir))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".json").map(str::to_string))
        .collect();
    out.sort();
    out
}

fn check(name: &str, payload: &[u8], want: &Expected) {
    let outcome = policy()
        .validate_raw(payload, None)
        .unwrap_or_else(|e| panic!("{name}: the host failed: {e:#}"));
    assert_eq!(
        outcome.accepted, want.accepted,
        "{name}: {:?}",
        outcome.message
    );
    assert_eq!(outcome.mutated_object.is_some(), want.mutated, "{name}");
    assert_eq!(outcome.code, want.code, "{name}");
    assert_eq!(outcome.message, want.message, "{name}");
}

#[test]
fn every_bad_request_gets_its_recorded_outcome() {
    let corpus = corpus();
    let files = names("test_data/bad/requests");
    assert!(files.len() >= 40, "only {} bad requests", files.len());
    assert_eq!(files, corpus.requests.keys().cloned().collect::<Vec<_>>());
    for (name, want) in &corpus.requests {
        let payload =
            std::fs::read(workspace_root().join(format!("test_data/bad/requests/{name}.json")))
                .unwrap();
        check(name, &payload, want);
    }
}

#[test]
fn every_bad_settings_document_is_refused_with_its_message() {
    let corpus = corpus();
    let files = names("test_data/bad/settings");
    assert!(files.len() >= 15, "only {} bad settings", files.len());
    assert_eq!(files, corpus.settings.keys().cloned().collect::<Vec<_>>());
    for (name, message) in &corpus.settings {
        let settings =
            load_json(&workspace_root().join(format!("test_data/bad/settings/{name}.json")))
                .unwrap();
        assert_eq!(
            policy().validate_settings(&settings).unwrap(),
            SettingsOutcome {
                valid: false,
                message: Some(message.clone())
            },
            "{name}"
        );
    }
}

/// 64 MB does not belong in the repository, so this one is built here.
#[test]
fn a_64_mb_string_is_handled() {
    let huge = "x".repeat(64 << 20);
    let mut request = fixture_request("tpu-4-slices", multislice_host::controller::JobSetApi::V09);
    request["object"]["metadata"]["annotations"]["notes"] = json!(huge);
    let payload = serde_json::to_vec(&json!({"request": request, "settings": {}})).unwrap();
    check(
        "64 MB annotation on a JobSet",
        &payload,
        &Expected {
            accepted: true,
            mutated: true,
            code: None,
            message: None,
        },
    );

    let mut pod: Value = load_json(&multislice_host::fixtures::pod_request_path(
        "not-a-jobset-pod",
    ))
    .unwrap();
    pod["object"]["metadata"]["annotations"] = json!({"notes": huge});
    let payload = serde_json::to_vec(&json!({"request": pod, "settings": {}})).unwrap();
    check(
        "64 MB annotation on a pod outside any JobSet",
        &payload,
        &Expected {
            accepted: true,
            mutated: false,
            code: None,
            message: None,
        },
    );
}
