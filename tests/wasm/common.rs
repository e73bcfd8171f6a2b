use multislice_host::controller::{self, JobSetApi, SimPod};
use multislice_host::fixtures;
use multislice_host::request::{admission_request, Kind};
use multislice_host::runner::apply;
use multislice_host::{default_wasm_path, Outcome, Policy};
use serde_json::{json, Value};
use std::sync::OnceLock;

/// The module is compiled once per test binary, as policy-server does at start.
pub fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| Policy::load(&default_wasm_path()).unwrap_or_else(|e| panic!("{e:#}")))
}

pub fn no_settings() -> Value {
    json!({})
}

pub fn validate(request: &Value, settings: &Value) -> Outcome {
    policy()
        .validate(request, settings)
        .unwrap_or_else(|e| panic!("host error: {e:#}"))
}

/// The policy's answer to a JobSet's CREATE.
pub fn create(jobset: &Value, settings: &Value) -> Outcome {
    validate(
        &admission_request(Kind::JobSet, "CREATE", jobset, None),
        settings,
    )
}

/// The object after the host applied the outcome's patch.
pub fn patched(object: &Value, outcome: &Outcome) -> Value {
    match &outcome.patch {
        Some(p) => apply(object, p).expect("patch applies"),
        None => object.clone(),
    }
}

/// An admitted pod, with the outcome of its admission.
pub struct AdmittedPod {
    pub sim: SimPod,
    pub outcome: Outcome,
    pub pod: Value,
}

/// Admits a JobSet CREATE, then every pod the controllers make from the admitted JobSet.
pub fn run(jobset_request: &Value, settings: &Value) -> (Outcome, Value, Vec<AdmittedPod>) {
    let jobset = &jobset_request["object"];
    let outcome = validate(jobset_request, settings);
    assert!(outcome.accepted, "JobSet rejected: {:?}", outcome.message);
    let admitted = patched(jobset, &outcome);
    let pods = admit_pods(
        controller::jobset_pods(&admitted).expect("controller simulation"),
        settings,
    );
    (outcome, admitted, pods)
}

/// Admits a plain Job CREATE, then every pod the Job controller makes from the admitted Job.
pub fn run_job(job_request: &Value, settings: &Value) -> (Outcome, Value, Vec<AdmittedPod>) {
    let job = &job_request["object"];
    let outcome = validate(job_request, settings);
    assert!(outcome.accepted, "Job rejected: {:?}", outcome.message);
    let admitted = patched(job, &outcome);
    let pods = admit_pods(
        controller::indexed_job_pods(&admitted).expect("Job controller simulation"),
        settings,
    );
    (outcome, admitted, pods)
}

/// Admits each simulated pod's CREATE; every one must be accepted.
fn admit_pods(sims: Vec<SimPod>, settings: &Value) -> Vec<AdmittedPod> {
    sims.into_iter()
        .map(|sim| {
            let request = admission_request(Kind::Pod, "CREATE", &sim.object, None);
            let outcome = validate(&request, settings);
            assert!(
                outcome.accepted,
                "pod {} rejected: {:?}",
                sim.hostname, outcome.message
            );
            let pod = patched(&sim.object, &outcome);
            AdmittedPod { sim, outcome, pod }
        })
        .collect()
}

/// Warnings apart from the narrowing's (docs/contributing/spec.md §4.7), which come last: `(others, narrowing)`.
pub fn split_narrowing(warnings: &[String]) -> (Vec<String>, Vec<String>) {
    warnings
        .iter()
        .cloned()
        .partition(|w| !w.contains(multislice_gen::NARROWED))
}

/// The warnings a JobSet fixture states its CREATE gets, one `# Expected warning: ` line each.
pub fn fixture_warnings(name: &str) -> Vec<String> {
    std::fs::read_to_string(fixtures::test_data().join(format!("jobsets/{name}.yaml")))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("# Expected warning: "))
        .map(str::to_string)
        .collect()
}

pub fn fixture_request(name: &str, api: JobSetApi) -> Value {
    fixtures::load_json(&fixtures::jobset_request_path(name, api)).expect("fixture")
}
