//! The requests the benchmark sends: built from the test fixtures, so they are what an API
//! server sends.
use anyhow::Result;
use multislice_host::controller::{self, JobSetApi};
use multislice_host::fixtures;
use multislice_host::request::{admission_request, Kind};
use serde_json::{json, Value};

/// `{"request": …, "settings": {}}` bytes, as kwctl sends them.
pub fn payload(request: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"request": request, "settings": {}})).expect("serializable")
}

pub fn tpu_jobset() -> Result<Value> {
    Ok(fixtures::load_json(&fixtures::jobset_request_path(
        "tpu-4-slices",
        JobSetApi::V09,
    ))?["object"]
        .clone())
}

/// A valid JobSet of `n` TPU replicated jobs in the default slice group.
pub fn jobset_with_rjobs(n: usize) -> Result<Value> {
    let mut js = tpu_jobset()?;
    let rjob = js["spec"]["replicatedJobs"][0].clone();
    let rjobs: Vec<Value> = (0..n)
        .map(|i| {
            let mut r = rjob.clone();
            r["name"] = json!(format!("s{i}"));
            r["replicas"] = json!(1);
            r
        })
        .collect();
    js["spec"]["replicatedJobs"] = json!(rjobs);
    Ok(js)
}

/// xpk's v6e multislice JobSet as xpk writes it: its container's command is a launch script
/// of about 2 KB (xpk wraps the user's command in one that prints and exports its
/// environment), and it mounts a volume, as most training containers do.
pub fn xpk_jobset_with_script() -> Result<Value> {
    let mut js = fixtures::load_json(&fixtures::jobset_request_path(
        "xpk-v6e-multislice",
        JobSetApi::V09,
    ))?["object"]
        .clone();
    let line =
        "echo XPK Start: $(date); _sigterm() { kill -SIGTERM $PID; }; trap _sigterm SIGTERM; ";
    let script = format!(
        "{}python3 -m MaxText.train MaxText/configs/base.yml",
        line.repeat(24)
    );
    let container = &mut js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        ["containers"][0];
    container["command"] = json!(["bash", "-c", script]);
    container["volumeMounts"] = json!([{"name": "shared-data", "mountPath": "/dev/shm"}]);
    Ok(js)
}

/// A JobSet with `n` T2 violations (parallelism 2, completions 4).
pub fn jobset_with_violations(n: usize) -> Result<Value> {
    let mut js = jobset_with_rjobs(n)?;
    for r in js["spec"]["replicatedJobs"].as_array_mut().expect("list") {
        r["template"]["spec"]["completions"] = json!(4);
    }
    Ok(js)
}

/// A pod of the TPU JobSet (as the Job controller submits it) with `n` TPU containers.
pub fn tpu_pod_with_containers(n: usize) -> Result<Value> {
    let js = tpu_jobset()?;
    let mut pod = controller::jobset_pods(&js)?[0].object.clone();
    // The facts the JobSet admission would have stamped.
    pod["metadata"]["annotations"]["multislice.kubewarden.io/facts"] =
        json!(r#"{"slice":{"total":4,"offset":0},"coordinator":"slice-0-0","podsPerJob":2}"#);
    let container = pod["spec"]["containers"][0].clone();
    pod["spec"]["containers"] = json!((0..n)
        .map(|i| {
            let mut c = container.clone();
            c["name"] = json!(format!("c{i}"));
            c
        })
        .collect::<Vec<_>>());
    Ok(pod)
}

/// The TPU pod as a webhook sees it: after the API server's defaults and the ServiceAccount
/// plugin, which give each container a pull policy, a termination message path and policy,
/// and the mount of the service account token.
pub fn defaulted_tpu_pod() -> Result<Value> {
    let mut pod = tpu_pod_with_containers(1)?;
    let container = &mut pod["spec"]["containers"][0];
    container["imagePullPolicy"] = json!("IfNotPresent");
    container["terminationMessagePath"] = json!("/dev/termination-log");
    container["terminationMessagePolicy"] = json!("File");
    container["volumeMounts"] = json!([{
        "name": "kube-api-access-7xk2p",
        "readOnly": true,
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"
    }]);
    Ok(pod)
}

/// A Deployment's pod as most clusters admit by the thousand: the fast-path fixture with the
/// annotations tools commonly add, which the fast path must now look into for the facts.
pub fn annotated_plain_pod() -> Result<Value> {
    let mut request = fixtures::load_json(&fixtures::pod_request_path("not-a-jobset-pod"))?;
    request["object"]["metadata"]["annotations"] = json!({
        "kubectl.kubernetes.io/restartedAt": "2026-11-30T08:15:00Z",
        "kubectl.kubernetes.io/default-container": "nginx",
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9102",
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
    });
    Ok(request)
}

/// The first pod of a plain Job's fixture, as the Job controller submits it after the policy
/// (native, the same code) admitted the Job.
pub fn job_pod(name: &str) -> Result<Value> {
    let request = job_create(name)?;
    let verdict = jobset_multislice_policy::admission::evaluate(&payload(&request));
    let admitted = verdict
        .mutated_object
        .unwrap_or_else(|| request["object"].clone());
    Ok(controller::indexed_job_pods(&admitted)?[0].object.clone())
}

pub fn job_create(name: &str) -> Result<Value> {
    fixtures::load_json(&fixtures::job_request_path(name))
}

pub fn pod_request(pod: &Value) -> Value {
    admission_request(Kind::Pod, "CREATE", pod, None)
}

pub fn create(jobset: &Value) -> Value {
    admission_request(Kind::JobSet, "CREATE", jobset, None)
}

/// An UPDATE whose new object is the old one: nothing changed.
pub fn unchanged_update(jobset: &Value) -> Value {
    admission_request(Kind::JobSet, "UPDATE", jobset, Some(jobset))
}

/// A JobSet of about `bytes` bytes: a TPU JobSet whose container carries a large env.
pub fn jobset_of_size(bytes: usize) -> Result<Value> {
    let mut js = tpu_jobset()?;
    let chunk = "x".repeat(4096);
    let count = bytes / 4120;
    let env: Vec<Value> = (0..count)
        .map(|i| json!({"name": format!("BLOB_{i}"), "value": chunk}))
        .collect();
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
        ["env"] = json!(env);
    Ok(js)
}
