//! SPEC §5 (MultiKueue) through the real module: a manager's Kueue copies a JobSet into a worker
//! cluster. The copy, made by the identity of `multiKueueUsers`, is never refused there and
//! keeps what the manager stamped; the same JobSet from anyone else is judged as usual; and the
//! manager's unsuspend of a JobSet it dispatches is not judged by its flavour, which goes nowhere.
use crate::common::*;
use multislice_gen::rule_fixtures::{expectations, fixture};
use multislice_host::controller::JobSetApi;
use multislice_host::fixtures::{load_yaml, test_data};
use multislice_host::request::{admission_request, Kind};
use multislice_host::Outcome;
use serde_json::{json, Value};

/// The user the manager's MultiKueue kubeconfig authenticates as in the worker.
const MULTIKUEUE_USER: &str = "multikueue-manager";

const FACTS: &str = "multislice.kubewarden.io/facts";

fn settings() -> Value {
    json!({"multiKueueUsers": [MULTIKUEUE_USER]})
}

/// `jobset` as the manager's Kueue copies it into a worker: its two labels added.
fn as_copy(mut jobset: Value) -> Value {
    let labels = &mut jobset["metadata"]["labels"];
    labels["kueue.x-k8s.io/multikueue-origin"] = json!("multikueue");
    labels["kueue.x-k8s.io/prebuilt-workload-name"] = json!("jobset-train-3f2a1");
    jobset
}

/// A JobSet CREATE from `user`.
fn create_by(user: &str, jobset: &Value, settings: &Value) -> Outcome {
    let mut request = admission_request(Kind::JobSet, "CREATE", jobset, None);
    request["userInfo"]["username"] = json!(user);
    validate(&request, settings)
}

fn update(new: &Value, old: &Value) -> Outcome {
    validate(
        &admission_request(Kind::JobSet, "UPDATE", new, Some(old)),
        &settings(),
    )
}

/// What Kueue compares between the copy and its prebuilt Workload, per replicated job:
/// containers, init containers, tolerations and the counts.
fn compared_by_kueue(jobset: &Value) -> Vec<Value> {
    let rjobs = jobset["spec"]["replicatedJobs"].as_array().unwrap();
    rjobs
        .iter()
        .map(|r| {
            let job = &r["template"]["spec"];
            let pod = &job["template"]["spec"];
            json!([
                r["replicas"],
                job["parallelism"],
                job["completions"],
                pod["containers"],
                pod["initContainers"],
                pod["tolerations"]
            ])
        })
        .collect()
}

fn message_of(fixture_name: &str) -> String {
    expectations()[fixture_name].message.clone().unwrap()
}

#[test]
fn a_misfit_copy_from_the_multikueue_user_is_admitted_with_its_violation_as_a_warning() {
    let copy = as_copy(fixture("t2-fail"));
    let outcome = create_by(MULTIKUEUE_USER, &copy, &settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(
        outcome.warnings,
        [format!(
            "MultiKueue copy, admitted: {}",
            message_of("t2-fail")
        )]
    );
    let admitted = patched(&copy, &outcome);
    assert_eq!(compared_by_kueue(&admitted), compared_by_kueue(&copy));
}

#[test]
fn the_same_jobset_with_the_origin_label_from_another_user_is_judged_as_usual() {
    let copy = as_copy(fixture("t2-fail"));
    for (user, jobset) in [
        ("alice@example.com", &copy),
        (MULTIKUEUE_USER, &fixture("t2-fail")),
    ] {
        let outcome = create_by(user, jobset, &settings());
        assert_eq!(
            (outcome.accepted, outcome.message, outcome.code),
            (false, Some(message_of("t2-fail")), Some(400)),
            "{user}"
        );
    }
    // And with no identity set, nobody's copy skips anything.
    let outcome = create_by(MULTIKUEUE_USER, &copy, &no_settings());
    assert_eq!(outcome.message, Some(message_of("t2-fail")));
}

/// The manager stamped the facts and the narrowing: the worker's CREATE of the copy returns no
/// patch and no warning, where the manager's own CREATE said what it narrowed.
#[test]
fn a_copy_of_what_the_manager_stamped_gets_no_patch() {
    let submitted = fixture_request("jobset-v6e-example", JobSetApi::V09)["object"].clone();
    let in_manager = create_by("alice@example.com", &submitted, &settings());
    assert_eq!(
        in_manager.warnings,
        ["spec.replicatedJobs[0].template.spec.template.spec.affinity: replicated job \"slice\" leaves its slice shape open, so a required node affinity limits it to slices of 4 hosts of 4 chips (or an unknown accelerator): tpu-v4-podslice 2x2x4, tpu-v5-lite-podslice…"]
    );
    let copy = as_copy(patched(&submitted, &in_manager));
    let outcome = create_by(MULTIKUEUE_USER, &copy, &settings());
    assert_eq!(
        (outcome.accepted, outcome.patch, outcome.warnings),
        (true, None, vec![])
    );
}

/// A manager without the policy stamped nothing: the copy is stamped as any JobSet, on what
/// Kueue does not compare.
#[test]
fn an_unstamped_copy_is_stamped_as_any_jobset() {
    let submitted = fixture_request("jobset-v6e-example", JobSetApi::V09)["object"].clone();
    let copy = as_copy(submitted.clone());
    let outcome = create_by(MULTIKUEUE_USER, &copy, &settings());
    let usual = create_by("alice@example.com", &submitted, &settings());
    assert_eq!(outcome.warnings, usual.warnings);
    assert_eq!(
        patched(&copy, &outcome),
        as_copy(patched(&submitted, &usual))
    );
    assert_eq!(
        compared_by_kueue(&patched(&copy, &outcome)),
        compared_by_kueue(&copy)
    );
}

/// Facts stamped by a manager whose policy computes them otherwise (another release, other
/// settings) stay: the worker's Workload was admitted on them.
#[test]
fn stale_facts_on_a_copy_are_kept_with_a_warning() {
    let submitted = fixture_request("jobset-v6e-example", JobSetApi::V09)["object"].clone();
    let mut in_manager = patched(
        &submitted,
        &create_by("alice@example.com", &submitted, &settings()),
    );
    let annotations = &mut in_manager["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        ["metadata"]["annotations"];
    let mut facts: Value = serde_json::from_str(annotations[FACTS].as_str().unwrap()).unwrap();
    facts["subdomain"] = json!("stamped-by-an-older-manager");
    annotations[FACTS] = json!(facts.to_string());
    let copy = as_copy(in_manager);
    let outcome = create_by(MULTIKUEUE_USER, &copy, &settings());
    assert_eq!(
        (outcome.accepted, outcome.patch, outcome.warnings),
        (true, None, vec!["spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"multislice.kubewarden.io/facts\"]: MultiKueue copy: kept the facts the manager stamped, which this policy would stamp differently; its pods get the manager's".to_string()])
    );
}

fn suspended() -> Value {
    load_yaml(&test_data().join("valid/kueue-suspended.yaml")).unwrap()
}

fn unsuspended_without_selectors(old: &Value) -> Value {
    let mut new = old.clone();
    new["spec"]["suspend"] = json!(false);
    new
}

/// The worker's Kueue unsuspends the copy: a violation there is a warning.
#[test]
fn the_unsuspend_of_a_copy_is_admitted_with_its_violations_as_warnings() {
    let old = as_copy(suspended());
    let outcome = update(&unsuspended_without_selectors(&old), &old);
    let refused = update(&unsuspended_without_selectors(&suspended()), &suspended());
    let violations: Vec<String> = refused
        .message
        .unwrap()
        .lines()
        .map(|v| {
            let warning = format!("MultiKueue copy, admitted: {v}");
            warning.chars().take(255).chain(['…']).collect()
        })
        .collect();
    assert_eq!(violations.len(), 2);
    assert!(violations[0].starts_with("MultiKueue copy, admitted: [T3] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector (replicated job \"slice\"): does not select cloud.google.com/gke-tpu-accelerator"));
    assert_eq!(
        (outcome.accepted, outcome.patch, outcome.warnings),
        (true, None, violations)
    );
}

/// The manager's Kueue unsuspends the JobSet it dispatches with its own flavour, which goes
/// nowhere (kueue#16010): neither T3 nor T4 judges it, whatever that flavour selects.
#[test]
fn the_managers_unsuspend_is_not_judged_by_its_flavour() {
    let mut old = suspended();
    old["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
    let bare = unsuspended_without_selectors(&old);
    let mut wrong_topology = bare.clone();
    wrong_topology["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        ["nodeSelector"] = json!({
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
        "cloud.google.com/gke-tpu-topology": "2x2x2"
    });
    for new in [bare, wrong_topology] {
        let outcome = update(&new, &old);
        assert_eq!(
            (outcome.accepted, outcome.patch, outcome.warnings),
            (true, None, vec![])
        );
    }
}

/// The manager still refuses at CREATE what no flavour of any worker can run.
#[test]
fn the_manager_refuses_a_dispatched_jobset_no_slice_fits() {
    let mut jobset = fixture("t4-fail-queued");
    jobset["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
    jobset["spec"]["suspend"] = json!(true);
    let outcome = validate(
        &admission_request(Kind::JobSet, "CREATE", &jobset, None),
        &json!({"role": "validate", "multiKueueUsers": [MULTIKUEUE_USER]}),
    );
    assert_eq!(outcome.message, Some(message_of("t4-fail-queued")));
}

/// The audit scanner's request for a stored JobSet (SPEC §5, Background audit): a CREATE with an
/// empty userInfo, no oldObject and no options, its resource named by the kind.
fn audit_of(jobset: &Value) -> Value {
    let mut request = admission_request(Kind::JobSet, "CREATE", jobset, None);
    request["userInfo"] = json!({});
    request["options"] = Value::Null;
    request["resource"]["resource"] = json!("JobSet");
    request.as_object_mut().unwrap().remove("dryRun");
    request
}

/// In a worker (`multiKueueUsers` set), the audit of a copy that its CREATE admitted with a
/// warning gives that warning again, not a refusal that the scanner would report `fail`. The
/// origin label alone, or a cluster that names no MultiKueue identity, changes nothing.
#[test]
fn the_audit_of_a_copy_warns_as_its_create_did() {
    let violation = message_of("t2-fail");
    for role in ["both", "validate"] {
        let settings = json!({"role": role, "multiKueueUsers": [MULTIKUEUE_USER]});
        let outcome = validate(&audit_of(&as_copy(fixture("t2-fail"))), &settings);
        assert_eq!(
            (outcome.accepted, outcome.message, outcome.warnings),
            (
                true,
                None,
                vec![format!("MultiKueue copy, admitted: {violation}")]
            ),
            "{role}"
        );
    }
    let mut origin_only = fixture("t2-fail");
    origin_only["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] = json!("multikueue");
    for (jobset, settings) in [
        (origin_only, settings()),
        (fixture("t2-fail"), settings()),
        (as_copy(fixture("t2-fail")), no_settings()),
    ] {
        let outcome = validate(&audit_of(&jobset), &settings);
        assert_eq!(
            (outcome.accepted, outcome.message, outcome.code),
            (false, Some(violation.clone()), Some(400)),
            "{settings}: {}",
            jobset["metadata"]["labels"]
        );
    }
}
