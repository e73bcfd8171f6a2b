//! Test fixtures: readable YAML sources under `test_data/`, and the AdmissionRequests the API
//! server would send for them under `test_data/requests/` (written by `make fixtures`, and
//! checked against the YAML by a test so the two never drift).
use crate::controller::{as_served, JobSetApi};
use crate::preview::yaml_documents;
use crate::request::{admission_request, Kind};
use crate::workspace_root;
use anyhow::{Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub fn test_data() -> PathBuf {
    workspace_root().join("test_data")
}

/// The single document of a YAML file.
pub fn load_yaml(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    yaml_documents(&text)?
        .into_iter()
        .next()
        .with_context(|| format!("{} is empty", path.display()))
}

fn stems(dir: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = std::fs::read_dir(test_data().join(dir))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    out.sort();
    Ok(out)
}

/// Names of the JobSet fixtures (`test_data/jobsets/<name>.yaml`).
pub fn jobset_names() -> Result<Vec<String>> {
    stems("jobsets")
}

pub fn jobset_yaml(name: &str) -> Result<Value> {
    load_yaml(&test_data().join("jobsets").join(format!("{name}.yaml")))
}

fn api_suffix(api: JobSetApi) -> &'static str {
    match api {
        JobSetApi::V08 => "v08",
        JobSetApi::V09 => "v09",
    }
}

pub fn jobset_request_path(name: &str, api: JobSetApi) -> PathBuf {
    test_data()
        .join("requests")
        .join(format!("jobset-{name}.{}.json", api_suffix(api)))
}

/// The request of the queue check's JobSet (`test_data/queue/jobset.yaml`), which its
/// sessions answer.
pub fn queue_request_path() -> PathBuf {
    test_data().join("requests").join("jobset-queue.json")
}

pub fn rule_request_path(name: &str) -> PathBuf {
    test_data()
        .join("requests")
        .join(format!("jobset-rule-{name}.json"))
}

/// Names of the plain Job fixtures (`test_data/jobs/<name>.yaml`).
pub fn job_names() -> Result<Vec<String>> {
    stems("jobs")
}

pub fn job_yaml(name: &str) -> Result<Value> {
    load_yaml(&test_data().join("jobs").join(format!("{name}.yaml")))
}

pub fn job_request_path(name: &str) -> PathBuf {
    test_data()
        .join("requests")
        .join(format!("job-{name}.json"))
}

pub fn pod_request_path(name: &str) -> PathBuf {
    test_data()
        .join("requests")
        .join(format!("pod-{name}.json"))
}

/// The CREATE that `e2e.bats` sends for `examples/<stem>.yaml`: its JobSet, as a v0.9 CRD
/// serves it, or its plain Job.
pub fn example_request_path(stem: &str) -> PathBuf {
    test_data()
        .join("e2e")
        .join("examples")
        .join(format!("{stem}.json"))
}

/// The example JobSets (`examples/*.yaml` of kind JobSet), by file stem.
pub fn example_jobsets() -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(workspace_root().join("examples"))? {
        let path = entry?.path();
        if !path.is_file() {
            // The policies' kustomizations (examples/single/, …) hold no workload.
            continue;
        }
        let doc = load_yaml(&path)?;
        if doc["kind"] == "JobSet" {
            if let Some(stem) = path.file_stem() {
                out.push((stem.to_string_lossy().into_owned(), doc));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The example plain Jobs (`examples/*.yaml` with a `batch/v1` Job among its documents, such
/// as a Job and its headless Service), by file stem: the first Job of each file.
pub fn example_jobs() -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(workspace_root().join("examples"))? {
        let path = entry?.path();
        if !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let job = yaml_documents(&text)?
            .into_iter()
            .find(|d| d["apiVersion"] == "batch/v1" && d["kind"] == "Job");
        if let (Some(job), Some(stem)) = (job, path.file_stem()) {
            out.push((stem.to_string_lossy().into_owned(), job));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Reads a committed request fixture.
pub fn load_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {}; run `make fixtures`", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// Every request fixture, as (path, pretty JSON), generated from the YAML sources.
pub fn generate_all() -> Result<Vec<(PathBuf, String)>> {
    let mut out = Vec::new();
    for name in jobset_names()? {
        let jobset = jobset_yaml(&name)?;
        for api in [JobSetApi::V08, JobSetApi::V09] {
            let request = admission_request(Kind::JobSet, "CREATE", &as_served(&jobset, api), None);
            out.push((jobset_request_path(&name, api), pretty(&request)?));
        }
    }
    // Rule fixtures are sent as written: their groupName fields say which CRD they target.
    for name in stems("rules")?.into_iter().filter(|n| n != "expected") {
        let jobset = load_yaml(&test_data().join("rules").join(format!("{name}.yaml")))?;
        let request = admission_request(Kind::JobSet, "CREATE", &jobset, None);
        out.push((rule_request_path(&name), pretty(&request)?));
    }
    // Sent as Kueue stores it: the validating role's view, so not as served by a CRD version.
    for (source, path) in [
        ("jobset.yaml", queue_request_path()),
        (
            "jobset-tas.yaml",
            test_data().join("requests").join("jobset-queue-tas.json"),
        ),
    ] {
        let queued = load_yaml(&test_data().join("queue").join(source))?;
        let request = admission_request(Kind::JobSet, "CREATE", &queued, None);
        out.push((path, pretty(&request)?));
    }
    for name in job_names()? {
        let request = admission_request(Kind::Job, "CREATE", &job_yaml(&name)?, None);
        out.push((job_request_path(&name), pretty(&request)?));
    }
    for name in stems("pods")? {
        let pod = load_yaml(&test_data().join("pods").join(format!("{name}.yaml")))?;
        let request = admission_request(Kind::Pod, "CREATE", &pod, None);
        out.push((pod_request_path(&name), pretty(&request)?));
    }
    for (stem, jobset) in example_jobsets()? {
        let request = admission_request(
            Kind::JobSet,
            "CREATE",
            &as_served(&jobset, JobSetApi::V09),
            None,
        );
        out.push((example_request_path(&stem), pretty(&request)?));
    }
    for (stem, job) in example_jobs()? {
        let request = admission_request(Kind::Job, "CREATE", &job, None);
        out.push((example_request_path(&stem), pretty(&request)?));
    }
    Ok(out)
}

fn pretty(v: &Value) -> Result<String> {
    Ok(serde_json::to_string_pretty(v)? + "\n")
}
