//! The roles of docs/contributing/spec.md §5, through the module: the recommended pair (a `mutate` policy, then a
//! `validate` policy on the object as it will be stored) gives every object exactly what the
//! single `both` policy gives it; `validate` never mutates and `mutate` never judges.
use crate::common::*;
use multislice_gen::rule_fixtures;
use multislice_host::controller::{self, JobSetApi};
use multislice_host::fixtures::{self, load_json};
use multislice_host::request::{admission_request, Kind};
use multislice_host::Outcome;
use serde_json::{json, Value};

fn in_role(settings: &Value, role: &str) -> Value {
    let mut s = settings.clone();
    s["role"] = json!(role);
    s
}

fn admit(kind: Kind, operation: &str, object: &Value, old: Option<&Value>, s: &Value) -> Outcome {
    validate(&admission_request(kind, operation, object, old), s)
}

/// What the API server stores after the mutating half and the webhooks after it: Kueue's
/// webhook suspends a JobSet that carries its queue label.
fn stored(kind: Kind, mut object: Value) -> Value {
    let queued = object["metadata"]["labels"]["kueue.x-k8s.io/queue-name"].is_string();
    if kind == Kind::JobSet && queued {
        object["spec"]["suspend"] = json!(true);
    }
    object
}

/// The pair against `both` on one CREATE, asserted exactly: the mutating half answers what
/// `both` would patch, with the warnings about what it added, and refuses only what `both`
/// refuses as malformed (a message with no rule id); the validating half, on the stored object,
/// answers `both`'s verdict and message, with the rest of its warnings, and never a patch.
fn pair_gives_what_both_gives(what: &str, kind: Kind, object: &Value, settings: &Value) {
    let both = admit(kind, "CREATE", object, None, &in_role(settings, "both"));
    let mutate = admit(kind, "CREATE", object, None, &in_role(settings, "mutate"));
    let malformed = !both.accepted && !both.message.as_deref().unwrap_or("").starts_with('[');
    if malformed {
        assert_eq!(
            (mutate.accepted, &mutate.message),
            (false, &both.message),
            "{what}"
        );
        return;
    }
    assert!(
        mutate.accepted,
        "{what}: mutate refused {:?}",
        mutate.message
    );
    let stored = stored(kind, patched(object, &mutate));
    let judged = admit(
        kind,
        "CREATE",
        &stored,
        None,
        &in_role(settings, "validate"),
    );
    assert_eq!(judged.mutated_object, None, "{what}: validate mutated");
    assert_eq!(
        (judged.accepted, &judged.message, judged.code),
        (both.accepted, &both.message, both.code),
        "{what}"
    );
    if both.accepted {
        assert_eq!(mutate.patch, both.patch, "{what}: patch");
        // Each half warns about its own work: the mutating one about what it added (docs/contributing/spec.md
        // §4.7), the validating one the rest; `both` gives the two.
        let halves = [judged.warnings, mutate.warnings].concat();
        assert_eq!(halves, both.warnings, "{what}: warnings");
    } else {
        assert_eq!(judged.warnings, both.warnings, "{what}: warnings");
    }
}

#[test]
fn the_pair_gives_every_jobset_fixture_what_both_gives() {
    let settings = no_settings();
    let mut count = 0;
    for name in fixtures::jobset_names().unwrap() {
        for api in [JobSetApi::V08, JobSetApi::V09] {
            let object = fixture_request(&name, api)["object"].clone();
            pair_gives_what_both_gives(
                &format!("{name} {api:?}"),
                Kind::JobSet,
                &object,
                &settings,
            );
            count += 1;
        }
    }
    for (stem, object) in fixtures::example_jobsets().unwrap() {
        pair_gives_what_both_gives(&stem, Kind::JobSet, &object, &settings);
        count += 1;
    }
    assert!(count > 20, "{count}");
}

#[test]
fn the_pair_gives_every_rule_fixture_what_both_gives() {
    for (name, expected) in rule_fixtures::expectations() {
        let settings = expected.settings.clone().unwrap_or_else(no_settings);
        let object = rule_fixtures::fixture(&name);
        pair_gives_what_both_gives(&name, Kind::JobSet, &object, &settings);
    }
}

#[test]
fn the_pair_gives_every_job_fixture_what_both_gives() {
    for settings in [json!({}), json!({"jaxEnv": "never"})] {
        for name in fixtures::job_names().unwrap() {
            let object = load_json(&fixtures::job_request_path(&name)).unwrap()["object"].clone();
            pair_gives_what_both_gives(&name, Kind::Job, &object, &settings);
        }
        for (stem, object) in fixtures::example_jobs().unwrap() {
            pair_gives_what_both_gives(&stem, Kind::Job, &object, &settings);
        }
    }
}

/// Malformed objects: each role refuses them with the same message.
#[test]
fn every_role_refuses_a_malformed_jobset_alike() {
    let bad = json!({"metadata": {"name": "x"}, "spec": {"replicatedJobs": [{"name": "w", "replicas": "two"}]}});
    let answers: Vec<Outcome> = ["both", "mutate", "validate"]
        .iter()
        .map(|role| admit(Kind::JobSet, "CREATE", &bad, None, &json!({"role": role})))
        .collect();
    for a in &answers {
        assert_eq!(a.code, Some(400));
        assert_eq!(a.message, answers[0].message);
    }
    assert_eq!(
        answers[0].message.as_deref(),
        Some("spec.replicatedJobs[0].replicas: expected a whole number, found the string \"two\"")
    );
}

/// Pods are only mutated: the validating half accepts them untouched, and the mutating half
/// answers each exactly as `both`.
#[test]
fn pods_are_the_mutating_halfs_alone() {
    let request = fixture_request("tpu-4-slices", JobSetApi::V09);
    let jobset = patched(&request["object"], &validate(&request, &no_settings()));
    let pods = controller::jobset_pods(&jobset).unwrap();
    assert!(!pods.is_empty());
    for pod in pods {
        let both = admit(Kind::Pod, "CREATE", &pod.object, None, &no_settings());
        assert!(both.patch.is_some(), "{}", pod.hostname);
        let mutate = admit(
            Kind::Pod,
            "CREATE",
            &pod.object,
            None,
            &json!({"role": "mutate"}),
        );
        assert_eq!(mutate, both, "{}", pod.hostname);
        let judged = admit(
            Kind::Pod,
            "CREATE",
            &pod.object,
            None,
            &json!({"role": "validate"}),
        );
        assert_eq!(
            (judged.accepted, judged.mutated_object, judged.warnings),
            (true, None, Vec::new()),
            "{}",
            pod.hostname
        );
    }
}

/// UPDATEs are only judged: the mutating half accepts any, even the unsuspend that T4 refuses,
/// and the validating half answers as `both`.
#[test]
fn updates_are_the_validating_halfs_alone() {
    let bad = load_json(&fixtures::rule_request_path("t4-fail")).unwrap()["object"].clone();
    let mut suspended = bad.clone();
    suspended["spec"]["suspend"] = json!(true);
    let mut resumed = bad;
    resumed["spec"]["suspend"] = json!(false);
    let both = admit(
        Kind::JobSet,
        "UPDATE",
        &resumed,
        Some(&suspended),
        &no_settings(),
    );
    assert!(!both.accepted);
    assert!(
        both.message.as_deref().unwrap().starts_with("[T4] "),
        "{:?}",
        both.message
    );
    let judged = admit(
        Kind::JobSet,
        "UPDATE",
        &resumed,
        Some(&suspended),
        &json!({"role": "validate"}),
    );
    assert_eq!(judged, both);
    let mutate = admit(
        Kind::JobSet,
        "UPDATE",
        &resumed,
        Some(&suspended),
        &json!({"role": "mutate"}),
    );
    assert_eq!(
        (mutate.accepted, mutate.message, mutate.patch),
        (true, None, None)
    );

    // An opted-in Job's elastic resize, likewise.
    let request = load_json(&fixtures::job_request_path("jax-gpu-4")).unwrap();
    let job = patched(&request["object"], &validate(&request, &no_settings()));
    let mut resized = job.clone();
    resized["spec"]["completions"] = json!(8);
    resized["spec"]["parallelism"] = json!(8);
    let both = admit(Kind::Job, "UPDATE", &resized, Some(&job), &no_settings());
    assert!(!both.accepted);
    let judged = admit(
        Kind::Job,
        "UPDATE",
        &resized,
        Some(&job),
        &json!({"role": "validate"}),
    );
    assert_eq!(judged, both);
    let mutate = admit(
        Kind::Job,
        "UPDATE",
        &resized,
        Some(&job),
        &json!({"role": "mutate"}),
    );
    assert!(mutate.accepted && mutate.patch.is_none());
}

/// A queue label that no Kueue acted on (its `jobset` integration off, or the namespace outside
/// its `managedJobsNamespaceSelector`): `both`, which runs before Kueue's webhook, defers T3 and
/// T4 to an unsuspend that never comes; the validating half sees the stored object, not
/// suspended, and judges it at CREATE.
#[test]
fn a_bare_queue_label_defers_nothing_in_the_validating_half() {
    let object = fixture_request("jobset-v6e-example", JobSetApi::V09)["object"].clone();
    assert!(object["metadata"]["labels"]["kueue.x-k8s.io/queue-name"].is_string());
    let both = admit(Kind::JobSet, "CREATE", &object, None, &no_settings());
    assert!(both.accepted, "{:?}", both.message);
    let mutate = admit(
        Kind::JobSet,
        "CREATE",
        &object,
        None,
        &json!({"role": "mutate"}),
    );
    let unsuspended = patched(&object, &mutate);
    let judged = admit(
        Kind::JobSet,
        "CREATE",
        &unsuspended,
        None,
        &json!({"role": "validate"}),
    );
    assert_eq!(judged.code, Some(400));
    assert_eq!(judged.message.as_deref(), Some(BARE_LABEL_T3));
    // Once Kueue has suspended it, the same object waits for Kueue's unsuspend.
    let mut suspended = unsuspended;
    suspended["spec"]["suspend"] = json!(true);
    let judged = admit(
        Kind::JobSet,
        "CREATE",
        &suspended,
        None,
        &json!({"role": "validate"}),
    );
    assert!(judged.accepted, "{:?}", judged.message);
}

const BARE_LABEL_T3: &str = "[T3] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector (replicated job \"slice\"): does not select cloud.google.com/gke-tpu-accelerator, so the pods may land on any TPU node; add cloud.google.com/gke-tpu-accelerator to the nodeSelector, or a required node affinity with one In value, set to the accelerator of your TPU nodes (\"tpu-v4-podslice\" or \"tpu-v5p-slice\" or \"tpu-v5-lite-podslice\" or \"tpu-v6e-slice\" or \"tpu7x\" or \"tpu7\" fit 4 hosts with 4 chips per pod); see docs/rules.md, T3\n\
[T3] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector (replicated job \"slice\"): does not select cloud.google.com/gke-tpu-topology, so the pods may land on any TPU node; add cloud.google.com/gke-tpu-topology to the nodeSelector, or a required node affinity with one In value, set to the topology of your accelerator that fits 4 hosts with 4 chips per pod: \"2x2x4\" on tpu-v4-podslice, \"2x2x4\" on tpu-v5p-slice, \"4x4\" on tpu-v5-lite-podslice, \"4x4\" on tpu-v6e-slice, \"2x2x4\" on tpu7x, \"2x2x4\" on tpu7; see docs/rules.md, T3";
