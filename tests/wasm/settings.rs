//! `validate_settings` through the real module, as kwctl calls it before any request.
use crate::common::*;
use multislice_host::controller::JobSetApi;
use multislice_host::SettingsOutcome;
use rstest::rstest;
use serde_json::{json, Value};

#[rstest]
#[case::empty(json!({}))]
#[case::null(Value::Null)]
#[case::every_key(json!({
    "multisliceEnv": true, "tpuWorkerEnv": false, "jaxEnv": "annotated", "jaxCoordinatorPort": 6666,
    "tpuResource": "google.com/tpu", "acceleratorLabel": "cloud.google.com/gke-tpu-accelerator",
    "topologyLabel": "cloud.google.com/gke-tpu-topology", "requireTpuNodeSelectors": true,
    "requireExclusiveTopology": true, "exclusiveTopologyKeys": ["cloud.google.com/gke-nodepool"],
    "accelerators": {"tpu-v8-example": {"dims": 3, "chipsPerHost": [4], "cubeRule": {"maxCubes": 256, "sorted": true}}},
    "rejectUnknownAccelerators": false, "multiKueueUsers": ["system:serviceaccount:kueue-system:multikueue"]
}))]
// What a YAML 1.1 reader makes of an unquoted `queueCheck: off` (docs/contributing/spec.md §8).
#[case::queue_check_false(json!({"queueCheck": false}))]
fn valid_settings_are_accepted(#[case] settings: Value) {
    assert_eq!(
        policy().validate_settings(&settings).unwrap(),
        SettingsOutcome {
            valid: true,
            message: None
        }
    );
}

#[rstest]
#[case::typo(json!({"multiSliceEnv": false}), "unknown setting \"multiSliceEnv\"; did you mean \"multisliceEnv\"?")]
#[case::port(json!({"jaxCoordinatorPort": 65536}), "jaxCoordinatorPort: 65536 is not a port; use 1 to 65535")]
#[case::label(json!({"topologyLabel": "no spaces/allowed"}), "topologyLabel: \"no spaces/allowed\" is not a valid key: the prefix must be a lowercase DNS subdomain")]
#[case::empty_list(json!({"exclusiveTopologyKeys": []}), "exclusiveTopologyKeys: must name at least one label key, for example [\"cloud.google.com/gke-nodepool\"]")]
#[case::accelerator(json!({"accelerators": {"x": {"dims": 4, "chipsPerHost": [], "topologies": ["2x2"]}}}),
    "accelerators[\"x\"].dims: is 4, use 2 or 3; accelerators[\"x\"].chipsPerHost: list one or more chip counts, each at least 1; accelerators[\"x\"].topologies[0]: \"2x2\" has 2 dimensions, the accelerator has 4")]
#[case::accelerator_field(json!({"accelerators": {"x": {"dim": 2}}}),
    "accelerators[\"x\"]: unknown field `dim`, expected one of `dims`, `chipsPerHost`, `multiHostChipsPerHost`, `singleHost`, `topologies`, `cubeRule`")]
#[case::multikueue_users(json!({"multiKueueUsers": "multikueue-manager"}), "multiKueueUsers: invalid type: string \"multikueue-manager\", expected a sequence")]
#[case::not_json_object(json!("on"), "settings must be an object, found the string \"on\"")]
// An unquoted `on` or `yes`, as a YAML 1.1 reader parses it.
#[case::queue_check_true(json!({"queueCheck": true}), "queueCheck: expected one of \"off\", \"warn\", \"refuse\", found the boolean true: write a quoted \"warn\" or \"refuse\" (a YAML 1.1 reader makes true of an unquoted on or yes)")]
fn invalid_settings_are_refused_with_a_message(#[case] settings: Value, #[case] message: &str) {
    assert_eq!(
        policy().validate_settings(&settings).unwrap(),
        SettingsOutcome {
            valid: false,
            message: Some(message.to_string())
        }
    );
}

#[test]
fn multislice_env_off_injects_no_megascale_variables() {
    let settings = json!({"multisliceEnv": false});
    let (_, _, pods) = run(&fixture_request("tpu-4-slices", JobSetApi::V09), &settings);
    assert!(pods.iter().all(|p| p.outcome.mutated_object.is_none()));
}

#[test]
fn a_custom_tpu_resource_decides_what_is_a_tpu_container() {
    let settings = json!({"tpuResource": "example.com/tpu"});
    let outcome = validate(&fixture_request("tpu-4-slices", JobSetApi::V09), &settings);
    assert_eq!(
        outcome.mutated_object, None,
        "google.com/tpu is no TPU under this setting"
    );
}

#[test]
fn invalid_settings_sent_with_a_request_are_a_server_error() {
    let outcome = validate(
        &fixture_request("tpu-4-slices", JobSetApi::V09),
        &json!({"jaxEnv": 1}),
    );
    assert!(!outcome.accepted);
    assert_eq!(outcome.code, Some(500));
    assert_eq!(
        outcome.message.as_deref(),
        Some("the policy settings are invalid: jaxEnv: expected one of \"annotated\", \"always\", \"never\", found the number 1")
    );
}

/// `queueCheck: false` is `off`: a queued TPU JobSet is not looked up, and its CREATE gets what
/// it gets under `off`, host calls and all (none).
#[test]
fn queue_check_false_is_off() {
    let request =
        multislice_host::fixtures::load_json(&multislice_host::fixtures::queue_request_path())
            .unwrap();
    for role in ["validate", "both"] {
        let off = validate(&request, &json!({"queueCheck": "off", "role": role}));
        let boolean = validate(&request, &json!({"queueCheck": false, "role": role}));
        assert!(boolean.accepted, "{:?}", boolean.message);
        assert_eq!(boolean, off, "{role}");
    }
}
