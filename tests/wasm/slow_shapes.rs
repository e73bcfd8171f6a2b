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

/// A quarter of the 2 s that policy-server gives a policy, so that a build beside it on two
/// cores (which about doubles a time) still leaves room.
const IN_TIME: Duration = Duration::from_millis(500);

/// The answer to `request`, and how long the module took, on a new instance as policy-server
/// makes one for every evaluation.
fn timed(name: &str, request: &Value) -> Outcome {
    let payload = serde_json::to_vec(&json!({"request": request, "settings": {}})).unwrap();
    let mb = payload.len() as f64 / 1e6;
    assert!(
        mb < 3.2,
        "{name}: {mb:.2} MB is past the API server's limit"
    );
    // policy-server compiles the module once, at its start, not per request.
    let policy = policy();
    let start = Instant::now();
    let outcome = policy
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
    // MEGASCALE_NUM_SLICES, whose value is too long to be known at admission: the first 9,
    // then how many more.
    let mut want: Vec<String> = (1..10)
        .map(|k| {
            format!(
                "spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[{e}]: E{e} \
                 reads the annotation jobset.sigs.k8s.io/job-globalindex, which no JobSet release \
                 sets, so it is empty in every pod; did you mean jobset.sigs.k8s.io/job-global-index?",
                e = k * 10
            )
        })
        .collect();
    want.push("… and 2490 more like these".into());
    assert_eq!(outcome.warnings, want);
}

/// The patch the fixture JobSet gets without any of the entries a shape adds.
fn plain_jobset_patch() -> Value {
    validate(&jobset_request(), &no_settings()).patch_json()
}

/// `n` entries of a TPU container, each a `fieldRef` to the annotation `key(i)`.
fn references(n: usize, name: impl Fn(usize) -> String, key: impl Fn(usize) -> String) -> Value {
    json!((0..n)
        .map(|i| {
            json!({"name": name(i), "valueFrom": {"fieldRef": {"fieldPath":
                format!("metadata.annotations['{}']", key(i))}}})
        })
        .collect::<Vec<_>>())
}

/// The warnings of a shape whose every entry reads a key no JobSet release sets: the first 9,
/// then how many more.
fn first_nine_and_the_rest(n: usize, one: impl Fn(usize) -> String) -> Vec<String> {
    let mut want: Vec<String> = (0..9).map(one).collect();
    want.push(format!("… and {} more like these", n - 9));
    want
}

/// 25,000 references to distinct keys under jobset.sigs.k8s.io/ that no release sets, each of
/// a length within two of several known keys and sharing a prefix with one: every one is
/// compared with the known keys for a "did you mean", within two edits at most.
#[test]
fn references_to_25000_unknown_jobset_keys() {
    let mut request = jobset_request();
    let key = |i: usize| format!("jobset.sigs.k8s.io/job-global-{i:05}");
    request["object"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        ["containers"][0]["env"] = references(25_000, |i| format!("V{i:05}"), key);
    let outcome = timed(
        "a JobSet with 25,000 fieldRefs to unknown jobset.sigs.k8s.io/ keys",
        &request,
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.patch_json(), plain_jobset_patch());
    let want = first_nine_and_the_rest(25_000, |i| {
        format!(
            "spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[{i}]: \
             V{i:05} reads the annotation {}, which no JobSet release sets, so it is \
             empty in every pod",
            key(i)
        )
    });
    assert_eq!(outcome.warnings, want);
}

/// 14,000 references to keys of 100 characters, longer than any key JobSet sets by more than
/// two: no "did you mean" needs computing.
#[test]
fn references_to_14000_keys_of_100_characters() {
    let mut request = jobset_request();
    let key = |i: usize| format!("jobset.sigs.k8s.io/{}{i:05}", "k".repeat(76));
    assert_eq!(key(0).len(), 100);
    request["object"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        ["containers"][0]["env"] =
        references(14_000, |i| format!("V{i:05}_{}", "N".repeat(30)), key);
    let outcome = timed(
        "a JobSet with 14,000 fieldRefs to keys of 100 characters",
        &request,
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.patch_json(), plain_jobset_patch());
    let want = first_nine_and_the_rest(14_000, |i| {
        let full = format!(
            "spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[{i}]: \
             V{i:05}_{} reads the annotation {}, which no JobSet release sets, so it is empty in \
             every pod",
            "N".repeat(30),
            key(i)
        );
        // Past 256 characters a warning is cut, its path kept.
        let mut cut: String = full.chars().take(255).collect();
        cut.push('…');
        cut
    });
    assert_eq!(outcome.warnings, want);
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

/// 1,000 TPU and 1,000 CPU replicated jobs in one named group: G3 refuses each CPU one, naming
/// the TPU ones it shares the group with; at most three of them, or the message would grow with
/// the product of the two. An UPDATE that changes nothing compares as many findings of the old
/// object with as many of the new, by lookup.
#[test]
fn a_named_group_of_1000_tpu_and_1000_cpu_replicated_jobs() {
    let mut request = jobset_request();
    let tpu = request["object"]["spec"]["replicatedJobs"][0].clone();
    let mut cpu = tpu.clone();
    cpu["template"]["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("resources");
    let named = |base: &Value, name: String| {
        let mut r = base.clone();
        r["name"] = json!(name);
        r["replicas"] = json!(1);
        r["groupName"] = json!("train");
        r
    };
    let rjobs: Vec<Value> = (0..1000)
        .map(|i| named(&tpu, format!("s{i}")))
        .chain((0..1000).map(|i| named(&cpu, format!("c{i}"))))
        .collect();
    request["object"]["spec"]["replicatedJobs"] = json!(rjobs);
    let outcome = timed(
        "a JobSet of 1,000 TPU and 1,000 CPU replicated jobs in one named group",
        &request,
    );
    assert!(!outcome.accepted);
    let message = outcome.message.unwrap();
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 1000);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(
            *line,
            format!(
                "[G3] spec.replicatedJobs[{}].groupName (replicated job \"c{i}\"): puts this \
                 non-TPU replicated job in group \"train\" with TPU replicated jobs [\"s0\", \
                 \"s1\", \"s2\"] and 997 more; give it a group of its own, or leave it in \
                 \"default\", where non-TPU jobs are not counted as slices; see docs/rules.md, G3",
                1000 + i
            )
        );
    }
    assert_eq!(outcome.warnings, Vec::<String>::new());
    let object = &request["object"];
    let mut update = request.clone();
    update["operation"] = json!("UPDATE");
    update["oldObject"] = object.clone();
    let outcome = timed(
        "an UPDATE that changes nothing of that JobSet (1,000 violations before and after)",
        &update,
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(
        (outcome.patch, outcome.warnings),
        (None, Vec::<String>::new())
    );
}
