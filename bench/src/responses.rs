//! Every bench payload and rule fixture, and what a host makes of a module's response to it:
//! the verdict, and the JSON patch policy-evaluator diffs from the mutated object. A change
//! made for speed must leave all of it as the commit before left it (issue 30), so the
//! commit before records it (`make responses FROM=old.wasm`) and a test compares.
use crate::workloads::*;
use anyhow::{Context, Result};
use multislice_host::{fixtures, workspace_root, Policy};
use serde_json::{json, Value};
use std::path::PathBuf;

/// One request with its settings.
pub struct Case {
    pub name: String,
    pub request: Value,
    pub settings: Value,
}

/// Where the recorded responses are: one file per case.
pub fn recorded_dir() -> PathBuf {
    workspace_root().join("test_data/responses")
}

/// The bench's payloads (the requests `make bench` times, its largest limits aside), every
/// request fixture under settings `{}`, and every e2e case that runs without a session under
/// its own settings.
pub fn cases() -> Result<Vec<Case>> {
    let js = tpu_jobset()?;
    let empty = || json!({});
    let mut out: Vec<Case> = [
        (
            "bench-job-pod-opted-in",
            pod_request(&job_pod("jax-gpu-4")?),
        ),
        (
            "bench-job-pod-not-opted-in",
            pod_request(&job_pod("not-opted-in")?),
        ),
        ("bench-annotated-plain-pod", annotated_plain_pod()?),
        ("bench-jobset-update-unchanged", unchanged_update(&js)),
        ("bench-jobset-create-64", create(&jobset_with_rjobs(64)?)),
        (
            "bench-jobset-violations-10",
            create(&jobset_with_violations(10)?),
        ),
        ("bench-tpu-pod-1", pod_request(&tpu_pod_with_containers(1)?)),
        (
            "bench-tpu-pod-10",
            pod_request(&tpu_pod_with_containers(10)?),
        ),
        (
            "bench-tpu-pod-50",
            pod_request(&tpu_pod_with_containers(50)?),
        ),
    ]
    .into_iter()
    .map(|(name, request)| Case {
        name: name.into(),
        request,
        settings: empty(),
    })
    .collect();
    let mut requests: Vec<PathBuf> = std::fs::read_dir(fixtures::test_data().join("requests"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    requests.sort();
    for path in requests {
        let stem = path.file_stem().context("a file name")?.to_string_lossy();
        out.push(Case {
            name: format!("request-{stem}"),
            request: fixtures::load_json(&path)?,
            settings: empty(),
        });
    }
    let e2e = fixtures::load_json(&workspace_root().join("test_data/e2e/cases.json"))?;
    for case in e2e.as_array().context("cases.json is a list")? {
        if case.get("session").is_some() || case.get("settingsError").is_some() {
            continue;
        }
        let name = case["name"].as_str().context("a case name")?;
        let request = case["request"].as_str().context("a request path")?;
        out.push(Case {
            name: format!("e2e-{name}"),
            request: fixtures::load_json(&workspace_root().join(request))?,
            settings: case["settings"].clone(),
        });
    }
    Ok(out)
}

/// What a host reads from the module's response to `case`: the verdict, and the patch from
/// the request's object to the mutated object.
pub fn response(policy: &Policy, case: &Case) -> Result<Value> {
    let outcome = policy
        .validate(&case.request, &case.settings)
        .with_context(|| format!("{}: the module failed", case.name))?;
    Ok(json!({
        "accepted": outcome.accepted,
        "code": outcome.code,
        "message": outcome.message,
        "warnings": outcome.warnings,
        "patch": outcome.patch.as_ref().map(|_| outcome.patch_json()),
    }))
}
