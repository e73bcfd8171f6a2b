//! Who the multislice env is for (docs/contributing/spec.md §3, §4.2): replicated jobs that run at the same
//! time, slice groups of more than one slice, and the coordinator's own DCN port. Every
//! container's resolved value of every variable the policy may set, through the module and
//! the controller simulation.
use crate::common::*;
use multislice_host::controller::JobSetApi;
use multislice_host::env::{get, resolve};
use multislice_host::judges::POLICY_ENV;
use serde_json::{json, Value};

/// tpu-4-slices (v5e 2x4, 2 hosts a slice) with its one replicated job given `replicas`.
fn slices(replicas: u64) -> Value {
    let mut request = fixture_request("tpu-4-slices", JobSetApi::V09);
    request["object"]["spec"]["replicatedJobs"][0]["replicas"] = json!(replicas);
    request
}

/// Every policy variable of every container of every pod: `want(hostname)` gives the ones it
/// must have, the others it must not.
fn assert_env(pods: &[AdmittedPod], want: impl Fn(&str) -> Vec<(&'static str, String)>) {
    for p in pods {
        for c in p.pod["spec"]["containers"].as_array().unwrap() {
            let env = resolve(&p.pod, c).unwrap();
            let wanted = want(&p.sim.hostname);
            for var in POLICY_ENV {
                let expected = wanted
                    .iter()
                    .find(|(n, _)| *n == var)
                    .map(|(_, v)| v.as_str());
                assert_eq!(get(&env, var), expected, "{} {var}", p.sim.hostname);
            }
        }
    }
}

#[test]
fn one_slice_gets_no_multislice_env() {
    // One slice has no DCN peers: xpk and GKE write no MEGASCALE_* for it, and JAX then takes
    // the slice's own host 0 as coordinator, where a name the pod cannot resolve (hostNetwork)
    // would hang it.
    let (outcome, _, pods) = run(&slices(1), &no_settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    assert_eq!(pods.len(), 2);
    for p in &pods {
        assert_eq!(p.outcome.mutated_object, None, "{}", p.sim.hostname);
        assert_eq!(p.outcome.warnings, Vec::<String>::new());
    }
    assert_env(&pods, |_| Vec::new());
}

#[test]
fn a_slice_group_the_training_waits_for_runs_alone() {
    // Two slices of warm-up that complete before the four slices of training start: each is a
    // multislice of its own size only if it runs with others, so the warm-up gets nothing and
    // the training is 4 slices coordinated by its own first pod.
    let mut request = slices(4);
    let mut warmup = request["object"]["spec"]["replicatedJobs"][0].clone();
    warmup["name"] = json!("warmup");
    warmup["replicas"] = json!(2);
    let rjobs = request["object"]["spec"]["replicatedJobs"]
        .as_array_mut()
        .unwrap();
    rjobs[0]["dependsOn"] = json!([{"name": "warmup", "status": "Complete"}]);
    rjobs.insert(0, warmup);
    let (outcome, _, pods) = run(&request, &no_settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    assert_eq!(pods.len(), 12);
    assert_env(&pods, |host| {
        let Some(rest) = host.strip_prefix("llama-v5e-slice-") else {
            return Vec::new();
        };
        let job = rest.split('-').next().unwrap();
        vec![
            ("MEGASCALE_NUM_SLICES", "4".to_string()),
            ("MEGASCALE_SLICE_ID", job.to_string()),
            (
                "MEGASCALE_COORDINATOR_ADDRESS",
                "llama-v5e-slice-0-0.llama-v5e".to_string(),
            ),
        ]
    });
}

#[test]
fn the_coordinators_own_megascale_port_is_in_its_address() {
    // The user's MEGASCALE_PORT on the coordinator's TPU container is where its DCN service
    // listens, so every slice dials that port.
    let mut request = slices(2);
    request["object"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        ["containers"][0]["env"] = json!([{"name": "MEGASCALE_PORT", "value": "9090"}]);
    let (outcome, _, pods) = run(&request, &no_settings());
    assert_eq!(outcome.warnings, Vec::<String>::new());
    assert_env(&pods, |host| {
        let job = host
            .strip_prefix("llama-v5e-slice-")
            .unwrap()
            .split('-')
            .next()
            .unwrap();
        vec![
            ("MEGASCALE_NUM_SLICES", "2".to_string()),
            ("MEGASCALE_SLICE_ID", job.to_string()),
            (
                "MEGASCALE_COORDINATOR_ADDRESS",
                "llama-v5e-slice-0-0.llama-v5e:9090".to_string(),
            ),
            ("MEGASCALE_PORT", "9090".to_string()),
        ]
    });
    for p in &pods {
        assert_eq!(
            p.outcome.warnings,
            Vec::<String>::new(),
            "{}",
            p.sim.hostname
        );
    }
}

#[test]
fn a_megascale_port_admission_cannot_read_is_said() {
    let mut request = slices(2);
    request["object"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        ["containers"][0]["env"] = json!([{"name": "MEGASCALE_PORT",
            "valueFrom": {"configMapKeyRef": {"name": "ports", "key": "dcn"}}}]);
    let outcome = validate(&request, &no_settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(
        outcome.warnings,
        vec!["container \"jax\" (spec.replicatedJobs[0].template.spec.template.spec.containers[0]): its MEGASCALE_PORT is not a port admission can read, so the coordinator address of slice group \"default\" names the default port"]
    );
}

#[test]
fn a_coordinator_without_tpus_is_said_where_the_slices_run_jax() {
    // jax-tpu-cpu-driver: JAX on two tpu7x slices, with a CPU driver named by spec.coordinator.
    // libtpu on the slices dials MEGASCALE_COORDINATOR_ADDRESS, where no libtpu runs.
    let outcome = validate(
        &fixture_request("jax-tpu-cpu-driver", JobSetApi::V09),
        &no_settings(),
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(
        outcome.warnings,
        vec!["spec.coordinator: replicated job \"driver\" runs no TPU container, so the MEGASCALE coordinator of slice group \"default\" has no libtpu, which its JAX processes need (Pathways runs none there); name a pod of the group, or unset it"]
    );
    // Pathways, whose workers run no JAX, is left as it is: no warning.
    for fixture in ["pathways-head", "xpk-pathways"] {
        let outcome = validate(&fixture_request(fixture, JobSetApi::V09), &no_settings());
        assert!(
            !outcome
                .warnings
                .iter()
                .any(|w| w.starts_with("spec.coordinator:")),
            "{fixture}: {:?}",
            outcome.warnings
        );
    }
}
