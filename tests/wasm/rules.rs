//! docs/contributing/spec.md §6 through the real module: every rule's failing fixture with its exact message, its
//! near miss accepted, realistic JobSets accepted, and suspended JobSets under Kueue.
use crate::common::*;
use multislice_gen::rule_fixtures::{expectations, fixture, Answer, Expected};
use multislice_host::fixtures::{load_yaml, test_data};
use multislice_host::request::{admission_request, Kind};
use serde_json::{json, Value};

fn create(jobset: &Value) -> Value {
    admission_request(Kind::JobSet, "CREATE", jobset, None)
}

#[test]
fn every_rule_fixture_gets_its_expected_verdict() {
    let expected = expectations();

    for (name, want) in &expected {
        let jobset = fixture(name);
        let settings = want.settings.clone().unwrap_or_else(no_settings);
        let outcome = validate(&create(&jobset), &settings);
        want.assert_answered(
            name,
            &Answer {
                accepted: outcome.accepted,
                message: outcome.message.as_deref(),
                warnings: &outcome.warnings,
                code: outcome.code,
            },
        );
    }
}

#[test]
fn every_rule_has_a_failing_fixture_and_a_near_miss() {
    let expected = expectations();
    for rule in [
        "G1", "G2", "G3", "G4", "T1", "T2", "T3", "T4", "X1", "X2", "X3", "X4", "K1", "K2", "K3",
        "N1", "N2", "P1", "P2", "P3",
    ] {
        let of_rule: Vec<&Expected> = expected.values().filter(|e| e.rule == rule).collect();
        assert!(
            of_rule.iter().any(|e| !e.accepted),
            "{rule} has no failing fixture"
        );
        assert!(
            of_rule.iter().any(|e| e.accepted),
            "{rule} has no near miss"
        );
    }
}

#[test]
fn realistic_jobsets_are_accepted_with_only_their_stated_warnings() {
    let dir = test_data().join("valid");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let outcome = validate(&create(&load_yaml(&path).unwrap()), &no_settings());
        assert!(
            outcome.accepted,
            "{}: {:?}",
            path.display(),
            outcome.message
        );
        // A JobSet that leaves its slice shape to the queue is told what it was limited to.
        let stated: Vec<String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("# Expected warning: "))
            .map(str::to_string)
            .collect();
        assert_eq!(outcome.warnings, stated, "{}", path.display());
        seen += 1;
    }
    assert_eq!(seen, 5);
}

fn suspended() -> Value {
    load_yaml(&test_data().join("valid/kueue-suspended.yaml")).unwrap()
}

fn update(new: &Value, old: &Value) -> multislice_host::Outcome {
    validate(
        &admission_request(Kind::JobSet, "UPDATE", new, Some(old)),
        &no_settings(),
    )
}

const SELECTOR: &str = "/spec/replicatedJobs/0/template/spec/template/spec/nodeSelector";

#[test]
fn unsuspending_without_selectors_is_rejected_by_t3() {
    let old = suspended();
    let mut new = old.clone();
    new["spec"]["suspend"] = json!(false);
    let outcome = update(&new, &old);
    assert!(!outcome.accepted);
    assert_eq!(outcome.mutated_object, None);
    let path = "spec.replicatedJobs[0].template.spec.template.spec.nodeSelector";
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!(
            "[T3] {path} (replicated job \"slice\"): does not select cloud.google.com/gke-tpu-accelerator, so the pods may land on any TPU node; add cloud.google.com/gke-tpu-accelerator to the nodeSelector, or a required node affinity with one In value, set to the accelerator of your TPU nodes (\"tpu-v4-podslice\" or \"tpu-v5p-slice\" or \"tpu-v5-lite-podslice\" or \"tpu-v6e-slice\" or \"tpu7x\" or \"tpu7\" fit 4 hosts with 4 chips per pod); see docs/rules.md, T3\n\
             [T3] {path} (replicated job \"slice\"): does not select cloud.google.com/gke-tpu-topology, so the pods may land on any TPU node; add cloud.google.com/gke-tpu-topology to the nodeSelector, or a required node affinity with one In value, set to the topology of your accelerator that fits 4 hosts with 4 chips per pod: \"2x2x4\" on tpu-v4-podslice, \"2x2x4\" on tpu-v5p-slice, \"4x4\" on tpu-v5-lite-podslice, \"4x4\" on tpu-v6e-slice, \"2x2x4\" on tpu7x, \"2x2x4\" on tpu7; see docs/rules.md, T3"
        ).as_str())
    );
}

#[test]
fn unsuspending_with_kueues_selectors_is_accepted() {
    let old = suspended();
    let mut new = old.clone();
    new["spec"]["suspend"] = json!(false);
    *new.pointer_mut("/spec/replicatedJobs/0/template/spec/template/spec")
        .unwrap() = {
        let mut spec = new
            .pointer(&SELECTOR.replace("/nodeSelector", ""))
            .unwrap()
            .clone();
        spec["nodeSelector"] = json!({
            "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
            "cloud.google.com/gke-tpu-topology": "2x2x4"
        });
        spec
    };
    let outcome = update(&new, &old);
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!((outcome.mutated_object, outcome.warnings), (None, vec![]));
}

#[test]
fn unsuspending_to_a_wrong_topology_is_rejected_by_t4() {
    let old = suspended();
    let mut new = old.clone();
    new["spec"]["suspend"] = json!(false);
    new.pointer_mut(&SELECTOR.replace("/nodeSelector", ""))
        .unwrap()["nodeSelector"] = json!({
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
        "cloud.google.com/gke-tpu-topology": "2x2x2"
    });
    let outcome = update(&new, &old);
    assert_eq!(
        outcome.message.as_deref(),
        Some("[T4] spec.replicatedJobs[0].template.spec.parallelism (replicated job \"slice\"): is 4 but a tpu-v5p-slice 2x2x2 slice with 4 chips per pod has 2 hosts; set parallelism and completions to 2, or keep 4 hosts and select the topology \"2x2x4\"; see docs/rules.md, T4")
    );
}

#[test]
fn an_update_that_changes_nothing_judged_is_accepted_even_on_an_invalid_object() {
    // Invalid since before the policy: parallelism 2, completions 4 (T2), and no selectors (T3).
    let mut old = suspended();
    old["spec"]["suspend"] = json!(false);
    old["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = json!(2);
    assert!(!validate(&create(&old), &no_settings()).accepted);
    let mut new = old.clone();
    new["metadata"]["labels"]["team"] = json!("a");
    let outcome = update(&new, &old);
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.mutated_object, None);
}

#[test]
fn an_update_that_adds_a_violation_is_rejected_with_only_that_one() {
    let mut old = suspended();
    old["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = json!(2);
    let mut new = old.clone();
    new["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/node-selector"] = json!("true");
    new["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("alpha.jobset.sigs.k8s.io/exclusive-topology");
    let outcome = update(&new, &old);
    assert_eq!(
        outcome.message.as_deref(),
        Some("[X1] spec.replicatedJobs[0].template.metadata.annotations (replicated job \"slice\"): runs 4 TPU pods without exclusive placement, so two slices can land in one cloud.google.com/gke-nodepool; add the annotation alpha.jobset.sigs.k8s.io/exclusive-topology: cloud.google.com/gke-nodepool here or on the JobSet; see docs/rules.md, X1\n\
              [X3] metadata.annotations[\"alpha.jobset.sigs.k8s.io/node-selector\"]: is set without alpha.jobset.sigs.k8s.io/exclusive-topology beside it, and JobSet ignores it silently; add alpha.jobset.sigs.k8s.io/exclusive-topology at the same level, or remove the flag; see docs/rules.md, X3")
    );
}

#[test]
fn an_existing_object_gets_the_same_verdict_as_at_create() {
    // Background audit evaluates stored objects, which carry the policy's facts.
    for name in ["t2-fail", "x4-fail", "g4-pass"] {
        let jobset = fixture(name);
        let first = validate(&create(&jobset), &no_settings());
        let stored = match &first.mutated_object {
            Some(m) => m.clone(),
            None => jobset.clone(),
        };
        let again = validate(&create(&stored), &no_settings());
        assert_eq!(
            (again.accepted, again.message),
            (first.accepted, first.message),
            "{name}"
        );
    }
}

/// Bad topologies and chip counts get rule T4's message, never a trap.
#[rstest::rstest]
#[case::trailing_x("4x", "[T4] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector[\"cloud.google.com/gke-tpu-topology\"] (replicated job \"slice\"): \"4x\" is not a topology like 4x4 or 2x2x4; use one of 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16; see docs/rules.md, T4")]
#[case::zero("0x4", "[T4] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector[\"cloud.google.com/gke-tpu-topology\"] (replicated job \"slice\"): \"0x4\" has a dimension of 0; use one of 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16; see docs/rules.md, T4")]
#[case::four_dims("4x4x4x4", "[T4] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector[\"cloud.google.com/gke-tpu-topology\"] (replicated job \"slice\"): \"4x4x4x4\" has 4 dimensions, the accelerator has 2; use one of 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16; see docs/rules.md, T4")]
#[case::huge("99999999999x2", "[T4] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector[\"cloud.google.com/gke-tpu-topology\"] (replicated job \"slice\"): \"99999999999x2\" is larger than any TPU slice; use one of 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16; see docs/rules.md, T4")]
fn bad_topologies_get_t4s_message(#[case] topology: &str, #[case] message: &str) {
    let mut jobset = load_yaml(&test_data().join("rules/t4-pass.yaml")).unwrap();
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"]
        ["cloud.google.com/gke-tpu-topology"] = json!(topology);
    let outcome = validate(&create(&jobset), &no_settings());
    assert_eq!(outcome.code, Some(400));
    assert_eq!(outcome.message.as_deref(), Some(message));
}

#[rstest::rstest]
#[case::gibi(json!("4Gi"), "\"4Gi\" is larger than any TPU slice; ask for a whole number of chips: the chips of one host, for example 4")]
#[case::negative(json!(-4), "\"-4\" is negative; ask for a whole number of chips: the chips of one host, for example 4")]
#[case::thousand(json!("1e3"), "")]
fn bad_chip_counts_get_t4s_message(#[case] chips: Value, #[case] problem: &str) {
    let mut jobset = load_yaml(&test_data().join("rules/t4-pass.yaml")).unwrap();
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
        ["resources"]["limits"]["google.com/tpu"] = chips;
    let outcome = validate(&create(&jobset), &no_settings());
    let message = outcome.message.unwrap();
    if problem.is_empty() {
        // 1e3 parses (1000 chips), so it is judged as a slice, and no host has 1000 chips.
        assert_eq!(message, "[T4] spec.replicatedJobs[0].template.spec.template.spec.containers (replicated job \"slice\"): ask for 1000 TPU chips per pod, which does not divide a tpu-v5-lite-podslice 2x4 slice (8 chips) into whole hosts; a pod takes a whole host: ask for 1 or 4 or 8 chips per pod, as the machine type has; see docs/rules.md, T4");
    } else {
        assert_eq!(
            message,
            format!("[T4] spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.limits[\"google.com/tpu\"] (replicated job \"slice\"): {problem}; see docs/rules.md, T4")
        );
    }
}

/// N2 on a JAX JobSet of several processes (no TPU): every JAX process dials the coordinator
/// by name. With the JAX env off the policy does not judge the JobSet at all (docs/contributing/spec.md §6).
#[test]
fn n2_judges_a_jax_jobset_of_several_processes() {
    let mut jobset =
        fixture_request("jax-gpu", multislice_host::controller::JobSetApi::V09)["object"].clone();
    jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["hostNetwork"] =
        json!(true);
    let outcome = validate(&create(&jobset), &no_settings());
    assert!(!outcome.accepted);
    assert_eq!(
        outcome.message.as_deref(),
        Some("[N2] spec.replicatedJobs[1].template.spec.template.spec.dnsPolicy (replicated job \"h100\"): is not set, and with hostNetwork: true the default ClusterFirst falls back to the node's resolver, so the pods cannot resolve the coordinator and worker hostnames; set it to ClusterFirstWithHostNet; see docs/rules.md, N2")
    );
    let off = validate(&create(&jobset), &json!({"jaxEnv": "never"}));
    assert!(off.accepted, "{:?}", off.message);
}

/// T4 on GKE's single-host v5e (`tpu-v5-lite-device`, ct5l-hightpu-1t/4t/8t): a slice is one
/// host, so one pod holds all its chips; no shape of it is ever split into hosts.
#[rstest::rstest]
#[case::one_host_of_eight("2x4", 8, 1, None)]
#[case::one_host_of_four("2x2", 4, 1, None)]
#[case::one_chip("1x1", 1, 1, None)]
#[case::eight_chips_as_two_hosts("2x4", 4, 2, Some("[T4] spec.replicatedJobs[0].template.spec.template.spec.containers (replicated job \"slice\"): ask for 4 chips per pod, but a tpu-v5-lite-device slice is one host: its 2x4 slice (8 chips) runs in one pod; ask for 8 chips per pod and set parallelism and completions to 1; see docs/rules.md, T4"))]
#[case::one_chip_per_pod("2x2", 1, 4, Some("[T4] spec.replicatedJobs[0].template.spec.template.spec.containers (replicated job \"slice\"): ask for 1 chips per pod, but a tpu-v5-lite-device slice is one host: its 2x2 slice (4 chips) runs in one pod; ask for 4 chips per pod and set parallelism and completions to 1; see docs/rules.md, T4"))]
#[case::two_pods_of_a_whole_slice("2x2", 4, 2, Some("[T4] spec.replicatedJobs[0].template.spec.parallelism (replicated job \"slice\"): is 2 but a tpu-v5-lite-device 2x2 slice with 4 chips per pod has 1 hosts; set parallelism and completions to 1; see docs/rules.md, T4"))]
#[case::multi_host_shape("4x4", 4, 4, Some("[T4] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector[\"cloud.google.com/gke-tpu-topology\"] (replicated job \"slice\"): \"4x4\" is not a tpu-v5-lite-device topology; use one of 1x1, 2x2, 2x4; see docs/rules.md, T4"))]
fn t4_reads_a_v5e_device_slice_as_one_host(
    #[case] topology: &str,
    #[case] chips: u32,
    #[case] parallelism: u32,
    #[case] message: Option<&str>,
) {
    let mut jobset = load_yaml(&test_data().join("rules/t4-pass.yaml")).unwrap();
    let job = &mut jobset["spec"]["replicatedJobs"][0]["template"]["spec"];
    job["parallelism"] = json!(parallelism);
    job["completions"] = json!(parallelism);
    let pod = &mut job["template"]["spec"];
    pod["nodeSelector"] = json!({
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-device",
        "cloud.google.com/gke-tpu-topology": topology,
    });
    pod["containers"][0]["resources"]["limits"]["google.com/tpu"] = json!(chips);
    let outcome = validate(&create(&jobset), &no_settings());
    assert_eq!(outcome.message.as_deref(), message);
    assert_eq!(outcome.accepted, message.is_none());
}
