//! Controller simulation: admit each fixture JobSet, build every pod as the JobSet and Job
//! controllers would, admit it, resolve its env, and check docs/contributing/spec.md §4 across all pods.
use crate::common::*;
use multislice_gen::invariants::pod_env_is_exactly;
use multislice_gen::oracle;
use multislice_host::controller::{self, JobSetApi};
use multislice_host::env::{get, resolve};
use multislice_host::judges::{disallowed_ops, nothing_lost};
use multislice_host::{fixtures, Outcome};
use rstest::rstest;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const MEGASCALE: [&str; 3] = [
    "MEGASCALE_NUM_SLICES",
    "MEGASCALE_SLICE_ID",
    "MEGASCALE_COORDINATOR_ADDRESS",
];

/// Every fixture simulated below; `user-set-env` and `manual-env-block` have their own tests
/// (`manual-env-block` in references.rs).
const SIMULATED: [&str; 32] = [
    "tpu-4-slices",
    "tpu-two-rjobs-one-group",
    "tpu-two-groups",
    "cpu-driver-default",
    "pathways-head",
    "generate-name",
    "custom-subdomain",
    "cpu-only",
    "tpu-worker-v5e-4x4",
    "tpu-worker-v5p-multislice",
    "tpu7x-two-containers",
    "jax-gpu",
    "jax-cpu-coordinator",
    "jax-cpu-coordinator-last",
    "jax-cpu-two-members",
    "jax-tpu-cpu-driver",
    "tpu7x-user-port",
    "tpu-init-container",
    "pathways-tpu7x",
    "tpu-zero-replicas-first",
    "trainer-initializer",
    // The shapes real tools submit (docs/kueue-gke-xpk.md, "Shapes we test").
    "xpk-v5p-multislice",
    "xpk-v6e-multislice",
    "xpk-tpu7x",
    "xpk-sub-slice",
    "xpk-super-slice",
    "xpk-super-slice-placed",
    "xpk-pathways",
    "xpk-gpu",
    "jobset-v6e-example",
    "gke-tpu-multislice",
    "gke-super-slices-placed",
];

#[test]
fn every_jobset_fixture_is_simulated() {
    let mut covered: Vec<&str> = SIMULATED.to_vec();
    covered.push("user-set-env");
    covered.push("manual-env-block");
    covered.sort();
    assert_eq!(fixtures::jobset_names().unwrap(), covered);
}

fn check_patch(kind: &str, before: &Value, outcome: &Outcome) {
    if let Some(patch) = &outcome.patch {
        assert_eq!(
            disallowed_ops(before, patch, kind),
            Vec::<String>::new(),
            "{kind} patch: {patch:?}"
        );
        let after = patched(before, outcome);
        assert_eq!(nothing_lost(before, &after), Vec::<String>::new());
    }
}

/// The env names a container of the pod (as the Job controller made it) sets itself.
fn own_env_names(pod: &Value, container: &str) -> Vec<String> {
    containers(pod)
        .into_iter()
        .filter(|c| c["name"] == container)
        .flat_map(|c| c["env"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["name"].as_str().map(str::to_string))
        .collect()
}

fn containers(pod: &Value) -> Vec<&Value> {
    ["initContainers", "containers"]
        .iter()
        .flat_map(|l| {
            pod["spec"][l]
                .as_array()
                .map(|a| a.iter().collect::<Vec<_>>())
                .unwrap_or_default()
        })
        .collect()
}

/// Every fixture of SIMULATED, under both JobSet APIs. One list drives both this test and
/// the check that no fixture file is left out.
#[test]
fn every_pod_of_every_fixture_gets_the_spec_values() {
    for fixture in SIMULATED {
        for api in [JobSetApi::V08, JobSetApi::V09] {
            every_pod_gets_the_spec_values(fixture, api);
        }
    }
}

fn every_pod_gets_the_spec_values(fixture: &str, api: JobSetApi) {
    let request = fixture_request(fixture, api);
    let jobset = &request["object"];
    let name = controller::final_name(jobset);
    let (outcome, admitted, pods) = run(&request, &no_settings());
    check_patch("JobSet", jobset, &outcome);
    assert_eq!(outcome.warnings, fixture_warnings(fixture), "{fixture}");
    assert!(!pods.is_empty());

    // slice group -> (job -> slice id), coordinators, and every pod's hostname.
    let mut slice_ids: BTreeMap<String, BTreeMap<(String, u64), BTreeSet<String>>> =
        BTreeMap::new();
    let mut coordinators: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let subdomain = jobset
        .pointer("/spec/network/subdomain")
        .and_then(Value::as_str)
        .unwrap_or(&name);
    let hosts: BTreeSet<String> = pods
        .iter()
        .map(|p| format!("{}.{subdomain}", p.sim.hostname))
        .collect();

    for p in &pods {
        check_patch("Pod", &p.sim.object, &p.outcome);
        assert!(
            p.outcome.warnings.is_empty(),
            "{}: {:?}",
            p.sim.hostname,
            p.outcome.warnings
        );
        let want = oracle::expected(jobset, &name, &p.sim.replicated_job, p.sim.job_index);
        // Every container's whole env, every family, exactly as the oracle has it.
        let at = oracle::PodAt {
            rjob: &p.sim.replicated_job,
            job_index: p.sim.job_index,
            completion_index: p.sim.completion_index,
        };
        let settings = oracle::Settings::from_json(&no_settings());
        let policy_env = oracle::policy_env(jobset, &name, &settings, at);
        if let Err(e) = pod_env_is_exactly(&p.pod, &p.sim.object, &policy_env) {
            panic!("{fixture} {api:?} {}: {e}", p.sim.hostname);
        }
        for map in ["labels", "annotations"] {
            let m = &p.pod["metadata"][map];
            assert_eq!(
                m["jobset.sigs.k8s.io/group-name"],
                json!(want.group),
                "{} {map}",
                p.sim.hostname
            );
            assert_eq!(
                m["jobset.sigs.k8s.io/group-replicas"],
                json!(want.group_replicas.to_string())
            );
            assert_eq!(
                m["jobset.sigs.k8s.io/job-group-index"],
                json!(want.job_group_index.to_string())
            );
        }
        for c in containers(&p.pod) {
            let env = resolve(&p.pod, c).unwrap();
            match (&want.multislice, oracle::is_tpu_container(c)) {
                (Some((num, id, coordinator)), true) => {
                    let num_s = num.to_string();
                    let id_s = id.to_string();
                    assert_eq!(
                        get(&env, MEGASCALE[0]),
                        Some(num_s.as_str()),
                        "{} {c}",
                        p.sim.hostname
                    );
                    assert_eq!(
                        get(&env, MEGASCALE[1]),
                        Some(id_s.as_str()),
                        "{}",
                        p.sim.hostname
                    );
                    assert_eq!(
                        get(&env, MEGASCALE[2]),
                        Some(coordinator.as_str()),
                        "{}",
                        p.sim.hostname
                    );
                    // The injected variables come first, in this order; a variable the
                    // container sets itself (xpk's Pathways workers set all three by
                    // fieldRef) is not injected.
                    let own = own_env_names(&p.sim.object, c["name"].as_str().unwrap_or(""));
                    let injected: Vec<&str> = MEGASCALE
                        .into_iter()
                        .filter(|v| !own.contains(&v.to_string()))
                        .collect();
                    let names: Vec<&str> = env
                        .iter()
                        .take(injected.len())
                        .map(|(n, _)| n.as_str())
                        .collect();
                    assert_eq!(names, injected);
                    // docs/contributing/spec.md §4.2: with several TPU containers, each has its own DCN port.
                    let k = want
                        .tpu_containers
                        .iter()
                        .position(|n| c["name"] == json!(n))
                        .unwrap();
                    let port = (want.tpu_containers.len() >= 2).then(|| (8081 + k).to_string());
                    assert_eq!(
                        get(&env, "MEGASCALE_PORT"),
                        port.as_deref(),
                        "{} {}",
                        p.sim.hostname,
                        c["name"]
                    );
                    slice_ids
                        .entry(want.group.clone())
                        .or_default()
                        .entry((p.sim.replicated_job.clone(), p.sim.job_index))
                        .or_default()
                        .insert(id_s);
                    coordinators
                        .entry(want.group.clone())
                        .or_default()
                        .insert(coordinator.clone());
                }
                _ => {
                    for var in MEGASCALE {
                        assert_eq!(
                            get(&env, var),
                            None,
                            "{} must not get {var}",
                            p.sim.hostname
                        );
                    }
                }
            }
        }
        // Admitting the admitted pod again changes nothing.
        let again = validate(
            &multislice_host::request::admission_request(
                multislice_host::request::Kind::Pod,
                "CREATE",
                &p.pod,
                None,
            ),
            &no_settings(),
        );
        assert_eq!(again.patch, None, "pod admission is not idempotent");
    }

    for (group, jobs) in &slice_ids {
        // One slice id per Job, and together exactly 0..N-1.
        let ids: Vec<u64> = jobs
            .values()
            .map(|ids| {
                assert_eq!(ids.len(), 1, "pods of one Job disagree on their slice id");
                ids.iter().next().unwrap().parse().unwrap()
            })
            .collect();
        let sorted: BTreeSet<u64> = ids.iter().copied().collect();
        assert_eq!(
            sorted.len(),
            ids.len(),
            "group {group}: repeated slice ids {ids:?}"
        );
        assert_eq!(sorted, (0..ids.len() as u64).collect(), "group {group}");
        let coordinator = &coordinators[group];
        assert_eq!(
            coordinator.len(),
            1,
            "group {group} has several coordinators"
        );
        let coordinator = coordinator.iter().next().unwrap();
        // The DCN port of container 0 (pods with several TPU containers) is not part of the host.
        let coordinator = coordinator.strip_suffix(":8081").unwrap_or(coordinator);
        assert!(
            hosts.contains(coordinator),
            "coordinator {coordinator} is not a pod"
        );
    }

    // Admitting the admitted JobSet again changes nothing.
    let again = validate(
        &multislice_host::request::admission_request(
            multislice_host::request::Kind::JobSet,
            "CREATE",
            &admitted,
            None,
        ),
        &no_settings(),
    );
    assert_eq!(again.patch, None, "JobSet admission is not idempotent");
}

#[rstest]
fn user_set_variables_are_kept_and_the_rest_injected_before_them(
    #[values(JobSetApi::V08, JobSetApi::V09)] api: JobSetApi,
) {
    let request = fixture_request("user-set-env", api);
    let (_, _, pods) = run(&request, &no_settings());
    assert_eq!(pods.len(), 2);
    for (i, p) in pods.iter().enumerate() {
        let c = &p.pod["spec"]["containers"][0];
        let names: Vec<&str> = c["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "MEGASCALE_SLICE_ID",
                "MEGASCALE_NUM_SLICES",
                "MEGASCALE_COORDINATOR_ADDRESS",
                "SLICE_TAG"
            ]
        );
        let env = resolve(&p.pod, c).unwrap();
        assert_eq!(
            get(&env, "MEGASCALE_NUM_SLICES"),
            Some("3"),
            "the user's literal is kept"
        );
        assert_eq!(
            get(&env, "MEGASCALE_SLICE_ID"),
            Some(i.to_string().as_str())
        );
        assert_eq!(get(&env, "SLICE_TAG"), Some(format!("slice-{i}").as_str()));
        // The user's own fieldRef resolves to what the controller wrote (none: no spec.coordinator).
        assert_eq!(get(&env, "MEGASCALE_COORDINATOR_ADDRESS"), Some(""));
        assert_eq!(
            p.outcome.warnings,
            vec!["container \"jax\" (spec.containers[0]): MEGASCALE_NUM_SLICES keeps \"3\", not the \"2\" the policy computed"]
        );
    }
}
