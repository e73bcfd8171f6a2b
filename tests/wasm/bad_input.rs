//! Bad input gets a 400 that names the field, never a trap (docs/contributing/spec.md §6).
use crate::common::*;
use multislice_host::controller::{self, JobSetApi};
use multislice_host::request::{admission_request, Kind};
use rstest::rstest;
use serde_json::{json, Value};

fn tpu_jobset() -> Value {
    fixture_request("tpu-4-slices", JobSetApi::V09)["object"].clone()
}

fn reject_message(request: &Value) -> String {
    let outcome = validate(request, &no_settings());
    assert!(!outcome.accepted, "accepted: {outcome:?}");
    assert_eq!(outcome.code, Some(400));
    outcome.message.unwrap()
}

fn jobset_with(pointer: &str, value: Value) -> Value {
    let mut jobset = tpu_jobset();
    *jobset
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{pointer}")) = value;
    admission_request(Kind::JobSet, "CREATE", &jobset, None)
}

const RJOB: &str = "/spec/replicatedJobs/0";
const TPU_LIMIT: &str = "/spec/replicatedJobs/0/template/spec/template/spec/containers/0/resources/limits/google.com~1tpu";

#[rstest]
#[case::replicas_string(RJOB, "replicas", json!("two"),
    "spec.replicatedJobs[0].replicas: expected a whole number, found the string \"two\"")]
#[case::replicas_negative(RJOB, "replicas", json!(-1),
    "spec.replicatedJobs[0].replicas: -1 is out of range, it must be a whole number from 0 to 2147483647")]
#[case::replicas_over_int32(RJOB, "replicas", json!(2147483648u64),
    "spec.replicatedJobs[0].replicas: 2147483648 is out of range, it must be a whole number from 0 to 2147483647")]
#[case::replicas_fraction(RJOB, "replicas", json!(1.5),
    "spec.replicatedJobs[0].replicas: expected a whole number, found the number 1.5")]
#[case::parallelism_bool("/spec/replicatedJobs/0/template/spec", "parallelism", json!(true),
    "spec.replicatedJobs[0].template.spec.parallelism: expected a whole number, found a boolean")]
#[case::rjob_name_number(RJOB, "name", json!(7),
    "spec.replicatedJobs[0].name: expected a string, found the number 7")]
#[case::depends_on_not_a_list(RJOB, "dependsOn", json!("initializer"),
    "spec.replicatedJobs[0].dependsOn: expected a list, found the string \"initializer\"")]
#[case::annotations_not_strings("/metadata", "annotations", json!({"a": 1}),
    "metadata.annotations[\"a\"]: expected a string, found the number 1")]
fn wrong_types_name_the_field(
    #[case] parent: &str,
    #[case] key: &str,
    #[case] value: Value,
    #[case] message: &str,
) {
    let mut jobset = tpu_jobset();
    jobset.pointer_mut(parent).unwrap()[key] = value;
    let request = admission_request(Kind::JobSet, "CREATE", &jobset, None);
    assert_eq!(reject_message(&request), message);
}

/// In a JobSet a TPU chip count belongs to rule T4; in a pod it is plain bad input.
#[rstest]
#[case::negative(json!("-4"), "\"-4\" is negative")]
#[case::gibi(json!("4Gi"), "\"4Gi\" is larger than any TPU slice")]
#[case::fraction(json!("0.5"), "\"0.5\" is not a whole number of chips")]
#[case::word(json!("four"), "\"four\" is not a Kubernetes quantity")]
fn bad_tpu_quantities_name_the_resource(#[case] value: Value, #[case] problem: &str) {
    let path = "spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.limits[\"google.com/tpu\"]";
    assert_eq!(
        reject_message(&jobset_with(TPU_LIMIT, value.clone())),
        format!("[T4] {path} (replicated job \"slice\"): {problem}; ask for a whole number of chips: the chips of one host, for example 4; see docs/rules.md, T4")
    );
    let mut pod = tpu_pod();
    pod["spec"]["containers"][0]["resources"]["limits"]["google.com/tpu"] = value;
    assert_eq!(
        reject_message(&admission_request(Kind::Pod, "CREATE", &pod, None)),
        format!("spec.containers[0].resources.limits[\"google.com/tpu\"]: {problem}")
    );
}

#[rstest]
#[case::no_spec("/spec", "spec: is required")]
#[case::no_template(
    "/spec/replicatedJobs/0/template",
    "spec.replicatedJobs[0].template: is required"
)]
#[case::no_pod_template(
    "/spec/replicatedJobs/0/template/spec/template",
    "spec.replicatedJobs[0].template.spec.template: is required"
)]
#[case::no_replicated_jobs("/spec/replicatedJobs", "spec.replicatedJobs: is required")]
fn missing_fields_are_named(#[case] pointer: &str, #[case] message: &str) {
    assert_eq!(reject_message(&jobset_with(pointer, Value::Null)), message);
}

#[test]
fn a_null_replicated_job_is_named() {
    assert_eq!(
        reject_message(&jobset_with(RJOB, Value::Null)),
        "spec.replicatedJobs[0]: expected an object, found null"
    );
}

#[test]
fn group_totals_that_overflow_are_rejected_not_wrapped() {
    let mut jobset = tpu_jobset();
    let rjob = jobset["spec"]["replicatedJobs"][0].clone();
    let rjobs: Vec<Value> = (0..3)
        .map(|i| {
            let mut r = rjob.clone();
            r["name"] = json!(format!("s{i}"));
            r["replicas"] = json!(i32::MAX);
            r
        })
        .collect();
    jobset["spec"]["replicatedJobs"] = json!(rjobs);
    assert_eq!(
        reject_message(&admission_request(Kind::JobSet, "CREATE", &jobset, None)),
        "spec.replicatedJobs[2].replicas: the total over its group is larger than 4294967295"
    );
}

#[rstest]
#[case::unknown_rjob(json!({"replicatedJob": "nope"}), "spec.coordinator.replicatedJob: no replicated job is named \"nope\"")]
#[case::job_index(json!({"replicatedJob": "slice", "jobIndex": 4}), "spec.coordinator.jobIndex: is 4 but replicated job \"slice\" has 4 replicas; use 0 to 3")]
#[case::pod_index(json!({"replicatedJob": "slice", "podIndex": 2}), "spec.coordinator.podIndex: is 2 but replicated job \"slice\" runs 2 pods per job; use 0 to 1")]
fn a_coordinator_that_names_no_pod_is_rejected(#[case] coordinator: Value, #[case] message: &str) {
    let mut jobset = tpu_jobset();
    jobset["spec"]["coordinator"] = coordinator;
    assert_eq!(
        reject_message(&admission_request(Kind::JobSet, "CREATE", &jobset, None)),
        message
    );
}

#[rstest]
#[case::not_json(&b"{not json"[..], "the request cannot be read as JSON: ")]
#[case::empty(&b""[..], "the request cannot be read as JSON: ")]
#[case::a_list(&b"[]"[..], "the payload is not a validation request ")]
#[case::request_a_number(&b"{\"request\": 5}"[..], "the payload is not a validation request ")]
fn malformed_payloads_are_rejected(#[case] payload: &[u8], #[case] prefix: &str) {
    let outcome = policy().validate_raw(payload, None).unwrap();
    assert!(!outcome.accepted);
    assert_eq!(outcome.code, Some(400));
    let message = outcome.message.unwrap();
    assert!(message.starts_with(prefix), "{message}");
}

#[test]
fn a_create_without_an_object_is_rejected() {
    let mut request = admission_request(Kind::JobSet, "CREATE", &tpu_jobset(), None);
    request.as_object_mut().unwrap().remove("object");
    assert_eq!(reject_message(&request), "request.object: is required");
}

fn tpu_pod() -> Value {
    controller::jobset_pods(&tpu_jobset()).unwrap()[0]
        .object
        .clone()
}

#[test]
fn a_pod_with_a_garbled_index_label_is_rejected() {
    let mut pod = tpu_pod();
    pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] = json!("abc");
    assert_eq!(
        reject_message(&admission_request(Kind::Pod, "CREATE", &pod, None)),
        "metadata.labels[\"jobset.sigs.k8s.io/job-index\"]: \"abc\" is not a whole number from 0 to 2147483647"
    );
}

#[test]
fn a_pod_with_forged_facts_is_rejected() {
    let mut pod = tpu_pod();
    // A field of the wrong type; a field this release does not know is read past (spec §9).
    pod["metadata"]["annotations"]["multislice.kubewarden.io/facts"] = json!("{\"slice\": 9}");
    let message = reject_message(&admission_request(Kind::Pod, "CREATE", &pod, None));
    assert!(
        message.starts_with("metadata.annotations[\"multislice.kubewarden.io/facts\"]: is not what this policy writes"),
        "{message}"
    );
}

#[test]
fn a_pod_the_controller_did_not_make_is_left_alone_with_a_warning() {
    let mut pod = tpu_pod();
    pod["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("jobset.sigs.k8s.io/job-index");
    pod["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("jobset.sigs.k8s.io/job-index");
    let outcome = validate(
        &admission_request(Kind::Pod, "CREATE", &pod, None),
        &no_settings(),
    );
    assert!(outcome.accepted);
    assert_eq!(outcome.mutated_object, None);
    assert_eq!(
        outcome.warnings,
        vec!["pod of JobSet \"llama-v5e\" has no jobset.sigs.k8s.io/replicatedjob-name or jobset.sigs.k8s.io/job-index label, so it was not made by the JobSet controller; left unchanged"]
    );
}

#[test]
fn a_garbled_index_only_in_the_annotations_is_named_there() {
    let mut pod = tpu_pod();
    pod["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("jobset.sigs.k8s.io/job-index");
    pod["metadata"]["annotations"]["jobset.sigs.k8s.io/job-index"] = json!("abc");
    assert_eq!(
        reject_message(&admission_request(Kind::Pod, "CREATE", &pod, None)),
        "metadata.annotations[\"jobset.sigs.k8s.io/job-index\"]: \"abc\" is not a whole number from 0 to 2147483647"
    );
}
