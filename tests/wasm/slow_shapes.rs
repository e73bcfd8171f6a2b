//! Requests near the API server's 3 MiB body limit, built to be slow (docs/contributing/testing.md
//! "Reliability"). The API server hands mutating admission the object as it came, before its
//! own validation of sizes and schema, so each of these reaches the policy. Every one is
//! answered, with its exact outcome, well inside policy-server's 2 s deadline: no path of the
//! policy may grow faster than the request.
//!
//! They are built here rather than kept in test_data/bad/ (about 10 MB together), and
//! `make test` runs them alone, as it does the 64 MB request, so that their clock is not
//! shared with other tests on two cores.
use crate::common::*;
use multislice_host::controller::JobSetApi;
use multislice_host::fixtures::{load_json, pod_request_path};
use multislice_host::Outcome;
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// Well inside the 2 s that policy-server gives a policy.
const IN_TIME: Duration = Duration::from_millis(1000);

/// The answer to `request`, and how long the module took, on a new instance as policy-server
/// makes one for every evaluation.
fn timed(name: &str, request: &Value) -> Outcome {
    let payload = serde_json::to_vec(&json!({"request": request, "settings": {}})).unwrap();
    let mb = payload.len() as f64 / 1e6;
    assert!(
        mb < 3.2,
        "{name}: {mb:.2} MB is past the API server's limit"
    );
    let start = Instant::now();
    let outcome = policy()
        .validate_raw(&payload, Some(&request["object"]))
        .unwrap_or_else(|e| panic!("{name}: the host failed: {e:#}"));
    let took = start.elapsed();
    eprintln!("{name}: {mb:.2} MB answered in {took:.0?}");
    assert!(took < IN_TIME, "{name}: {took:?}, past {IN_TIME:?}");
    outcome
}

fn jobset_request() -> Value {
    fixture_request("tpu-4-slices", JobSetApi::V09)
}

fn tpu_pod_request() -> Value {
    load_json(&pod_request_path("tpu-slice-pod")).unwrap()
}

fn many(n: usize, entry: impl Fn(usize) -> (String, Value)) -> Value {
    Value::Object((0..n).map(entry).collect::<Map<String, Value>>())
}

/// `n` env entries where each doubles the one before it (`E1=$(E0)$(E0)`, …), as the kubelet
/// would expand them without end, and a user value for a variable the policy computes, so
/// that the policy resolves all of them to judge it. Every tenth entry reads a key that no
/// JobSet release sets, one edit from a real one, for a warning and its "did you mean".
fn doubling_env(n: usize) -> Value {
    let mut env: Vec<Value> = vec![json!({"name": "E0", "value": "x"})];
    env.extend((1..n).map(|i| {
        if i % 10 == 0 {
            json!({"name": format!("E{i}"), "valueFrom": {"fieldRef": {"fieldPath":
                "metadata.annotations['jobset.sigs.k8s.io/job-globalindex']"}}})
        } else {
            json!({"name": format!("E{i}"), "value": format!("$(E{})$(E{})", i - 1, i - 1)})
        }
    }));
    env.push(json!({"name": "MEGASCALE_NUM_SLICES", "value": format!("$(E{})", n - 1)}));
    json!(env)
}

#[test]
fn template_annotations_and_labels() {
    for map in ["annotations", "labels"] {
        let mut request = jobset_request();
        request["object"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
            ["metadata"][map] = many(50_000, |i| (format!("example.com/key-{i:05}"), json!("v")));
        let outcome = timed(
            &format!("a JobSet with 50,000 pod-template {map}"),
            &request,
        );
        assert!(outcome.accepted, "{:?}", outcome.message);
        assert_eq!(outcome.warnings, Vec::<String>::new());
        let admitted = patched(&request["object"], &outcome);
        let template = &admitted["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
        // Nothing lost (spec §4.5): every key is still there beside the policy's.
        assert_eq!(
            template["metadata"][map]["example.com/key-49999"],
            json!("v")
        );
        assert!(template["metadata"][map].as_object().unwrap().len() >= 50_000);
    }
}

#[test]
fn env_entries_in_a_jobset_container() {
    let mut request = jobset_request();
    request["object"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        ["containers"][0]["env"] = doubling_env(25_000);
    let outcome = timed(
        "a JobSet with 25,000 env entries in its TPU container",
        &request,
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    // One warning for each of the 2,499 entries that read the misspelt key, and none for
    // MEGASCALE_NUM_SLICES, whose value is too long to be known at admission.
    assert_eq!(
        outcome.warnings.len(),
        2_499,
        "{:?}",
        &outcome.warnings[..3]
    );
    assert_eq!(
        outcome.warnings[0],
        "spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[10]: E10 reads \
         the annotation jobset.sigs.k8s.io/job-globalindex, which no JobSet release sets on \
         pods, so E10 will be empty in every pod; did you mean jobset.sigs.k8s.io/job-global-index?"
    );
}

#[test]
fn env_entries_in_a_tpu_pod() {
    let mut request = tpu_pod_request();
    request["object"]["spec"]["containers"][0]["env"] = doubling_env(25_000);
    let outcome = timed("a TPU pod with 25,000 env entries", &request);
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    let admitted = patched(&request["object"], &outcome);
    let env = admitted["spec"]["containers"][0]["env"].as_array().unwrap();
    // The user's entries stay, after the policy's, and the user's MEGASCALE_NUM_SLICES is kept.
    assert_eq!(env.len(), 25_001 + 2);
    assert_eq!(env[0]["name"], json!("MEGASCALE_SLICE_ID"));
    assert_eq!(env[1]["name"], json!("MEGASCALE_COORDINATOR_ADDRESS"));
    assert_eq!(env[2], json!({"name": "E0", "value": "x"}));
    assert_eq!(env.last().unwrap()["value"], json!("$(E24999)"));
}

/// Every entry reads the same 1.4 MB annotation: the value is looked up once, and copied only
/// up to the container's budget, so the answer cannot grow with entries times value.
#[test]
fn env_entries_that_read_one_large_annotation() {
    let mut request = tpu_pod_request();
    request["object"]["metadata"]["annotations"]["a"] = json!("v".repeat(1_400_000));
    let mut env: Vec<Value> = (0..20_000)
        .map(|i| {
            json!({"name": format!("E{i}"), "valueFrom": {"fieldRef": {"fieldPath":
                "metadata.annotations['a']"}}})
        })
        .collect();
    env.push(json!({"name": "MEGASCALE_NUM_SLICES", "value": "$(E19999)"}));
    request["object"]["spec"]["containers"][0]["env"] = json!(env);
    let outcome = timed(
        "a TPU pod with 20,000 env entries reading one 1.4 MB annotation",
        &request,
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    // E19999 is past the budget, so the user's MEGASCALE_NUM_SLICES is unknown: no warning.
    assert_eq!(outcome.warnings, Vec::<String>::new());
    let admitted = patched(&request["object"], &outcome);
    let env = admitted["spec"]["containers"][0]["env"].as_array().unwrap();
    assert_eq!(env.len(), 20_001 + 2);
    assert_eq!(env[0]["name"], json!("MEGASCALE_SLICE_ID"));
    assert_eq!(env[1]["name"], json!("MEGASCALE_COORDINATOR_ADDRESS"));
    assert_eq!(env.last().unwrap()["value"], json!("$(E19999)"));
}

#[test]
fn annotations_on_a_tpu_pod() {
    let mut request = tpu_pod_request();
    let annotations = request["object"]["metadata"]["annotations"]
        .as_object_mut()
        .unwrap();
    for i in 0..50_000 {
        annotations.insert(format!("example.com/key-{i:05}"), json!("v"));
    }
    let outcome = timed("a TPU pod with 50,000 annotations", &request);
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    assert!(outcome.patch.is_some(), "the pod gets its env");
}

#[test]
fn a_jobset_with_1000_replicated_jobs() {
    let mut request = jobset_request();
    let rjob = request["object"]["spec"]["replicatedJobs"][0].clone();
    request["object"]["spec"]["replicatedJobs"] = json!((0..1000)
        .map(|i| {
            let mut r = rjob.clone();
            r["name"] = json!(format!("s{i}"));
            r["replicas"] = json!(1);
            r
        })
        .collect::<Vec<_>>());
    let outcome = timed("a JobSet with 1,000 replicated jobs", &request);
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    let admitted = patched(&request["object"], &outcome);
    // One slice group of 1,000 slices: the last replicated job's pods are slice 999.
    let last = &admitted["spec"]["replicatedJobs"][999]["template"]["spec"]["template"];
    let facts = last["metadata"]["annotations"]["multislice.kubewarden.io/facts"]
        .as_str()
        .unwrap();
    assert!(
        facts.contains(r#""slice":{"total":1000,"offset":999}"#),
        "{facts}"
    );
}
