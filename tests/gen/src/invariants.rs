//! docs/contributing/spec.md §4 and §4.5 checked over one generated JobSet and every pod the controllers make from
//! it, for any way of admitting (native or through the wasm module).
use crate::oracle;
use multislice_host::controller::{self, as_served, JobSetApi};
use multislice_host::env::resolve;
use multislice_host::judges::{disallowed_ops, nothing_lost};
use multislice_host::request::{admission_request, Kind};
use multislice_host::runner::{apply, diff};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// What an admission returned: accepted, the mutated object, the response bytes.
pub struct Admitted {
    pub accepted: bool,
    pub message: Option<String>,
    pub mutated: Option<Value>,
    pub bytes: Vec<u8>,
}

/// Admits the CREATE of `object`, and checks that the response is deterministic, the patch
/// touches only what the policy may, loses nothing, and is not repeated on readmission.
pub fn admit_checked(
    admit: &dyn Fn(&Value, &Value) -> Admitted,
    kind: Kind,
    object: &Value,
    settings: &Value,
) -> Result<Value, String> {
    let request = admission_request(kind, "CREATE", object, None);
    let first = admit(&request, settings);
    if !first.accepted {
        return Err(format!("{kind:?} rejected: {:?}", first.message));
    }
    let again = admit(&request, settings);
    if again.bytes != first.bytes {
        return Err(format!("{kind:?}: the same request gave different bytes"));
    }
    let Some(mutated) = first.mutated else {
        return Ok(object.clone());
    };
    let patch = diff(object, &mutated);
    let name = match kind {
        Kind::JobSet => "JobSet",
        Kind::Job => "Job",
        Kind::Pod => "Pod",
    };
    let bad = disallowed_ops(object, &patch, name);
    if !bad.is_empty() {
        return Err(format!("{name} patch touches what it may not: {bad:?}"));
    }
    let after = apply(object, &patch).map_err(|e| e.to_string())?;
    let lost = nothing_lost(object, &after);
    if !lost.is_empty() {
        return Err(format!("{name} lost: {lost:?}"));
    }
    let readmitted = admit(&admission_request(kind, "CREATE", &after, None), settings);
    if readmitted.mutated.is_some() {
        return Err(format!("{name} admission is not idempotent"));
    }
    Ok(after)
}

/// Admits the JobSet and all its pods; checks every invariant, and every container's resolved
/// env against the oracle's, exactly: every variable of every family, and nothing else.
pub fn check(
    admit: &dyn Fn(&Value, &Value) -> Admitted,
    jobset: &Value,
    api: JobSetApi,
    settings: &Value,
) -> Result<(), String> {
    let served = as_served(jobset, api);
    let admitted = admit_checked(admit, Kind::JobSet, &served, settings)?;
    let name = controller::final_name(&served);
    let oracle_settings = oracle::Settings::from_json(settings);
    let resource = oracle_settings.tpu_resource.as_str();
    for pod in controller::jobset_pods(&admitted).map_err(|e| e.to_string())? {
        let final_pod = admit_checked(admit, Kind::Pod, &pod.object, settings)?;
        let want =
            oracle::expected_of(&served, &name, &pod.replicated_job, pod.job_index, resource);
        for map in ["labels", "annotations"] {
            let m = &final_pod["metadata"][map];
            let got = (
                m["jobset.sigs.k8s.io/group-name"].clone(),
                m["jobset.sigs.k8s.io/group-replicas"].clone(),
                m["jobset.sigs.k8s.io/job-group-index"].clone(),
            );
            let expected = (
                json!(want.group),
                json!(want.group_replicas.to_string()),
                json!(want.job_group_index.to_string()),
            );
            if got != expected {
                return Err(format!(
                    "{} {map}: group keys {got:?}, expected {expected:?}",
                    pod.hostname
                ));
            }
        }
        let at = oracle::PodAt {
            rjob: &pod.replicated_job,
            job_index: pod.job_index,
            completion_index: pod.completion_index,
        };
        let policy_env = oracle::policy_env(&served, &name, &oracle_settings, at);
        pod_env_is_exactly(&final_pod, &pod.object, &policy_env)
            .map_err(|e| format!("{}: {e}", pod.hostname))?;
    }
    Ok(())
}

/// Every container of `final_pod` (admitted from `original`, as the Job controller made it)
/// resolves to exactly the oracle's `policy_env` followed by the container's own entries, and
/// holds each injected variable once, before its own entries, which are all kept unchanged.
pub fn pod_env_is_exactly(
    final_pod: &Value,
    original: &Value,
    policy_env: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<(), String> {
    for list in ["initContainers", "containers"] {
        let containers = final_pod["spec"][list]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let originals = original["spec"][list]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if containers.len() != originals.len() {
            return Err(format!("{list} changed in number"));
        }
        for (c, original) in containers.iter().zip(&originals) {
            let injected = &policy_env[c["name"].as_str().unwrap_or("")];
            let user_entries = oracle::own_entries(original);
            // The env as docs/contributing/spec.md §4 has it: the policy's variables, then the user's own entries.
            let mut entries: Vec<Value> = injected
                .iter()
                .map(|(var, value)| json!({"name": var, "value": value}))
                .collect();
            entries.extend(user_entries.iter().cloned());
            let expected: BTreeMap<String, String> = resolve(final_pod, &json!({"env": entries}))
                .map_err(|e| e.to_string())?
                .into_iter()
                .collect();
            let got: BTreeMap<String, String> = resolve(final_pod, c)
                .map_err(|e| e.to_string())?
                .into_iter()
                .collect();
            if got != expected {
                return Err(format!(
                    "{}: resolved env {got:?}, expected {expected:?}",
                    c["name"]
                ));
            }
            // Each injected variable once, and the user's entries all still there, after
            // the injected ones.
            let entries = c["env"].as_array().cloned().unwrap_or_default();
            if entries.len() != injected.len() + user_entries.len()
                || entries[injected.len()..] != user_entries[..]
            {
                return Err(format!(
                    "{}: env entries {entries:?}, expected {} injected, then the user's {user_entries:?}",
                    c["name"],
                    injected.len()
                ));
            }
        }
    }
    Ok(())
}
