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
