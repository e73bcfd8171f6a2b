//! JAX on a plain Indexed Job (docs/contributing/spec.md §4.6): Job CREATE and UPDATE through the real module.
use crate::common::*;
use multislice_host::env::resolve;
use multislice_host::fixtures;
use multislice_host::request::{admission_request, Kind};
use rstest::rstest;
use serde_json::{json, Value};

pub fn job_request(name: &str) -> Value {
    fixtures::load_json(&fixtures::job_request_path(name)).expect("fixture")
}

fn job_update(old: &Value, new: &Value) -> Value {
    admission_request(Kind::Job, "UPDATE", new, Some(old))
}

#[rstest]
#[case::gpu_4(
    "jax-gpu-4",
    json!([{"op": "add", "path": "/spec/template/metadata/annotations", "value": {
        "multislice.kubewarden.io/facts": r#"{"subdomain":"jax-train","job":{"completions":4}}"#}}])
)]
#[case::generate_name(
    "generate-name",
    json!([{"op": "add", "path": "/spec/template/metadata", "value": {"annotations": {
        "multislice.kubewarden.io/facts": r#"{"subdomain":"sweep","job":{"completions":2}}"#}}}])
)]
#[case::tpu7x_two_containers(
    "tpu7x-two-containers",
    json!([{"op": "add", "path": "/spec/template/metadata", "value": {"annotations": {
        "multislice.kubewarden.io/facts": r#"{"subdomain":"ironwood","job":{"completions":2}}"#}}}])
)]
fn opted_in_job_create_stamps_the_facts(#[case] name: &str, #[case] patch: Value) {
    let outcome = validate(&job_request(name), &no_settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.patch_json(), patch);
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
    // Admitting the stamped Job again changes nothing.
    let stamped = patched(&job_request(name)["object"], &outcome);
    let again = validate(
        &admission_request(Kind::Job, "CREATE", &stamped, None),
        &no_settings(),
    );
    assert_eq!(again.patch, None);
}

#[rstest]
#[case::not_opted_in("not-opted-in")]
#[case::jobset_child("jobset-child")]
fn other_jobs_pass_untouched(#[case] name: &str) {
    for settings in [no_settings(), json!({"jaxEnv": "always"})] {
        let outcome = validate(&job_request(name), &settings);
        assert!(outcome.accepted);
        assert_eq!(outcome.patch, None);
        assert_eq!(outcome.message, None);
        assert!(outcome.warnings.is_empty());
    }
}

#[test]
fn jax_env_never_turns_jobs_off_too() {
    for name in ["jax-gpu-4", "j1-fail", "j4-fail"] {
        let outcome = validate(&job_request(name), &json!({"jaxEnv": "never"}));
        assert!(outcome.accepted, "{name}");
        assert_eq!(outcome.patch, None, "{name}");
    }
}

#[rstest]
#[case::j1("j1-fail", "[J1] spec.template.spec.subdomain: is not set, so the Job's pods get no DNS names and no JAX process can reach the coordinator, the pod with completion index 0; set it to the name of a headless Service (clusterIP: None) that selects the Job's pods, and create that Service; see docs/rules.md, J1")]
#[case::j2("j2-fail", "[J2] spec.completionMode: is \"NonIndexed\"; set it to Indexed: each pod's JAX process id is its completion index; see docs/rules.md, J2")]
#[case::j3("j3-fail", "[J3] spec.parallelism: is 2 but completions is 4; every JAX process must run at once, set both to 4; see docs/rules.md, J3")]
#[case::j4("j4-fail", "[J4] metadata.annotations[\"kueue.x-k8s.io/job-min-parallelism\"]: is 2, below parallelism 4: Kueue's partial admission may start the Job with as few as 2 pods by lowering its parallelism and completions, but the JAX env of its pods counts 4 processes and jax.distributed.initialize waits for all of them; remove the annotation: Kueue then admits the Job whole, or keeps it queued until it fits; see docs/rules.md, J4")]
fn each_j_rule_rejects_with_its_exact_message(#[case] name: &str, #[case] message: &str) {
    let outcome = validate(&job_request(name), &no_settings());
    assert!(!outcome.accepted);
    assert_eq!(outcome.code, Some(400));
    assert_eq!(outcome.message.as_deref(), Some(message));
    assert_eq!(outcome.patch, None);
}

#[test]
fn every_broken_j_rule_is_listed_in_order() {
    let mut job = fixtures::job_yaml("j1-fail").unwrap();
    job["spec"]["completionMode"] = json!("NonIndexed");
    job["spec"]["parallelism"] = json!(1);
    job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = json!("0");
    let outcome = validate(
        &admission_request(Kind::Job, "CREATE", &job, None),
        &no_settings(),
    );
    let message = outcome.message.unwrap();
    let ids: Vec<&str> = message.lines().map(|l| &l[..4]).collect();
    assert_eq!(ids, ["[J1]", "[J2]", "[J3]", "[J4]"]);
}

#[rstest]
#[case::scale_up(8, 8, Some("[E2] spec.completions: changed from 4 to 8, but the JAX env of this Job's pods was set at creation for 4 processes and running JAX processes cannot learn a new count; delete the Job and create it again with completions and parallelism both 8; see docs/rules.md, E2"))]
#[case::parallelism_only(4, 2, Some("[E2] spec.parallelism: changed from 4 to 2, but jax.distributed.initialize waits for all 4 processes at once; keep parallelism equal to completions; see docs/rules.md, E2"))]
#[case::no_change(4, 4, None)]
fn elastic_update_of_an_opted_in_job_is_rejected(
    #[case] completions: u32,
    #[case] parallelism: u32,
    #[case] message: Option<&str>,
) {
    let old = patched(
        &job_request("jax-gpu-4")["object"],
        &validate(&job_request("jax-gpu-4"), &no_settings()),
    );
    let mut new = old.clone();
    new["spec"]["completions"] = json!(completions);
    new["spec"]["parallelism"] = json!(parallelism);
    new["metadata"]["labels"] = json!({"team": "ml"});
    let outcome = validate(&job_update(&old, &new), &no_settings());
    assert_eq!(outcome.accepted, message.is_none());
    assert_eq!(outcome.message.as_deref(), message);
    assert_eq!(outcome.code, message.map(|_| 400));
    assert_eq!(outcome.patch, None, "UPDATE never mutates");
}

#[test]
fn elastic_update_of_other_jobs_is_accepted() {
    let old = job_request("not-opted-in")["object"].clone();
    let mut new = old.clone();
    new["spec"]["completions"] = json!(6);
    new["spec"]["parallelism"] = json!(6);
    let outcome = validate(&job_update(&old, &new), &no_settings());
    assert!(outcome.accepted);
    assert_eq!(outcome.patch, None);
}

#[test]
fn job_delete_is_accepted() {
    let job = fixtures::job_yaml("j1-fail").unwrap();
    let outcome = validate(
        &admission_request(Kind::Job, "DELETE", &job, None),
        &no_settings(),
    );
    assert!(outcome.accepted);
    assert_eq!(outcome.patch, None);
}

/// A container's name and its resolved `JAX_*` variables, in env order.
type ContainerJax = (String, Vec<(String, String)>);

/// Every container's resolved JAX env, per pod in completion-index order.
fn jax_env_of(pods: &[AdmittedPod]) -> Vec<Vec<ContainerJax>> {
    pods.iter()
        .map(|p| {
            let containers = p.pod["spec"]["containers"].as_array().unwrap();
            containers
                .iter()
                .map(|c| {
                    let env = resolve(&p.pod, c).unwrap();
                    let jax = env
                        .into_iter()
                        .filter(|(n, _)| n.starts_with("JAX_"))
                        .collect();
                    (c["name"].as_str().unwrap().to_string(), jax)
                })
                .collect()
        })
        .collect()
}

fn jax(coordinator: &str, count: u32, id: u32) -> Vec<(String, String)> {
    vec![
        ("JAX_COORDINATOR_ADDRESS".into(), coordinator.into()),
        ("JAX_NUM_PROCESSES".into(), count.to_string()),
        ("JAX_PROCESS_ID".into(), id.to_string()),
    ]
}

/// docs/contributing/spec.md §4.6 through the Job controller simulation: admit the Job, make its pods with the
/// Job controller's labels and hostnames, admit each, and resolve every container's env.
#[test]
fn every_pod_of_an_opted_in_job_gets_its_process() {
    let (_, _, pods) = run_job(&job_request("jax-gpu-4"), &no_settings());
    let want: Vec<_> = (0..4)
        .map(|k| vec![("jax".to_string(), jax("jax-train-0.jax-train:6666", 4, k))])
        .collect();
    assert_eq!(jax_env_of(&pods), want);
    // The user's own variable stays, after the injected ones.
    let env = resolve(&pods[1].pod, &pods[1].pod["spec"]["containers"][0]).unwrap();
    assert_eq!(
        env[3],
        ("XLA_PYTHON_CLIENT_MEM_FRACTION".into(), "0.9".into())
    );
    // The coordinator is the pod with completion index 0, as DNS will name it.
    assert_eq!(pods[0].sim.hostname, "jax-train-0");
    assert_eq!(pods[0].pod["spec"]["subdomain"], json!("jax-train"));
    for p in &pods {
        assert!(p.outcome.warnings.is_empty(), "{:?}", p.outcome.warnings);
    }
}

#[test]
fn the_exact_patch_of_a_job_pod() {
    let (_, _, pods) = run_job(&job_request("jax-gpu-4"), &no_settings());
    assert_eq!(
        pods[2].outcome.patch_json(),
        json!([
            {"op": "replace", "path": "/spec/containers/0/env/0/name", "value": "JAX_COORDINATOR_ADDRESS"},
            {"op": "replace", "path": "/spec/containers/0/env/0/value", "value": "jax-train-0.jax-train:6666"},
            {"op": "add", "path": "/spec/containers/0/env/1", "value": {"name": "JAX_NUM_PROCESSES", "value": "4"}},
            {"op": "add", "path": "/spec/containers/0/env/2", "value": {"name": "JAX_PROCESS_ID", "value": "2"}},
            {"op": "add", "path": "/spec/containers/0/env/3", "value": {"name": "XLA_PYTHON_CLIENT_MEM_FRACTION", "value": "0.9"}}
        ])
    );
}

#[test]
fn a_job_created_with_generate_name_takes_its_name_from_the_pods() {
    let (_, admitted, pods) = run_job(&job_request("generate-name"), &no_settings());
    let name = multislice_host::controller::final_name(&admitted);
    assert_eq!(name, "sweep-x7k2p");
    let coordinator = format!("{}.sweep:6666", pods[0].sim.hostname);
    assert_eq!(coordinator, "sweep-x7k2p-0.sweep:6666");
    let want: Vec<_> = (0..2)
        .map(|k| vec![("jax".to_string(), jax(&coordinator, 2, k))])
        .collect();
    assert_eq!(jax_env_of(&pods), want);
}

#[test]
fn each_tpu_container_of_a_job_pod_is_a_process_of_its_own() {
    let (_, _, pods) = run_job(&job_request("tpu7x-two-containers"), &no_settings());
    let c = "ironwood-0.ironwood:6666";
    let want: Vec<_> = (0..2)
        .map(|k| {
            vec![
                ("jax-tpu-1".to_string(), jax(c, 4, 2 * k)),
                ("jax-tpu-2".to_string(), jax(c, 4, 2 * k + 1)),
                ("log-shipper".to_string(), vec![]),
            ]
        })
        .collect();
    assert_eq!(jax_env_of(&pods), want);
}

#[test]
fn a_hand_written_env_is_kept_and_a_wrong_count_is_warned_about() {
    let (outcome, _, pods) = run_job(&job_request("hand-written-env"), &no_settings());
    assert_eq!(
        outcome.warnings,
        ["spec.template.spec.containers[0].env[0]: JAX_NUM_PROCESSES keeps \"8\" for the pod with completion index 0, not the \"4\" the policy computed"]
    );
    for (k, p) in pods.iter().enumerate() {
        let env = resolve(&p.pod, &p.pod["spec"]["containers"][0]).unwrap();
        assert_eq!(
            env,
            [
                (
                    "JAX_COORDINATOR_ADDRESS".into(),
                    "hand-env-0.hand-env:6666".into()
                ),
                ("JAX_NUM_PROCESSES".into(), "8".into()),
                ("JAX_PROCESS_ID".into(), k.to_string()),
            ]
        );
        assert_eq!(
            p.outcome.warnings,
            ["container \"jax\" (spec.containers[0]): JAX_NUM_PROCESSES keeps \"8\", not the \"4\" the policy computed"]
        );
    }
}

#[test]
fn the_pods_of_other_jobs_pass_untouched() {
    let job = &job_request("not-opted-in")["object"];
    for sim in multislice_host::controller::indexed_job_pods(job).unwrap() {
        let pod = admission_request(Kind::Pod, "CREATE", &sim.object, None);
        for settings in [no_settings(), json!({"jaxEnv": "always"})] {
            let outcome = validate(&pod, &settings);
            assert!(outcome.accepted);
            assert_eq!(outcome.patch, None);
            assert!(outcome.warnings.is_empty());
        }
    }
}

#[test]
fn a_stamped_job_pod_under_jax_env_never_is_untouched() {
    let (_, admitted, _) = run_job(&job_request("jax-gpu-4"), &no_settings());
    let sim = &multislice_host::controller::indexed_job_pods(&admitted).unwrap()[0];
    let pod = admission_request(Kind::Pod, "CREATE", &sim.object, None);
    let outcome = validate(&pod, &json!({"jaxEnv": "never"}));
    assert!(outcome.accepted);
    assert_eq!(outcome.patch, None);
}

#[test]
fn a_job_pod_the_job_controller_did_not_make_is_left_alone_with_a_warning() {
    let (_, admitted, _) = run_job(&job_request("jax-gpu-4"), &no_settings());
    let mut pod = multislice_host::controller::indexed_job_pods(&admitted).unwrap()[0]
        .object
        .clone();
    let labels = pod["metadata"]["labels"].as_object_mut().unwrap();
    labels.remove("batch.kubernetes.io/job-completion-index");
    pod["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("batch.kubernetes.io/job-completion-index");
    let outcome = validate(
        &admission_request(Kind::Pod, "CREATE", &pod, None),
        &no_settings(),
    );
    assert!(outcome.accepted);
    assert_eq!(outcome.patch, None);
    assert_eq!(
        outcome.warnings,
        ["pod of an opted-in Job: no batch.kubernetes.io/job-name label or owning Job, no batch.kubernetes.io/job-completion-index, or no subdomain, so no Job controller made it from an admitted Indexed Job; left unchanged"]
    );
}

#[test]
fn a_garbled_completion_index_is_a_clear_rejection() {
    let (_, admitted, _) = run_job(&job_request("jax-gpu-4"), &no_settings());
    let mut pod = multislice_host::controller::indexed_job_pods(&admitted).unwrap()[0]
        .object
        .clone();
    pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = json!("one");
    let outcome = validate(
        &admission_request(Kind::Pod, "CREATE", &pod, None),
        &no_settings(),
    );
    assert!(!outcome.accepted);
    assert_eq!(outcome.code, Some(400));
    assert_eq!(
        outcome.message.as_deref(),
        Some("metadata.labels[\"batch.kubernetes.io/job-completion-index\"]: \"one\" is not a whole number from 0 to 2147483647")
    );
}

/// `make preview` of the Job example of docs/jax-indexed-job.md: the Service is skipped, the Job admitted and
/// every pod's JAX env shown.
#[test]
fn preview_shows_a_jobs_pods() {
    let yaml = std::fs::read_to_string(
        multislice_host::workspace_root().join("examples/jax-indexed-job.yaml"),
    )
    .unwrap();
    let report = multislice_host::preview::preview(
        policy(),
        &yaml,
        &no_settings(),
        multislice_host::controller::JobSetApi::V09,
    )
    .unwrap();
    assert_eq!(
        report,
        r#"skipped a "Service" document: only JobSets and Jobs are previewed

Job jax-train: accepted, mutated
Job patch:
- op: add
  path: /spec/template/metadata
  value:
    annotations:
      multislice.kubewarden.io/facts: '{"subdomain":"jax-train","job":{"completions":4}}'

POD          CONTAINER  GROUP  JAX_COORDINATOR_ADDRESS     JAX_NUM_PROCESSES  JAX_PROCESS_ID
jax-train-0  jax        -      jax-train-0.jax-train:6666  4                  0
jax-train-1  jax        -      jax-train-0.jax-train:6666  4                  1
jax-train-2  jax        -      jax-train-0.jax-train:6666  4                  2
jax-train-3  jax        -      jax-train-0.jax-train:6666  4                  3

"#
    );
}

/// Dropping the opt-in annotation in the same UPDATE does not let a resize through: the pod
/// template, which new pods copy, still carries the count stamped at CREATE.
#[test]
fn an_update_that_drops_the_opt_in_and_resizes_is_still_rejected() {
    let old = patched(
        &job_request("jax-gpu-4")["object"],
        &validate(&job_request("jax-gpu-4"), &no_settings()),
    );
    let mut new = old.clone();
    new["metadata"]["annotations"] = json!({});
    new["spec"]["completions"] = json!(8);
    new["spec"]["parallelism"] = json!(8);
    let outcome = validate(&job_update(&old, &new), &no_settings());
    assert!(!outcome.accepted);
    assert_eq!(
        outcome.message.as_deref(),
        Some("[E2] spec.completions: changed from 4 to 8, but the JAX env of this Job's pods was set at creation for 4 processes and running JAX processes cannot learn a new count; delete the Job and create it again with completions and parallelism both 8; see docs/rules.md, E2")
    );
    // Without the resize, dropping the annotation is fine.
    new["spec"]["completions"] = json!(4);
    new["spec"]["parallelism"] = json!(4);
    assert!(validate(&job_update(&old, &new), &no_settings()).accepted);
}

/// The first pod of jax-gpu-4 as the Job controller makes it, after the Job's admission.
fn first_pod_of_jax_gpu_4() -> Value {
    let (_, admitted, _) = run_job(&job_request("jax-gpu-4"), &no_settings());
    multislice_host::controller::indexed_job_pods(&admitted).unwrap()[1]
        .object
        .clone()
}

/// The JAX coordinator the pod ends up with.
fn coordinator_of(pod: &Value) -> Option<String> {
    let outcome = validate(
        &admission_request(Kind::Pod, "CREATE", pod, None),
        &no_settings(),
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    let pod = patched(pod, &outcome);
    let env = resolve(&pod, &pod["spec"]["containers"][0]).unwrap();
    multislice_host::env::get(&env, "JAX_COORDINATOR_ADDRESS").map(str::to_string)
}

#[test]
fn the_job_name_comes_from_the_legacy_label_or_the_owner() {
    // Kubernetes before 1.27 labels pods `job-name` only.
    let mut pod = first_pod_of_jax_gpu_4();
    pod["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("batch.kubernetes.io/job-name");
    assert_eq!(
        coordinator_of(&pod).as_deref(),
        Some("jax-train-0.jax-train:6666")
    );
    // Under `manualSelector: true` there is no name label at all; the owner names the Job.
    pod["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("job-name");
    assert_eq!(
        coordinator_of(&pod).as_deref(),
        Some("jax-train-0.jax-train:6666")
    );
}

#[test]
fn a_resize_of_a_job_that_was_never_stamped_is_accepted() {
    // The annotation added in the same UPDATE as a resize: the pods have no env to go stale.
    let old = job_request("not-opted-in")["object"].clone();
    let mut new = old.clone();
    new["metadata"]["annotations"] = json!({"multislice.kubewarden.io/jax-distributed": "true"});
    new["spec"]["completions"] = json!(6);
    new["spec"]["parallelism"] = json!(6);
    let outcome = validate(&job_update(&old, &new), &no_settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.patch, None);
}

#[test]
fn under_jax_env_never_a_stamped_job_may_resize() {
    let old = patched(
        &job_request("jax-gpu-4")["object"],
        &validate(&job_request("jax-gpu-4"), &no_settings()),
    );
    let mut new = old.clone();
    new["spec"]["completions"] = json!(8);
    new["spec"]["parallelism"] = json!(8);
    let outcome = validate(&job_update(&old, &new), &json!({"jaxEnv": "never"}));
    assert!(outcome.accepted, "{:?}", outcome.message);
}

// --- N2 (docs/contributing/spec.md §6): an opted-in Job of several processes resolves cluster DNS names.

fn with_dns(host_network: Option<bool>, dns_policy: Option<&str>, completions: u32) -> Value {
    let mut job = job_request("jax-gpu-4")["object"].clone();
    job["spec"]["completions"] = json!(completions);
    job["spec"]["parallelism"] = json!(completions);
    let spec = &mut job["spec"]["template"]["spec"];
    if let Some(h) = host_network {
        spec["hostNetwork"] = json!(h);
    }
    if let Some(p) = dns_policy {
        spec["dnsPolicy"] = json!(p);
    }
    job
}

const N2_PATH: &str = "[N2] spec.template.spec.dnsPolicy";
const CANNOT: &str = "so the pods cannot resolve the coordinator's hostname";

#[rstest]
#[case::host_network_default_policy(Some(true), None, format!("{N2_PATH}: is not set, and with hostNetwork: true the default ClusterFirst falls back to the node's resolver, {CANNOT}; set it to ClusterFirstWithHostNet; see docs/rules.md, N2"))]
#[case::host_network_cluster_first(Some(true), Some("ClusterFirst"), format!("{N2_PATH}: is \"ClusterFirst\", which with hostNetwork: true falls back to the node's resolver, {CANNOT}; set it to ClusterFirstWithHostNet; see docs/rules.md, N2"))]
#[case::default_policy(None, Some("Default"), format!("{N2_PATH}: is \"Default\", the node's resolver, {CANNOT}; set it to ClusterFirst or remove it; see docs/rules.md, N2"))]
#[case::default_policy_on_host_network(Some(true), Some("Default"), format!("{N2_PATH}: is \"Default\", the node's resolver, {CANNOT}; set it to ClusterFirstWithHostNet; see docs/rules.md, N2"))]
fn n2_rejects_a_job_whose_pods_cannot_resolve_cluster_dns(
    #[case] host_network: Option<bool>,
    #[case] dns_policy: Option<&str>,
    #[case] message: String,
    #[values("{}", r#"{"jaxEnv": "always"}"#, r#"{"jaxEnv": "never"}"#)] settings: &str,
) {
    // Whatever jaxEnv says (docs/contributing/spec.md §6 N2).
    let settings: Value = serde_json::from_str(settings).unwrap();
    let job = with_dns(host_network, dns_policy, 4);
    let outcome = validate(
        &admission_request(Kind::Job, "CREATE", &job, None),
        &settings,
    );
    assert!(!outcome.accepted);
    assert_eq!(outcome.code, Some(400));
    assert_eq!(outcome.message.as_deref(), Some(message.as_str()));
    assert_eq!(outcome.patch, None);
}

#[rstest]
#[case::xpks_pairing(Some(true), Some("ClusterFirstWithHostNet"), 4)]
#[case::none_with_dns_config(None, Some("None"), 4)]
#[case::cluster_first_off_host_network(Some(false), Some("ClusterFirst"), 4)]
#[case::one_process_needs_no_dns(Some(true), None, 1)]
fn n2_near_misses_of_a_job_pass(
    #[case] host_network: Option<bool>,
    #[case] dns_policy: Option<&str>,
    #[case] completions: u32,
) {
    let mut job = with_dns(host_network, dns_policy, completions);
    if dns_policy == Some("None") {
        job["spec"]["template"]["spec"]["dnsConfig"] = json!({"nameservers": ["10.96.0.10"]});
    }
    let outcome = validate(
        &admission_request(Kind::Job, "CREATE", &job, None),
        &no_settings(),
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert!(outcome.patch.is_some());
    assert_eq!(outcome.warnings, Vec::<String>::new());
}

#[test]
fn n2_comes_after_the_j_rules() {
    let mut job = with_dns(Some(true), None, 4);
    job["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("subdomain");
    let outcome = validate(
        &admission_request(Kind::Job, "CREATE", &job, None),
        &no_settings(),
    );
    let rules: Vec<&str> = outcome
        .message
        .as_deref()
        .unwrap()
        .lines()
        .map(|l| &l[..4])
        .collect();
    assert_eq!(rules, ["[J1]", "[N2]"]);
}
