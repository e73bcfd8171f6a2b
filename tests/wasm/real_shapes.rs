//! JobSets shaped the way real tools submit them (xpk, JobSet's own TPU example, the Kueue
//! flow), and the validation of docs/contributing/spec.md they exercise: Kueue queueing (§2, §5), GKE dynamic
//! slicing (§2, §3), upstream's exclusive-placement precedence (§2), a coordinator in a
//! replicated job with replicas > 0 (§3), JobSets the policy does not judge (§6) and
//! ElasticJobSet resizes (§5). Each test runs the built module.
use crate::common::*;
use multislice_gen::oracle;
use multislice_host::controller::{self, JobSetApi};
use multislice_host::env::{get, resolve};
use multislice_host::request::{admission_request, Kind};
use rstest::rstest;
use serde_json::{json, Value};

const QUEUE: &str = "kueue.x-k8s.io/queue-name";
const POD_SPEC: &str = "/spec/replicatedJobs/0/template/spec/template/spec";
const POD_ANNOTATIONS: &str = "/spec/replicatedJobs/0/template/spec/template/metadata/annotations";

fn update(new: &Value, old: &Value, settings: &Value) -> multislice_host::Outcome {
    validate(
        &admission_request(Kind::JobSet, "UPDATE", new, Some(old)),
        settings,
    )
}

/// The fixture as the API server serves it under `api`.
fn served(name: &str, api: JobSetApi) -> Value {
    fixture_request(name, api)["object"].clone()
}

/// The object Kueue's webhook stores after the policy admitted it: suspended.
fn stored_by_kueue(name: &str, api: JobSetApi) -> Value {
    let jobset = served(name, api);
    let outcome = create(&jobset, &no_settings());
    assert!(outcome.accepted, "{name}: {:?}", outcome.message);
    let mut stored = patched(&jobset, &outcome);
    stored["spec"]["suspend"] = json!(true);
    stored
}

/// The unsuspending UPDATE by which Kueue admits the workload, with the flavour's selectors.
fn unsuspended(stored: &Value, selectors: Option<Value>) -> Value {
    let mut new = stored.clone();
    new["spec"]["suspend"] = json!(false);
    if let Some(s) = selectors {
        new.pointer_mut(POD_SPEC).unwrap()["nodeSelector"] = s;
    }
    new
}

fn without_queue(mut jobset: Value) -> Value {
    jobset["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove(QUEUE);
    jobset
}

/// Every TPU container of every pod gets (NUM_SLICES, SLICE_ID of its job, coordinator).
fn assert_multislice_env(
    name: &str,
    api: JobSetApi,
    pods_expected: usize,
    num_slices: &str,
    coordinator: &str,
) {
    let (outcome, _, pods) = run(&fixture_request(name, api), &no_settings());
    assert_eq!(outcome.warnings, fixture_warnings(name), "{name}");
    assert_eq!(pods.len(), pods_expected, "{name}");
    for p in &pods {
        let mut tpu_containers = 0;
        for c in p.pod["spec"]["containers"].as_array().unwrap() {
            if !oracle::is_tpu_container(c) {
                continue;
            }
            tpu_containers += 1;
            let env = resolve(&p.pod, c).unwrap();
            let slice_id = p.sim.job_index.to_string();
            assert_eq!(get(&env, "MEGASCALE_NUM_SLICES"), Some(num_slices));
            assert_eq!(get(&env, "MEGASCALE_SLICE_ID"), Some(slice_id.as_str()));
            assert_eq!(
                get(&env, "MEGASCALE_COORDINATOR_ADDRESS"),
                Some(coordinator),
                "{} {}",
                p.sim.hostname,
                c["name"]
            );
        }
        assert!(tpu_containers > 0, "{}", p.sim.hostname);
    }
}

/// The coordinator the contract gives a fixture's pods (a pod with several TPU containers
/// may carry a port, docs/contributing/spec.md §4.2), from the independent oracle.
fn oracle_coordinator(name: &str, api: JobSetApi) -> String {
    let jobset = served(name, api);
    let (_, _, coordinator) =
        oracle::expected(&jobset, &controller::final_name(&jobset), "slice-job", 0)
            .multislice
            .unwrap();
    coordinator
}

#[rstest]
fn xpk_standard_multislice_is_accepted_with_its_env(
    #[values(JobSetApi::V08, JobSetApi::V09)] api: JobSetApi,
) {
    assert_multislice_env(
        "xpk-v5p-multislice",
        api,
        8,
        "4",
        "llama-v5p-slice-job-0-0.llama-v5p",
    );
    assert_multislice_env(
        "xpk-v6e-multislice",
        api,
        8,
        "2",
        "gemma-v6e-slice-job-0-0.gemma-v6e",
    );
    let ironwood = oracle_coordinator("xpk-tpu7x", api);
    assert!(ironwood.starts_with("ironwood-slice-job-0-0.ironwood"));
    assert_multislice_env("xpk-tpu7x", api, 32, "2", &ironwood);
}

/// Issue problem 2: GKE dynamic slicing. Without the queue label, T3, T4 and X1 judge the
/// sub-slice and the super-slice at CREATE, by the slice-topology annotation.
#[rstest]
fn dynamic_slices_are_judged_by_their_slice_topology(
    #[values("xpk-sub-slice", "xpk-super-slice", "xpk-super-slice-placed")] name: &str,
    #[values(JobSetApi::V08, JobSetApi::V09)] api: JobSetApi,
) {
    let outcome = create(&without_queue(served(name, api)), &no_settings());
    assert!(outcome.accepted, "{name}: {:?}", outcome.message);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    // And at Kueue's unsuspending UPDATE, with the selectors as xpk wrote them.
    let stored = stored_by_kueue(name, api);
    let outcome = update(&unsuspended(&stored, None), &stored, &no_settings());
    assert!(outcome.accepted, "{name}: {:?}", outcome.message);
    assert_eq!((outcome.patch, outcome.warnings), (None, vec![]));
}

#[rstest]
fn dynamic_slices_get_their_env(#[values(JobSetApi::V08, JobSetApi::V09)] api: JobSetApi) {
    assert_multislice_env(
        "xpk-sub-slice",
        api,
        8,
        "2",
        "sub-v6e-slice-job-0-0.sub-v6e",
    );
    for name in ["xpk-super-slice", "xpk-super-slice-placed"] {
        let coordinator = oracle_coordinator(name, api);
        assert!(coordinator.starts_with("super-7x-slice-job-0-0.super-7x"));
        assert_multislice_env(name, api, 64, "2", &coordinator);
    }
}

#[test]
fn a_sub_slice_whose_annotation_disagrees_with_parallelism_is_rejected_by_t4() {
    let mut jobset = without_queue(served("xpk-sub-slice", JobSetApi::V09));
    jobset.pointer_mut(POD_ANNOTATIONS).unwrap()["cloud.google.com/gke-tpu-slice-topology"] =
        json!("4x8");
    let outcome = create(&jobset, &no_settings());
    assert_eq!(outcome.code, Some(400));
    assert_eq!(
        outcome.message.as_deref(),
        Some("[T4] spec.replicatedJobs[0].template.spec.parallelism (replicated job \"slice-job\"): is 4 but a tpu-v6e-slice 4x8 slice with 4 chips per pod has 8 hosts; set parallelism and completions to 8, or keep 4 hosts and select the topology \"4x4\"; see docs/rules.md, T4")
    );
    jobset.pointer_mut(POD_ANNOTATIONS).unwrap()["cloud.google.com/gke-tpu-slice-topology"] =
        json!("4x");
    assert_eq!(
        create(&jobset, &no_settings()).message.as_deref(),
        Some("[T4] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"cloud.google.com/gke-tpu-slice-topology\"] (replicated job \"slice-job\"): \"4x\" is not a topology like 4x4 or 2x2x4; use one of 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16; see docs/rules.md, T4")
    );
}

#[test]
fn a_super_slice_without_its_annotation_has_no_topology_and_no_placement() {
    let mut jobset = without_queue(served("xpk-super-slice", JobSetApi::V09));
    jobset
        .pointer_mut(POD_ANNOTATIONS)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove("cloud.google.com/gke-tpu-slice-topology");
    let outcome = create(&jobset, &no_settings());
    assert_eq!(
        outcome.message.as_deref(),
        Some("[T3] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector (replicated job \"slice-job\"): does not select cloud.google.com/gke-tpu-topology, so the pods may land on any TPU node; add cloud.google.com/gke-tpu-topology to the nodeSelector, or a required node affinity with one In value, set to \"4x4x8\" (the tpu7x topology that fits 32 hosts with 4 chips per pod); see docs/rules.md, T3\n\
              [X1] spec.replicatedJobs[0].template.metadata.annotations (replicated job \"slice-job\"): runs 64 TPU pods without exclusive placement, so two slices can land in one cloud.google.com/gke-nodepool; add the annotation alpha.jobset.sigs.k8s.io/exclusive-topology: cloud.google.com/gke-nodepool here or on the JobSet; see docs/rules.md, X1")
    );
}

/// The required node affinity JobSet's v6e example gets (docs/contributing/spec.md §4.7): one term per
/// accelerator of the table, each with the topologies where 4 pods of 4 chips make one slice,
/// and one that leaves an accelerator the table lacks open.
pub const V6E_EXAMPLE_AFFINITY: &str = r#"{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"cloud.google.com/gke-tpu-accelerator","operator":"In","values":["tpu-v4-podslice"]},{"key":"cloud.google.com/gke-tpu-topology","operator":"In","values":["2x2x4"]}]},{"matchExpressions":[{"key":"cloud.google.com/gke-tpu-accelerator","operator":"In","values":["tpu-v5-lite-podslice"]},{"key":"cloud.google.com/gke-tpu-topology","operator":"In","values":["4x4"]}]},{"matchExpressions":[{"key":"cloud.google.com/gke-tpu-accelerator","operator":"In","values":["tpu-v5p-slice"]},{"key":"cloud.google.com/gke-tpu-topology","operator":"In","values":["2x2x4"]}]},{"matchExpressions":[{"key":"cloud.google.com/gke-tpu-accelerator","operator":"In","values":["tpu-v6e-slice"]},{"key":"cloud.google.com/gke-tpu-topology","operator":"In","values":["4x4"]}]},{"matchExpressions":[{"key":"cloud.google.com/gke-tpu-accelerator","operator":"In","values":["tpu7"]},{"key":"cloud.google.com/gke-tpu-topology","operator":"In","values":["2x2x4"]}]},{"matchExpressions":[{"key":"cloud.google.com/gke-tpu-accelerator","operator":"In","values":["tpu7x"]},{"key":"cloud.google.com/gke-tpu-topology","operator":"In","values":["2x2x4"]}]},{"matchExpressions":[{"key":"cloud.google.com/gke-tpu-accelerator","operator":"NotIn","values":["tpu-v4-podslice","tpu-v5p-slice","tpu-v5-lite-device","tpu-v5-lite-podslice","tpu-v6e-slice","tpu7x","tpu7"]}]}]}}}"#;

/// Issue problem 1: JobSet's own v6e example, queued, with the node selectors left to the
/// Kueue flavour. Accepted at CREATE, narrowed to the slice shapes that fit (docs/contributing/spec.md §4.7); T3
/// and T4 judge Kueue's unsuspending UPDATE.
#[rstest]
fn a_queued_jobset_waits_for_kueues_selectors(
    #[values(JobSetApi::V08, JobSetApi::V09)] api: JobSetApi,
) {
    let served_jobset = served("jobset-v6e-example", api);
    let outcome = create(&served_jobset, &no_settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(
        outcome.warnings,
        ["spec.replicatedJobs[0].template.spec.template.spec.affinity: replicated job \"slice\" leaves its slice shape open, so a required node affinity limits it to slices of 4 hosts of 4 chips (or an unknown accelerator): tpu-v4-podslice 2x2x4, tpu-v5-lite-podslice…"]
    );
    let admitted = patched(&served_jobset, &outcome);
    let pod_template = &admitted["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
    assert_eq!(
        pod_template["spec"]["affinity"],
        serde_json::from_str::<Value>(V6E_EXAMPLE_AFFINITY).unwrap()
    );
    assert_eq!(
        pod_template["metadata"]["annotations"]["multislice.kubewarden.io/narrowed"],
        json!(
            r#"{"accelerator":"cloud.google.com/gke-tpu-accelerator","topology":"cloud.google.com/gke-tpu-topology","pairs":{"tpu-v4-podslice":["2x2x4"],"tpu-v5-lite-podslice":["4x4"],"tpu-v5p-slice":["2x2x4"],"tpu-v6e-slice":["4x4"],"tpu7":["2x2x4"],"tpu7x":["2x2x4"]},"anyAcceleratorBut":["tpu-v4-podslice","tpu-v5p-slice","tpu-v5-lite-device","tpu-v5-lite-podslice","tpu-v6e-slice","tpu7x","tpu7"]}"#
        )
    );
    // Admitted again, it is left as it is.
    let again = create(&admitted, &no_settings());
    assert_eq!((again.patch, again.warnings), (None, vec![]));
    assert_multislice_env(
        "jobset-v6e-example",
        api,
        8,
        "2",
        "v6e-multislice-slice-0-0.v6e-multislice",
    );

    let stored = stored_by_kueue("jobset-v6e-example", api);
    let flavour = json!({
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4"
    });
    let outcome = update(
        &unsuspended(&stored, Some(flavour)),
        &stored,
        &no_settings(),
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!((outcome.patch, outcome.warnings), (None, vec![]));

    let path = "spec.replicatedJobs[0].template.spec.template.spec.nodeSelector";
    let outcome = update(&unsuspended(&stored, None), &stored, &no_settings());
    assert_eq!(outcome.code, Some(400));
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!(
            "[T3] {path} (replicated job \"slice\"): does not select cloud.google.com/gke-tpu-accelerator, so the pods may land on any TPU node; add cloud.google.com/gke-tpu-accelerator to the nodeSelector, or a required node affinity with one In value, set to the accelerator of your TPU nodes (\"tpu-v4-podslice\" or \"tpu-v5p-slice\" or \"tpu-v5-lite-podslice\" or \"tpu-v6e-slice\" or \"tpu7x\" or \"tpu7\" fit 4 hosts with 4 chips per pod); see docs/rules.md, T3\n\
             [T3] {path} (replicated job \"slice\"): does not select cloud.google.com/gke-tpu-topology, so the pods may land on any TPU node; add cloud.google.com/gke-tpu-topology to the nodeSelector, or a required node affinity with one In value, set to the topology of your accelerator that fits 4 hosts with 4 chips per pod: \"2x2x4\" on tpu-v4-podslice, \"2x2x4\" on tpu-v5p-slice, \"4x4\" on tpu-v5-lite-podslice, \"4x4\" on tpu-v6e-slice, \"2x2x4\" on tpu7x, \"2x2x4\" on tpu7; see docs/rules.md, T3"
        ).as_str())
    );

    // A flavour that labels only the accelerator (xpk's autoprovisioning flavours) leaves the
    // pairs of that accelerator: v6e 4x4 alone, so the topology is selected.
    let accelerator_only = json!({"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"});
    let outcome = update(
        &unsuspended(&stored, Some(accelerator_only)),
        &stored,
        &no_settings(),
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!((outcome.patch, outcome.warnings), (None, vec![]));

    let small = json!({
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "2x4"
    });
    let outcome = update(&unsuspended(&stored, Some(small)), &stored, &no_settings());
    assert_eq!(
        outcome.message.as_deref(),
        Some("[T4] spec.replicatedJobs[0].template.spec.parallelism (replicated job \"slice\"): is 4 but a tpu-v6e-slice 2x4 slice with 4 chips per pod has 2 hosts; set parallelism and completions to 2, or keep 4 hosts and select the topology \"4x4\"; see docs/rules.md, T4")
    );
}

#[test]
fn without_the_queue_label_the_same_jobset_is_judged_at_create() {
    let jobset = without_queue(served("jobset-v6e-example", JobSetApi::V09));
    let outcome = create(&jobset, &no_settings());
    assert!(!outcome.accepted);
    assert!(outcome.message.unwrap().starts_with("[T3] "));
}

/// Pathways: the workers' own fieldRefs are kept, nothing is injected beside them, and they
/// resolve to what the contract says; the CPU head gets no multislice env.
#[rstest]
fn xpk_pathways_keeps_the_workers_own_env(
    #[values(JobSetApi::V08, JobSetApi::V09)] api: JobSetApi,
) {
    let (outcome, _, pods) = run(&fixture_request("xpk-pathways", api), &no_settings());
    assert_eq!(outcome.warnings, Vec::<String>::new());
    assert_eq!(pods.len(), 9);
    for p in &pods {
        assert_eq!(
            p.outcome.warnings,
            Vec::<String>::new(),
            "{}",
            p.sim.hostname
        );
        for list in ["initContainers", "containers"] {
            for (i, c) in p.pod["spec"][list]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                assert_eq!(
                    c["env"], p.sim.object["spec"][list][i]["env"],
                    "{} {list}[{i}]",
                    p.sim.hostname
                );
                let env = resolve(&p.pod, c).unwrap();
                if p.sim.replicated_job == "worker" {
                    let id = p.sim.job_index.to_string();
                    assert_eq!(get(&env, "MEGASCALE_NUM_SLICES"), Some("2"));
                    assert_eq!(get(&env, "MEGASCALE_SLICE_ID"), Some(id.as_str()));
                    assert_eq!(
                        get(&env, "MEGASCALE_COORDINATOR_ADDRESS"),
                        Some("pw-pathways-head-0-0.pw")
                    );
                } else {
                    assert_eq!(get(&env, "MEGASCALE_NUM_SLICES"), None);
                    // The head's sidecars and client find the head by the controller's label.
                    let head = ["PATHWAYS_HEAD", "HOST_ADDRESS"]
                        .iter()
                        .filter_map(|v| get(&env, v))
                        .collect::<Vec<_>>();
                    assert_eq!(head, ["pw-pathways-head-0-0.pw"], "{}", c["name"]);
                }
            }
        }
    }
}

/// xpk on GPUs: no TPU, no JAX opt-in. Nothing judged, nothing injected, and on JobSet v0.9+
/// (native groups) not a byte changed, although the container sets JAX_COORDINATOR_ADDRESS.
#[rstest]
fn xpk_gpu_is_accepted_and_left_alone(#[values(JobSetApi::V08, JobSetApi::V09)] api: JobSetApi) {
    let (outcome, _, pods) = run(&fixture_request("xpk-gpu", api), &no_settings());
    assert_eq!(outcome.warnings, Vec::<String>::new());
    if api == JobSetApi::V09 {
        assert_eq!(outcome.patch, None);
    }
    assert_eq!(pods.len(), 2);
    for p in &pods {
        let c = &p.pod["spec"]["containers"][0];
        assert_eq!(c["env"], p.sim.object["spec"]["containers"][0]["env"]);
        let env = resolve(&p.pod, c).unwrap();
        assert_eq!(
            get(&env, "JAX_COORDINATOR_ADDRESS"),
            Some("gpu-run-slice-job-0-0.gpu-run")
        );
        for var in [
            "MEGASCALE_NUM_SLICES",
            "JAX_PROCESS_ID",
            "JAX_NUM_PROCESSES",
        ] {
            assert_eq!(get(&env, var), None, "{var}");
        }
        if api == JobSetApi::V09 {
            assert_eq!(p.outcome.patch, None, "{}", p.sim.hostname);
        }
    }
}

/// Issue problem 5: the first replicated job of the slice group has `replicas: 0`.
#[rstest]
fn the_coordinator_is_a_pod_that_exists(#[values(JobSetApi::V08, JobSetApi::V09)] api: JobSetApi) {
    assert_multislice_env(
        "tpu-zero-replicas-first",
        api,
        4,
        "2",
        "spare-main-0-0.spare",
    );
}

fn cpu_jobset(coordinator: Value, annotations: Value) -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "etl", "namespace": "data", "annotations": annotations},
        "spec": {
            "coordinator": coordinator,
            "replicatedJobs": [{"name": "reader", "replicas": 1, "template": {"spec": {
                "completions": 2,
                "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "reader", "image": "python:3.12"}]}}
            }}}]
        }
    })
}

/// Issue problem 6: JobSet bounds podIndex by completions, and a JobSet with no TPU and no
/// JAX opt-in is not the policy's to judge.
#[test]
fn a_cpu_only_jobset_is_not_judged() {
    let ok = cpu_jobset(json!({"replicatedJob": "reader", "podIndex": 1}), json!({}));
    let outcome = create(&ok, &no_settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    // Even a coordinator JobSet's own webhook refuses is left to that webhook.
    let wrong = cpu_jobset(json!({"replicatedJob": "reader", "podIndex": 7}), json!({}));
    assert!(create(&wrong, &no_settings()).accepted);
    // A JAX JobSet is judged: its coordinator must name a pod (podIndex below completions, 2,
    // as JobSet bounds it), and P2 and P3 refuse its 2 completions one at a time (issue 51).
    let jax = json!({"multislice.kubewarden.io/jax-distributed": "true"});
    let outcome = create(
        &cpu_jobset(
            json!({"replicatedJob": "reader", "podIndex": 1}),
            jax.clone(),
        ),
        &no_settings(),
    );
    assert_eq!(
        outcome.message.as_deref(),
        Some("[P2] spec.replicatedJobs[0].template.spec.parallelism (replicated job \"reader\"): is 1 but completions is 2, so its pods run in waves, with process ids that collide or pass JAX_NUM_PROCESSES; every JAX process must run at once, set both to 2; or, if its pods run no JAX while other replicated jobs do, give it a groupName of its own; see docs/rules.md, P2\n\
              [P3] spec.coordinator.podIndex: is 1, but replicated job \"reader\" runs 1 pods at once, so JAX process 0 would be a pod that starts only once others have ended; name a pod below 1; or, if the pods of \"reader\" run no JAX while other replicated jobs do, give it a groupName of its own; see docs/rules.md, P3")
    );
    let outcome = create(
        &cpu_jobset(json!({"replicatedJob": "reader", "podIndex": 2}), jax),
        &no_settings(),
    );
    assert_eq!(
        outcome.message.as_deref(),
        Some("spec.coordinator.podIndex: is 2 but replicated job \"reader\" runs 2 pods per job; use 0 to 1")
    );
}

fn resized(jobset: &Value, rjob: usize, to: u64) -> Value {
    let mut new = jobset.clone();
    let spec = &mut new["spec"]["replicatedJobs"][rjob]["template"]["spec"];
    spec["parallelism"] = json!(to);
    spec["completions"] = json!(to);
    new
}

/// ElasticJobSet (docs/contributing/spec.md §5, E1): resizing a replicated job whose pods got parallelism-dependent
/// values at CREATE is refused, naming the field; other resizes pass.
#[test]
fn elastic_resizes_that_would_leave_stamped_values_stale_are_rejected() {
    let settings = no_settings();
    let jax = served("jax-gpu", JobSetApi::V09);
    let old = patched(&jax, &create(&jax, &settings));
    let outcome = update(&resized(&old, 1, 8), &old, &settings);
    assert_eq!(outcome.code, Some(400));
    let why = "but its pods get JAX_NUM_PROCESSES, JAX_PROCESS_ID and the JAX coordinator computed from it when the JobSet was created, and a resize would leave them stale; delete and recreate the JobSet with the new size";
    assert_eq!(
        outcome.message.unwrap(),
        format!(
            "[E1] spec.replicatedJobs[1].template.spec.parallelism (replicated job \"h100\"): changed from 4 to 8, {why}; see docs/rules.md, E1\n\
             [E1] spec.replicatedJobs[1].template.spec.completions (replicated job \"h100\"): changed from 4 to 8, {why}; see docs/rules.md, E1"
        )
    );

    // Without the JAX opt-in nothing depends on parallelism: the resize is JobSet's business.
    let mut plain = old.clone();
    plain["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("multislice.kubewarden.io/jax-distributed");
    let outcome = update(&resized(&plain, 1, 8), &plain, &settings);
    assert!(outcome.accepted, "{:?}", outcome.message);

    // A TPU job under tpuWorkerEnv: TPU_WORKER_HOSTNAMES lists every host of the Job.
    let worker_env = json!({"tpuWorkerEnv": true});
    let tpu = served("xpk-v6e-multislice", JobSetApi::V09);
    let stored = patched(&tpu, &create(&tpu, &worker_env));
    let mut new = stored.clone();
    new["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"] = json!(8);
    let outcome = update(&new, &stored, &worker_env);
    assert_eq!(
        outcome.message.as_deref(),
        Some("[T2] spec.replicatedJobs[0].template.spec.parallelism (replicated job \"slice-job\"): is 4 but completions is 8; a TPU slice needs every host at once, set both to 4; see docs/rules.md, T2\n\
              [E1] spec.replicatedJobs[0].template.spec.completions (replicated job \"slice-job\"): changed from 4 to 8, but its pods get TPU_WORKER_ID and TPU_WORKER_HOSTNAMES computed from it when the JobSet was created, and a resize would leave them stale; delete and recreate the JobSet with the new size; see docs/rules.md, E1")
    );
    // The same update without tpuWorkerEnv is judged by T2 alone.
    let outcome = update(&new, &stored, &settings);
    assert_eq!(
        outcome.message.as_deref(),
        Some("[T2] spec.replicatedJobs[0].template.spec.parallelism (replicated job \"slice-job\"): is 4 but completions is 8; a TPU slice needs every host at once, set both to 4; see docs/rules.md, T2")
    );
}
