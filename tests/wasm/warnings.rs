//! Warnings at JobSet CREATE, the response `kubectl apply` prints (docs/contributing/spec.md §4.2): every case where
//! a template's own env contradicts what its pods will get, each asserted exactly, and none
//! where the template agrees or where a reference cannot be resolved at admission.
use crate::common::*;
use multislice_host::controller::JobSetApi;
use serde_json::{json, Value};

fn field_ref(path: &str) -> Value {
    json!({"fieldRef": {"fieldPath": path}})
}

fn controller_ref(key: &str) -> Value {
    field_ref(&format!("metadata.annotations['jobset.sigs.k8s.io/{key}']"))
}

/// The JobSet CREATE warnings of `fixture` after `edit`, under both JobSet APIs (the same).
fn create_warnings(fixture: &str, settings: &Value, edit: impl Fn(&mut Value)) -> Vec<String> {
    let mut all = Vec::new();
    for api in [JobSetApi::V08, JobSetApi::V09] {
        let mut request = fixture_request(fixture, api);
        edit(&mut request["object"]);
        let outcome = validate(&request, settings);
        assert!(outcome.accepted, "{:?}", outcome.message);
        all.push(outcome.warnings);
    }
    assert_eq!(all[0], all[1], "v0.8 and v0.9 differ");
    all.swap_remove(0)
}

fn set_env(jobset: &mut Value, rjob: usize, container: usize, env: Value) {
    jobset["spec"]["replicatedJobs"][rjob]["template"]["spec"]["template"]["spec"]["containers"]
        [container]["env"] = env;
}

fn path(rjob: usize, container: usize, entry: usize) -> String {
    format!("spec.replicatedJobs[{rjob}].template.spec.template.spec.containers[{container}].env[{entry}]")
}

#[test]
fn a_literal_slice_count_that_disagrees() {
    let got = create_warnings("tpu-4-slices", &no_settings(), |js| {
        set_env(
            js,
            0,
            0,
            json!([{"name": "MEGASCALE_NUM_SLICES", "value": "8"}]),
        );
    });
    assert_eq!(
        got,
        [format!(
            "{}: MEGASCALE_NUM_SLICES keeps \"8\" for pod llama-v5e-slice-0-0, not the \"4\" the policy computed",
            path(0, 0, 0)
        )]
    );
}

#[test]
fn num_slices_from_global_replicas_beside_a_cpu_driver() {
    // The seed issue's hand-written pattern: global-replicas counts the driver too.
    let got = create_warnings("cpu-driver-default", &no_settings(), |js| {
        set_env(
            js,
            1,
            0,
            json!([{"name": "MEGASCALE_NUM_SLICES", "valueFrom": controller_ref("global-replicas")}]),
        );
    });
    assert_eq!(
        got,
        [format!(
            "{}: MEGASCALE_NUM_SLICES keeps \"5\" for pod driver-workers-workers-0-0, not the \"4\" the policy computed",
            path(1, 0, 0)
        )]
    );
}

#[test]
fn num_slices_from_replicatedjob_replicas_in_a_group_of_two() {
    let got = create_warnings("tpu-two-rjobs-one-group", &no_settings(), |js| {
        for r in 0..2 {
            set_env(
                js,
                r,
                0,
                json!([{"name": "MEGASCALE_NUM_SLICES", "valueFrom": controller_ref("replicatedjob-replicas")}]),
            );
        }
    });
    assert_eq!(
        got,
        [
            format!("{}: MEGASCALE_NUM_SLICES keeps \"2\" for pod mixed-pools-pool-a-0-0, not the \"5\" the policy computed", path(0, 0, 0)),
            format!("{}: MEGASCALE_NUM_SLICES keeps \"3\" for pod mixed-pools-pool-b-0-0, not the \"5\" the policy computed", path(1, 0, 0)),
        ]
    );
}

#[test]
fn slice_id_from_job_index_in_a_group_of_two() {
    // Right for the first replicated job, off by its 2 slices for the second.
    let got = create_warnings("tpu-two-rjobs-one-group", &no_settings(), |js| {
        for r in 0..2 {
            set_env(
                js,
                r,
                0,
                json!([{"name": "MEGASCALE_SLICE_ID", "valueFrom": field_ref("metadata.labels['jobset.sigs.k8s.io/job-index']")}]),
            );
        }
    });
    assert_eq!(
        got,
        [format!(
            "{}: MEGASCALE_SLICE_ID keeps \"0\" for pod mixed-pools-pool-b-0-0, not the \"2\" the policy computed",
            path(1, 0, 0)
        )]
    );
}

#[test]
fn a_literal_slice_id_in_a_replicated_job_of_several_replicas() {
    let got = create_warnings("tpu-4-slices", &no_settings(), |js| {
        set_env(
            js,
            0,
            0,
            json!([{"name": "MEGASCALE_SLICE_ID", "value": "0"}]),
        );
    });
    assert_eq!(
        got,
        [format!(
            "{}: MEGASCALE_SLICE_ID keeps \"0\" for pod llama-v5e-slice-1-0, not the \"1\" the policy computed",
            path(0, 0, 0)
        )]
    );
}

#[test]
fn a_dollar_reference_that_expands_to_the_computed_value_is_no_contradiction() {
    // xpk's style: names by fieldRef, the address by $(VAR) expansion, SLICE_ID by job index.
    let got = create_warnings("tpu-4-slices", &no_settings(), |js| {
        set_env(
            js,
            0,
            0,
            json!([
                {"name": "JOBSET_NAME", "valueFrom": controller_ref("jobset-name")},
                {"name": "REPLICATED_JOB_NAME", "valueFrom": controller_ref("replicatedjob-name")},
                {"name": "MEGASCALE_SLICE_ID", "valueFrom": field_ref("metadata.labels['jobset.sigs.k8s.io/job-index']")},
                {"name": "MEGASCALE_COORDINATOR_ADDRESS", "value": "$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)"},
                {"name": "MEGASCALE_NUM_SLICES", "valueFrom": controller_ref("replicatedjob-replicas")}
            ]),
        );
    });
    assert_eq!(got, Vec::<String>::new());
}

#[test]
fn a_dollar_reference_that_expands_to_another_pod_is_a_contradiction() {
    // The GPU pattern of xpk in a JobSet whose coordinator is a head listed last: each
    // replicated job's own pod 0 is named, and only the head's is process 0.
    let got = create_warnings("jax-cpu-coordinator-last", &no_settings(), |js| {
        for r in 0..2 {
            set_env(
                js,
                r,
                0,
                json!([
                    {"name": "REPLICATED_JOB_NAME", "valueFrom": controller_ref("replicatedjob-name")},
                    {"name": "JOBSET_NAME", "valueFrom": controller_ref("jobset-name")},
                    {"name": "JAX_COORDINATOR_ADDRESS", "value": "$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME):6666"}
                ]),
            );
        }
    });
    assert_eq!(
        got,
        [format!(
            "{}: JAX_COORDINATOR_ADDRESS keeps \"cpu-jax-last-workers-0-0.cpu-jax-last:6666\" for pod cpu-jax-last-workers-0-0, not the \"cpu-jax-last-head-0-0.cpu-jax-last:6666\" the policy computed",
            path(0, 0, 2)
        )]
    );
}

#[test]
fn jax_process_id_from_the_completion_index_over_two_replicated_jobs() {
    let got = create_warnings("jax-gpu", &no_settings(), |js| {
        for r in 0..2 {
            set_env(
                js,
                r,
                0,
                json!([{"name": "JAX_PROCESS_ID", "valueFrom": field_ref("metadata.annotations['batch.kubernetes.io/job-completion-index']")}]),
            );
        }
    });
    assert_eq!(
        got,
        [
            format!("{}: JAX_PROCESS_ID keeps \"0\" for pod gpu-train-a100-1-0, not the \"2\" the policy computed", path(0, 0, 0)),
            format!("{}: JAX_PROCESS_ID keeps \"0\" for pod gpu-train-h100-0-0, not the \"4\" the policy computed", path(1, 0, 0)),
        ]
    );
}

#[test]
fn references_admission_cannot_resolve_give_no_warning() {
    let got = create_warnings("tpu-4-slices", &no_settings(), |js| {
        let c = &mut js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            ["containers"][0];
        c["envFrom"] = json!([{"configMapRef": {"name": "megascale"}}]);
        c["env"] = json!([
            // Not a controller's key: the user's own annotation.
            {"name": "MEGASCALE_NUM_SLICES", "valueFrom": field_ref("metadata.annotations['my-slices']")},
            // Only envFrom can define it.
            {"name": "MEGASCALE_SLICE_ID", "value": "$(FROM_CONFIG_MAP)"},
            // A Secret.
            {"name": "MEGASCALE_COORDINATOR_ADDRESS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
        ]);
    });
    assert_eq!(got, Vec::<String>::new());
}

#[test]
fn the_generated_name_of_a_jobset_is_not_guessed() {
    let got = create_warnings("generate-name", &no_settings(), |js| {
        set_env(
            js,
            0,
            0,
            json!([
                {"name": "JOBSET_NAME", "valueFrom": controller_ref("jobset-name")},
                {"name": "MEGASCALE_COORDINATOR_ADDRESS", "value": "$(JOBSET_NAME)-elsewhere-0-0.$(JOBSET_NAME)"}
            ]),
        );
    });
    assert_eq!(got, Vec::<String>::new());
}

#[test]
fn the_pods_of_a_contradicting_template_warn_too() {
    let mut request = fixture_request("tpu-4-slices", JobSetApi::V09);
    set_env(
        &mut request["object"],
        0,
        0,
        json!([{"name": "MEGASCALE_NUM_SLICES", "value": "8"}]),
    );
    let (_, _, pods) = run(&request, &no_settings());
    for p in &pods {
        assert_eq!(
            p.outcome.warnings,
            ["container \"jax\" (spec.containers[0]): MEGASCALE_NUM_SLICES keeps \"8\", not the \"4\" the policy computed"]
        );
    }
}

/// `n` env entries, each a `fieldRef` to a jobset.sigs.k8s.io/ key no release sets.
fn unknown_refs(n: usize) -> Value {
    json!((0..n)
        .map(
            |i| json!({"name": format!("V{i}"), "valueFrom": controller_ref(&format!("nope-{i}"))})
        )
        .collect::<Vec<_>>())
}

fn unknown_ref_warning(i: usize) -> String {
    format!(
        "{}: V{i} reads the annotation jobset.sigs.k8s.io/nope-{i}, which no JobSet release sets, so it is empty in every pod",
        path(0, 0, i)
    )
}

/// A response carries at most 10 warnings (docs/contributing/spec.md §4.2): ten are all
/// listed; past ten, the first nine and how many more.
#[test]
fn a_response_carries_at_most_ten_warnings() {
    let ten = create_warnings("tpu-4-slices", &no_settings(), |js| {
        set_env(js, 0, 0, unknown_refs(10))
    });
    assert_eq!(ten, (0..10).map(unknown_ref_warning).collect::<Vec<_>>());
    let eleven = create_warnings("tpu-4-slices", &no_settings(), |js| {
        set_env(js, 0, 0, unknown_refs(11))
    });
    let mut want: Vec<String> = (0..9).map(unknown_ref_warning).collect();
    want.push("… and 2 more like these".into());
    assert_eq!(eleven, want);
}

/// A warning is at most 256 characters, as the API server keeps them: a longer one is cut at a
/// character boundary, its path kept, and ends with "…".
#[test]
fn a_warning_past_256_characters_is_cut_keeping_its_path() {
    // A key of 317 characters (the longest label key: a 253-character prefix, '/', a
    // 63-character name), of two bytes each past the prefix, so that a cut on a byte would
    // split one.
    let key = format!("jobset.sigs.k8s.io/{}", "ü".repeat(298));
    assert_eq!(key.chars().count(), 317);
    let warnings = create_warnings("tpu-4-slices", &no_settings(), |js| {
        set_env(
            js,
            0,
            0,
            json!([{"name": "TAGGED", "valueFrom": field_ref(&format!("metadata.labels['{key}']"))}]),
        )
    });
    let full = format!(
        "{}: TAGGED reads the label {key}, which no JobSet release sets, so it is empty in every pod",
        path(0, 0, 0)
    );
    let mut cut: String = full.chars().take(255).collect();
    cut.push('…');
    assert_eq!(warnings, [cut]);
    assert_eq!(warnings[0].chars().count(), 256);
}
