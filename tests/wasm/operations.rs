//! Exact outcomes per kind and operation (docs/contributing/spec.md §5), through the real module.
use crate::common::*;
use multislice_host::controller::{self, JobSetApi};
use multislice_host::fixtures;
use multislice_host::request::{admission_request, Kind};
use rstest::rstest;
use serde_json::{json, Value};

const FACTS_PATH: &str = "/spec/replicatedJobs/0/template/spec/template/metadata/annotations";

#[test]
fn speaks_protocol_v1() {
    assert_eq!(policy().protocol_version().unwrap(), json!("v1"));
}

#[rstest]
#[case::v09(
    JobSetApi::V09,
    r#"{"slice":{"total":4,"offset":0},"coordinator":"slice-0-0","podsPerJob":2}"#
)]
#[case::v08(JobSetApi::V08, r#"{"group":{"name":"default","replicas":4,"offset":0},"slice":{"total":4,"offset":0},"coordinator":"slice-0-0","podsPerJob":2}"#)]
fn jobset_create_stamps_the_facts(#[case] api: JobSetApi, #[case] facts: &str) {
    let outcome = validate(&fixture_request("tpu-4-slices", api), &no_settings());
    assert!(outcome.accepted);
    assert_eq!(
        outcome.patch_json(),
        json!([{"op": "add", "path": FACTS_PATH, "value": {"multislice.kubewarden.io/facts": facts}}])
    );
}

#[rstest]
#[case::v09(JobSetApi::V09, json!([
    {"op": "add", "path": "/spec/containers/0/env", "value": [
        {"name": "MEGASCALE_NUM_SLICES", "value": "4"},
        {"name": "MEGASCALE_SLICE_ID", "value": "2"},
        {"name": "MEGASCALE_COORDINATOR_ADDRESS", "value": "llama-v5e-slice-0-0.llama-v5e"}
    ]}
]))]
#[case::v08(JobSetApi::V08, json!([
    {"op": "add", "path": "/metadata/annotations/jobset.sigs.k8s.io~1group-name", "value": "default"},
    {"op": "add", "path": "/metadata/annotations/jobset.sigs.k8s.io~1group-replicas", "value": "4"},
    {"op": "add", "path": "/metadata/annotations/jobset.sigs.k8s.io~1job-group-index", "value": "2"},
    {"op": "add", "path": "/metadata/labels/jobset.sigs.k8s.io~1group-name", "value": "default"},
    {"op": "add", "path": "/metadata/labels/jobset.sigs.k8s.io~1group-replicas", "value": "4"},
    {"op": "add", "path": "/metadata/labels/jobset.sigs.k8s.io~1job-group-index", "value": "2"},
    {"op": "add", "path": "/spec/containers/0/env", "value": [
        {"name": "MEGASCALE_NUM_SLICES", "value": "4"},
        {"name": "MEGASCALE_SLICE_ID", "value": "2"},
        {"name": "MEGASCALE_COORDINATOR_ADDRESS", "value": "llama-v5e-slice-0-0.llama-v5e"}
    ]}
]))]
fn tpu_pod_create_gets_exactly_its_values(#[case] api: JobSetApi, #[case] patch: Value) {
    let (_, _, pods) = run(&fixture_request("tpu-4-slices", api), &no_settings());
    let pod = pods
        .iter()
        .find(|p| p.sim.hostname == "llama-v5e-slice-2-1")
        .unwrap();
    assert_eq!(pod.outcome.patch_json(), patch);
}

#[test]
fn a_jobset_that_needs_nothing_gets_no_patch() {
    let outcome = validate(&fixture_request("cpu-only", JobSetApi::V09), &no_settings());
    assert!(outcome.accepted);
    assert_eq!(outcome.mutated_object, None);
    let (_, _, pods) = run(&fixture_request("cpu-only", JobSetApi::V09), &no_settings());
    assert!(pods.iter().all(|p| p.outcome.mutated_object.is_none()));
}

#[test]
fn a_pod_outside_any_jobset_is_accepted_untouched() {
    let request = fixtures::load_json(&fixtures::pod_request_path("not-a-jobset-pod")).unwrap();
    let outcome = validate(&request, &no_settings());
    assert!(outcome.accepted);
    assert_eq!(
        (outcome.mutated_object, outcome.warnings, outcome.message),
        (None, vec![], None)
    );
}

#[rstest]
#[case::jobset_update(Kind::JobSet, "UPDATE")]
#[case::jobset_delete(Kind::JobSet, "DELETE")]
#[case::pod_update(Kind::Pod, "UPDATE")]
#[case::pod_delete(Kind::Pod, "DELETE")]
#[case::pod_connect(Kind::Pod, "CONNECT")]
#[case::job_update(Kind::Job, "UPDATE")]
#[case::job_delete(Kind::Job, "DELETE")]
fn other_operations_are_accepted_without_a_patch(#[case] kind: Kind, #[case] operation: &str) {
    // An unstamped TPU JobSet, one of its pods, and an unstamped opted-in Job: CREATE would
    // mutate each.
    let jobset = fixture_request("tpu-4-slices", JobSetApi::V08)["object"].clone();
    let object = match kind {
        Kind::JobSet => jobset,
        Kind::Pod => controller::jobset_pods(&jobset).unwrap()[0].object.clone(),
        Kind::Job => crate::jobs::job_request("jax-gpu-4")["object"].clone(),
    };
    let request = admission_request(kind, operation, &object, Some(&object));
    let outcome = validate(&request, &no_settings());
    assert!(outcome.accepted);
    assert_eq!(outcome.mutated_object, None);
}

#[test]
fn the_same_request_gives_the_same_bytes() {
    let request = fixture_request("tpu-two-groups", JobSetApi::V08);
    let payload = serde_json::to_vec(&json!({"request": request, "settings": {}})).unwrap();
    let first = policy().call("validate", &payload).unwrap();
    for _ in 0..3 {
        assert_eq!(policy().call("validate", &payload).unwrap(), first);
    }
}

#[test]
fn forged_facts_on_a_jobset_that_needs_none_are_neutralised() {
    let mut request = fixture_request("cpu-only", JobSetApi::V09);
    request["object"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = json!({"annotations": {"multislice.kubewarden.io/facts": r#"{"jax":{"total":9,"offset":0},"coordinator":"x-0-0","podsPerJob":1}"#}});
    let outcome = validate(&request, &no_settings());
    assert_eq!(
        outcome.patch_json(),
        json!([{"op": "replace", "path": format!("{FACTS_PATH}/multislice.kubewarden.io~1facts"), "value": "{}"}])
    );
}

#[test]
fn committed_request_fixtures_match_their_yaml_sources() {
    for (path, content) in fixtures::generate_all().unwrap() {
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("{} is missing; run `make fixtures`", path.display()));
        assert_eq!(
            committed,
            content,
            "{} is stale; run `make fixtures`",
            path.display()
        );
    }
}
