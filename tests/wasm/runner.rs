//! The runner against policy-server's behaviour: an instance reused across requests answers
//! each exactly as a fresh instance does (policy-server makes a fresh one per evaluation; its
//! workers before v1.10 and the bench reuse one), and an evaluation past its deadline is
//! refused as policy-server refuses it, with the instance replaced, not reused broken.
use crate::common::{fixture_request, patched, policy, validate};
use crate::jobs::job_request;
use multislice_host::controller::{self, JobSetApi};
use multislice_host::fixtures::{self, load_json};
use multislice_host::request::{admission_request, Kind};
use multislice_host::runner::{Deadline, DEADLINE_MESSAGE};
use multislice_host::{default_wasm_path, Outcome, Policy};
use serde_json::{json, Value};

/// One waPC call: its name (for messages), operation and payload.
struct Call {
    name: &'static str,
    operation: &'static str,
    payload: Vec<u8>,
}

fn validate_call(name: &'static str, request: &Value, settings: Value) -> Call {
    Call {
        name,
        operation: "validate",
        payload: serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap(),
    }
}

/// Requests of every kind the policy answers differently: a JobSet CREATE it mutates, a TPU
/// pod of that JobSet (under two settings), a fixture TPU pod, an opted-in Job, a refused
/// JobSet, payloads that are malformed, and a settings check.
fn calls() -> Vec<Call> {
    let jobset = fixture_request("tpu-4-slices", JobSetApi::V09);
    let admitted = patched(&jobset["object"], &validate(&jobset, &json!({})));
    let pod = &controller::jobset_pods(&admitted).unwrap()[5].object;
    let tpu_pod = load_json(&fixtures::pod_request_path("tpu-slice-pod")).unwrap();
    let refused = load_json(&fixtures::rule_request_path("g1-fail")).unwrap();
    let mut malformed = jobset.clone();
    malformed["object"]["spec"]["replicatedJobs"][0]["replicas"] = json!("four");
    vec![
        validate_call("JobSet CREATE", &jobset, json!({})),
        validate_call(
            "pod of the JobSet",
            &admission_request(Kind::Pod, "CREATE", pod, None),
            json!({}),
        ),
        validate_call(
            "pod of the JobSet, tpuWorkerEnv",
            &admission_request(Kind::Pod, "CREATE", pod, None),
            json!({"tpuWorkerEnv": true}),
        ),
        validate_call("TPU pod", &tpu_pod, json!({})),
        validate_call("Job CREATE", &job_request("jax-gpu-4"), json!({})),
        validate_call("refused JobSet", &refused, json!({})),
        validate_call("malformed JobSet", &malformed, json!({})),
        Call {
            name: "not JSON",
            operation: "validate",
            payload: b"{\"request\": ".to_vec(),
        },
        Call {
            name: "settings",
            operation: "validate_settings",
            payload: br#"{"tpuWorkerEnv": true, "jaxEnv": 3}"#.to_vec(),
        },
    ]
}

/// Each call's answer on a fresh instance, as policy-server gets it.
fn fresh_answers(calls: &[Call]) -> Vec<Vec<u8>> {
    calls
        .iter()
        .map(|c| policy().call(c.operation, &c.payload).unwrap())
        .collect()
}

#[test]
fn the_fresh_answers_differ_in_kind() {
    let calls = calls();
    let answers: Vec<Value> = fresh_answers(&calls)
        .iter()
        .map(|a| serde_json::from_slice(a).unwrap())
        .collect();
    let of = |name: &str| &answers[calls.iter().position(|c| c.name == name).unwrap()];
    for mutated in ["JobSet CREATE", "pod of the JobSet", "Job CREATE"] {
        assert_eq!(of(mutated)["accepted"], json!(true), "{mutated}");
        assert!(of(mutated)["mutated_object"].is_object(), "{mutated}");
    }
    assert_ne!(
        of("pod of the JobSet"),
        of("pod of the JobSet, tpuWorkerEnv")
    );
    for refused in ["refused JobSet", "malformed JobSet", "not JSON"] {
        assert_eq!(of(refused)["accepted"], json!(false), "{refused}");
        assert_eq!(of(refused)["code"], json!(400), "{refused}");
    }
    assert_eq!(of("settings")["valid"], json!(false));
}

/// One instance answers every request, in order, in reverse, and interleaved, byte for byte
/// as a fresh instance does: nothing of one request stays behind for the next.
#[test]
fn a_reused_instance_answers_as_a_fresh_one() {
    let calls = calls();
    let fresh = fresh_answers(&calls);
    let n = calls.len();
    let forward: Vec<usize> = (0..n).collect();
    let backward: Vec<usize> = (0..n).rev().collect();
    // 0, n-1, 1, n-2, …: each request after a different one than in either order above.
    let interleaved: Vec<usize> = (0..n)
        .map(|i| if i % 2 == 0 { i / 2 } else { n - 1 - i / 2 })
        .collect();
    let instance = policy().instance().unwrap();
    let id = instance.id();
    for (order, sequence) in [
        ("forward", &forward),
        ("backward", &backward),
        ("interleaved", &interleaved),
        ("forward again", &forward),
    ] {
        for &i in sequence {
            let answer = instance
                .call(calls[i].operation, &calls[i].payload)
                .unwrap();
            assert!(
                answer == fresh[i],
                "{order}: {} answered\n{}\nwhere a fresh instance answered\n{}",
                calls[i].name,
                String::from_utf8_lossy(&answer),
                String::from_utf8_lossy(&fresh[i])
            );
        }
    }
    assert_eq!(
        instance.id(),
        id,
        "answers without a trap keep the instance"
    );
}

/// The largest JobSet fixture, past its deadline: refused with policy-server's message and
/// code. `Expired` interrupts at the first epoch check, so no clock decides the outcome.
#[test]
fn an_evaluation_past_its_deadline_is_refused_as_policy_server_refuses_it() {
    let bytes = std::fs::read(default_wasm_path()).unwrap();
    let policy = Policy::with_deadline(&bytes, Deadline::Expired).unwrap();
    let request = fixture_request("xpk-pathways", JobSetApi::V09);
    let instance = policy.instance().unwrap();
    let id = instance.id();
    let outcome = instance.validate(&request, &json!({})).unwrap();
    assert_eq!(
        outcome,
        Outcome {
            accepted: false,
            message: Some(
                "Policy execution interrupted because it exceeded the allowed execution time"
                    .to_string()
            ),
            code: Some(500),
            warnings: vec![],
            mutated_object: None,
            patch: None,
        }
    );
    assert_eq!(outcome.message.as_deref(), Some(DEADLINE_MESSAGE));
    assert_ne!(instance.id(), id, "the interrupted instance is replaced");
    let replaced = instance.id();
    assert_eq!(instance.validate(&request, &json!({})).unwrap(), outcome);
    assert_ne!(instance.id(), replaced, "and so is its replacement");
    // A fresh instance per call, as policy-server makes, is refused alike.
    assert_eq!(policy.validate(&request, &json!({})).unwrap(), outcome);
}

/// Under policy-server's default deadline (2 s), the same request is answered.
#[test]
fn the_default_deadline_leaves_room_for_the_largest_fixture() {
    let request = fixture_request("xpk-pathways", JobSetApi::V09);
    let outcome = validate(&request, &json!({}));
    assert!(outcome.accepted, "{:?}", outcome.message);
}
