//! Facts across releases (docs/contributing/spec.md §9): the facts annotation outlives the
//! release that wrote it (a rollback, two releases of policy-server side by side, a JobSet that
//! waits in a Kueue queue for days). A reader ignores fields it does not know, reads facts that
//! lack the fields added since facts were first written as the older release wrote them, and
//! refuses, with one message, facts of a version it cannot read.
use crate::common::*;
use multislice_host::controller::{self, JobSetApi, SimPod};
use multislice_host::env::resolve;
use multislice_host::fixtures::{load_json, pod_request_path};
use multislice_host::request::{admission_request, Kind};
use multislice_host::Outcome;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const FACTS: &str = "multislice.kubewarden.io/facts";
const VERSION: &str = "multislice.kubewarden.io/facts-version";

/// A pod request of `test_data/pods/` with its facts annotation replaced by `facts`.
fn pod_with_facts(fixture: &str, facts: &str) -> Value {
    let mut request = load_json(&pod_request_path(fixture)).unwrap();
    request["object"]["metadata"]["annotations"][FACTS] = json!(facts);
    request
}

fn admit(request: &Value) -> Outcome {
    validate(request, &no_settings())
}

/// Each container's resolved env after admission, by container name.
fn env_of(request: &Value, outcome: &Outcome) -> BTreeMap<String, Vec<(String, String)>> {
    let pod = patched(&request["object"], outcome);
    pod["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap().to_string();
            (name, resolve(&pod, c).unwrap())
        })
        .collect()
}

fn pairs(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The pods of `fixture`'s JobSet as the controllers make them, before pod admission.
fn sim_pods(fixture: &str) -> Vec<SimPod> {
    let (_, admitted, _) = run(&fixture_request(fixture, JobSetApi::V09), &no_settings());
    controller::jobset_pods(&admitted).unwrap()
}

fn pod_request(pod: &Value, facts: &str) -> Value {
    let mut pod = pod.clone();
    pod["metadata"]["annotations"][FACTS] = json!(facts);
    admission_request(Kind::Pod, "CREATE", &pod, None)
}

const SLICE_FACTS: &str =
    r#"{"slice":{"total":4,"offset":0},"coordinator":"slice-0-0","podsPerJob":2}"#;

/// The env of test_data/pods/tpu-slice-pod (job 2 of 4 slices), as every release gave it.
fn slice_pod_env() -> Vec<(String, String)> {
    pairs(&[
        ("MEGASCALE_NUM_SLICES", "4"),
        ("MEGASCALE_SLICE_ID", "2"),
        (
            "MEGASCALE_COORDINATOR_ADDRESS",
            "llama-v5e-slice-0-0.llama-v5e",
        ),
    ])
}

#[test]
fn facts_with_fields_of_a_newer_release_are_read_as_without_them() {
    let newer = r#"{"slice":{"total":4,"offset":0,"stride":1},"coordinator":"slice-0-0","podsPerJob":2,"topologyHint":{"ring":[0,1,2,3]},"coordinatorOutside":false}"#;
    let request = pod_with_facts("tpu-slice-pod", newer);
    let outcome = admit(&request);
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!((outcome.code, outcome.message.as_deref()), (None, None));
    assert_eq!(outcome.warnings, Vec::<String>::new());
    let older = admit(&pod_with_facts("tpu-slice-pod", SLICE_FACTS));
    assert_eq!(outcome.patch_json(), older.patch_json());
    assert_eq!(env_of(&request, &outcome)["jax"], slice_pod_env());
}

#[test]
fn a_facts_version_this_release_cannot_read_is_refused_with_the_version_it_needs() {
    let mut request = pod_with_facts("tpu-slice-pod", SLICE_FACTS);
    request["object"]["metadata"]["annotations"][VERSION] = json!("2");
    let outcome = admit(&request);
    assert!(!outcome.accepted);
    assert_eq!(outcome.code, Some(400));
    assert_eq!(
        outcome.message.as_deref(),
        Some(
            "metadata.annotations[\"multislice.kubewarden.io/facts-version\"]: facts version 2, \
             written by a newer release of this policy; this release reads version 1: upgrade the \
             policy (or roll forward) to the release that stamped these facts"
        )
    );
    assert_eq!(outcome.warnings, Vec::<String>::new());
    assert_eq!(outcome.patch, None);
}

#[test]
fn facts_version_1_written_out_is_the_version_this_release_reads() {
    let mut request = pod_with_facts("tpu-slice-pod", SLICE_FACTS);
    request["object"]["metadata"]["annotations"][VERSION] = json!("1");
    let outcome = admit(&request);
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    assert_eq!(env_of(&request, &outcome)["jax"], slice_pod_env());
}

/// `coordinatorOutside` absent: the coordinator is taken as inside the slice group, so with two
/// TPU containers its address names container 0's DCN port, as before the field existed.
#[test]
fn facts_without_coordinator_outside() {
    let with = r#"{"slice":{"total":2,"offset":0},"coordinator":"head-0-0","coordinatorOutside":true,"podsPerJob":2}"#;
    let without = r#"{"slice":{"total":2,"offset":0},"coordinator":"head-0-0","podsPerJob":2}"#;
    for (facts, address) in [
        (with, "ironwood-head-0-0.ironwood"),
        (without, "ironwood-head-0-0.ironwood:8081"),
    ] {
        let request = pod_with_facts("tpu7x-two-containers-pod", facts);
        let outcome = admit(&request);
        assert!(outcome.accepted, "{:?}", outcome.message);
        assert_eq!(outcome.warnings, Vec::<String>::new());
        let env = env_of(&request, &outcome);
        for (k, c) in ["jax-0", "jax-1"].iter().enumerate() {
            let port = (8081 + k).to_string();
            assert_eq!(
                env[*c],
                pairs(&[
                    ("MEGASCALE_NUM_SLICES", "2"),
                    ("MEGASCALE_SLICE_ID", "0"),
                    ("MEGASCALE_COORDINATOR_ADDRESS", address),
                    ("MEGASCALE_PORT", &port),
                ]),
                "{facts}"
            );
        }
    }
}

/// `coordinatorPort` absent: the coordinator address names no port of the user's.
#[test]
fn facts_without_coordinator_port() {
    let with = r#"{"slice":{"total":4,"offset":0},"coordinator":"slice-0-0","coordinatorPort":9000,"podsPerJob":2}"#;
    for (facts, address) in [
        (with, "llama-v5e-slice-0-0.llama-v5e:9000"),
        (SLICE_FACTS, "llama-v5e-slice-0-0.llama-v5e"),
    ] {
        let request = pod_with_facts("tpu-slice-pod", facts);
        let outcome = admit(&request);
        assert!(outcome.accepted, "{:?}", outcome.message);
        assert_eq!(outcome.warnings, Vec::<String>::new());
        assert_eq!(
            env_of(&request, &outcome)["jax"],
            pairs(&[
                ("MEGASCALE_NUM_SLICES", "4"),
                ("MEGASCALE_SLICE_ID", "2"),
                ("MEGASCALE_COORDINATOR_ADDRESS", address),
            ]),
            "{facts}"
        );
    }
}

/// `runsFirst` absent: the replicated job is read as one of the slices, as releases before
/// `dependsOn` was understood stamped and read it.
#[test]
fn facts_without_runs_first() {
    let first = r#"{"runsFirst":true,"podsPerJob":2}"#;
    let request = pod_with_facts("tpu-slice-pod", first);
    let outcome = admit(&request);
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    assert_eq!(outcome.patch, None, "a pod that runs first gets no env");

    let request = pod_with_facts("tpu-slice-pod", SLICE_FACTS);
    let outcome = admit(&request);
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    assert_eq!(env_of(&request, &outcome)["jax"], slice_pod_env());
}

/// The JAX env of pod `hostname` of jax-gpu's JobSet under `facts`, every container.
fn gpu_pod_env(hostname: &str, facts: &str) -> (Outcome, BTreeMap<String, Vec<(String, String)>>) {
    let pod = sim_pods("jax-gpu")
        .into_iter()
        .find(|p| p.hostname == hostname)
        .unwrap();
    let request = pod_request(&pod.object, facts);
    let outcome = admit(&request);
    assert!(outcome.accepted, "{:?}", outcome.message);
    let env = env_of(&request, &outcome);
    (outcome, env)
}

fn jax_env(coordinator: &str, n: &str, id: &str) -> Vec<(String, String)> {
    pairs(&[
        ("JAX_COORDINATOR_ADDRESS", coordinator),
        ("JAX_NUM_PROCESSES", n),
        ("JAX_PROCESS_ID", id),
    ])
}

/// `jax.coordinator` absent (the first release's facts): the JAX coordinator is the facts'
/// `coordinator`, which is process 0, and the ids are the numbering's, as that release gave.
#[test]
fn facts_without_a_jax_coordinator() {
    let first_release = r#"{"jax":{"total":8,"offset":4},"coordinator":"a100-0-0","podsPerJob":4}"#;
    let (outcome, env) = gpu_pod_env("gpu-train-h100-0-2", first_release);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    let want = jax_env("gpu-train-a100-0-0.gpu-train:6666", "8", "6");
    assert_eq!(env["jax"], want);
    assert_eq!(env["metrics"], want);
}

/// `jax.coordinatorId` absent: the coordinator is pod 0 of the numbering, and no id moves.
#[test]
fn facts_without_a_jax_coordinator_id() {
    let current = r#"{"jax":{"total":8,"offset":4,"coordinator":"h100-0-3","coordinatorId":7},"podsPerJob":4}"#;
    let before = r#"{"jax":{"total":8,"offset":4,"coordinator":"h100-0-3"},"podsPerJob":4}"#;
    for (facts, id_of_pod_3) in [(current, "0"), (before, "7")] {
        let (outcome, env) = gpu_pod_env("gpu-train-h100-0-3", facts);
        assert_eq!(outcome.warnings, Vec::<String>::new());
        let want = jax_env("gpu-train-h100-0-3.gpu-train:6666", "8", id_of_pod_3);
        assert_eq!(env["jax"], want, "{facts}");
        assert_eq!(env["metrics"], want, "{facts}");
    }
}

/// `job` absent on a pod outside any JobSet: facts that name no Job were never a plain Job's
/// (releases before plain Jobs served none), so the pod is left as it came.
#[test]
fn facts_without_job() {
    let mut request = crate::jobs::job_request("jax-gpu-4");
    let (_, admitted, _) = run_job(&request, &no_settings());
    let pod = controller::indexed_job_pods(&admitted).unwrap().remove(1);
    for (facts, patched) in [
        (r#"{"subdomain":"jax-train","job":{"completions":4}}"#, true),
        (r#"{"subdomain":"jax-train"}"#, false),
    ] {
        request = pod_request(&pod.object, facts);
        let outcome = admit(&request);
        assert!(outcome.accepted, "{:?}", outcome.message);
        assert_eq!(outcome.warnings, Vec::<String>::new());
        assert_eq!(outcome.patch.is_some(), patched, "{facts}");
        if patched {
            let want = jax_env("jax-train-0.jax-train:6666", "4", "1");
            let env = &env_of(&request, &outcome)["jax"];
            let jax: Vec<(String, String)> = env
                .iter()
                .filter(|(k, _)| k.starts_with("JAX_"))
                .cloned()
                .collect();
            assert_eq!(jax, want);
        }
    }
}
