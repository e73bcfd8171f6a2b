//! JobSet CREATE: a warning wherever a pod template's own env contradicts what its pods will
//! get (SPEC §4.2). That response is the one `kubectl apply` prints; a pod's warnings go to
//! the Job controller. A template's value is predicted from what it shows: literals (with
//! `$(VAR)` expanded as the kubelet will) and `fieldRef`s to the controllers' labels and
//! annotations. Each is compared on a few pods of each replicated job: the first two and the
//! last job indexes and completion indexes, where every hand-written pattern that goes wrong
//! (a count that includes a CPU job, an index that ignores earlier replicated jobs, a literal
//! where each job differs) already differs.
use super::place::PodPlace;
use super::{container_object, wanted_env, PodEnv};
use crate::error::{checked_add, InputError};
use crate::facts::Facts;
use crate::groups;
use crate::jobset::{JobSetView, ReplicatedJob};
use crate::json;
use crate::keys;
use crate::mutate::env::WantedVar;
use crate::mutate::resolve::{self, metadata_key};
use crate::settings::Settings;
use serde_json::Value;

/// Every variable the policy may inject: a template that sets none of them is skipped.
const ALL_VARS: [&str; 12] = [
    keys::ENV_NUM_SLICES,
    keys::ENV_SLICE_ID,
    keys::ENV_COORDINATOR,
    keys::ENV_MEGASCALE_PORT,
    keys::ENV_TPU_WORKER_ID,
    keys::ENV_TPU_WORKER_HOSTNAMES,
    keys::ENV_TPU_PROCESS_PORT,
    keys::ENV_TPU_PROCESS_ADDRESSES,
    keys::ENV_TPU_NAME,
    keys::ENV_JAX_COORDINATOR,
    keys::ENV_JAX_NUM_PROCESSES,
    keys::ENV_JAX_PROCESS_ID,
];

/// Variables whose value holds the JobSet's name, unknown at admission under `generateName`.
const NAMED_VARS: [&str; 5] = [
    keys::ENV_COORDINATOR,
    keys::ENV_TPU_WORKER_HOSTNAMES,
    keys::ENV_TPU_PROCESS_ADDRESSES,
    keys::ENV_TPU_NAME,
    keys::ENV_JAX_COORDINATOR,
];

/// A replicated job's group as its pods' group keys will say: name, replicas, offset.
struct GroupKeys<'a> {
    name: &'a str,
    replicas: u32,
    offset: u32,
}

/// The warnings for a JobSet about to be admitted with `facts`.
pub fn warnings(
    object: &Value,
    view: &JobSetView,
    facts: &[Facts],
    settings: &Settings,
) -> Result<Vec<String>, InputError> {
    let mut out = Vec::new();
    let sets_any = |r: &ReplicatedJob| -> Result<bool, InputError> {
        let spec = pod_spec(object, r)?;
        for c in &r.containers {
            let c_path = container_path(r, c.list, c.index);
            let entries =
                resolve::user_entries(container_object(spec, &r.pod_spec_path, c)?, &c_path)?;
            if entries.iter().any(|e| ALL_VARS.contains(&e.name)) {
                return Ok(true);
            }
        }
        Ok(false)
    };
    let mut group_keys = Vec::with_capacity(view.replicated_jobs.len());
    let mut global_replicas = 0u32;
    for r in &view.replicated_jobs {
        global_replicas = checked_add(
            global_replicas,
            r.replicas,
            &json::join(&r.path, "replicas"),
        )?;
        group_keys.push(None);
    }
    for (name, members) in groups::groups(view) {
        let mut offset = 0u32;
        let mut replicas = 0u32;
        for &m in &members {
            replicas = checked_add(
                replicas,
                view.replicated_jobs[m].replicas,
                "spec.replicatedJobs",
            )?;
        }
        for &m in &members {
            group_keys[m] = Some(GroupKeys {
                name,
                replicas,
                offset,
            });
            offset = checked_add(
                offset,
                view.replicated_jobs[m].replicas,
                "spec.replicatedJobs",
            )?;
        }
    }
    let mut global_offset = 0u32;
    for ((r, f), group) in view.replicated_jobs.iter().zip(facts).zip(&group_keys) {
        let start = global_offset;
        global_offset = checked_add(global_offset, r.replicas, &json::join(&r.path, "replicas"))?;
        let Some(group) = group else { continue };
        if (f.slice.is_none() && f.jax.is_none()) || !sets_any(r)? {
            continue;
        }
        let spec = pod_spec(object, r)?;
        let mut seen: Vec<(usize, &str)> = Vec::new();
        for j in samples(r.replicas) {
            for c in samples(r.parallelism) {
                let place = PodPlace {
                    jobset: view.name,
                    replicated_job: r.name,
                    replicated_job_replicas: r.replicas,
                    job_index: j,
                    job_global_index: checked_add(start, j, &r.path)?,
                    global_replicas,
                    completion_index: Some(c),
                    subdomain: view.subdomain.unwrap_or(view.name),
                };
                let lookup = |path: &str| predicted(view, group, &place, path);
                let pod = PodEnv {
                    spec,
                    spec_path: &r.pod_spec_path,
                    containers: &r.containers,
                    facts: f,
                    place: &place,
                    annotations: None,
                };
                let wanted = wanted_env(&pod, settings, &lookup, &mut Vec::new())?;
                for (ci, (container, vars)) in r.containers.iter().zip(&wanted).enumerate() {
                    if vars.is_empty() {
                        continue;
                    }
                    let c_path = container_path(r, container.list, container.index);
                    let obj = container_object(spec, &r.pod_spec_path, container)?;
                    let entries = resolve::user_entries(obj, &c_path)?;
                    let injected: Vec<WantedVar> = vars
                        .iter()
                        .filter(|v| !entries.iter().any(|e| e.name == v.name))
                        .cloned()
                        .collect();
                    let resolved = resolve::resolve_all(&entries, &injected, &lookup);
                    for var in vars {
                        if view.name.is_empty() && NAMED_VARS.contains(&var.name) {
                            continue;
                        }
                        let Some(e) = entries.iter().rposition(|e| e.name == var.name) else {
                            continue;
                        };
                        let Some(value) = &resolved[e] else { continue };
                        if *value == var.value || seen.contains(&(ci, var.name)) {
                            continue;
                        }
                        seen.push((ci, var.name));
                        let host = format!("{}-{j}-{c}", r.name);
                        let pod_name = if view.name.is_empty() {
                            host
                        } else {
                            format!("{}-{host}", view.name)
                        };
                        out.push(format!(
                            "{}: {} resolves to {value:?} for pod {pod_name} but the policy computed {:?}; the container's value is kept",
                            json::index(&json::join(&c_path, "env"), e),
                            var.name,
                            var.value
                        ));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The first two and the last of `0..count`.
fn samples(count: u32) -> Vec<u32> {
    let mut out: Vec<u32> = [0, 1, count.saturating_sub(1)]
        .into_iter()
        .filter(|&i| i < count)
        .collect();
    out.dedup();
    out
}

fn container_path(r: &ReplicatedJob, list: &str, index: usize) -> String {
    json::index(&json::join(&r.pod_spec_path, list), index)
}

/// The replicated job's pod spec; the view has checked that it is an object.
fn pod_spec<'a>(object: &'a Value, r: &ReplicatedJob) -> Result<&'a json::Object, InputError> {
    let index = r
        .path
        .strip_prefix("spec.replicatedJobs[")
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or("");
    object
        .pointer(&format!(
            "/spec/replicatedJobs/{index}/template/spec/template/spec"
        ))
        .and_then(Value::as_object)
        .ok_or_else(|| InputError::Missing {
            path: r.pod_spec_path.clone(),
        })
}

/// What a controller label or annotation will hold on the pod at `place`; `None` for what no
/// admission can predict (a Job's key, a restart count, a generated name) and for anything
/// that is not the controllers'.
fn predicted(view: &JobSetView, group: &GroupKeys, place: &PodPlace, path: &str) -> Option<String> {
    let (map, key) = metadata_key(path)?;
    let named = |v: String| (!view.name.is_empty()).then_some(v);
    let value = match key {
        keys::JOBSET_NAME => return named(view.name.to_string()),
        keys::REPLICATED_JOB_NAME => place.replicated_job.to_string(),
        keys::REPLICATED_JOB_REPLICAS => place.replicated_job_replicas.to_string(),
        keys::JOB_INDEX => place.job_index.to_string(),
        keys::JOB_GLOBAL_INDEX => place.job_global_index.to_string(),
        keys::GLOBAL_REPLICAS => place.global_replicas.to_string(),
        keys::GROUP_NAME => group.name.to_string(),
        keys::GROUP_REPLICAS => group.replicas.to_string(),
        keys::JOB_GROUP_INDEX => group.offset.checked_add(place.job_index)?.to_string(),
        keys::COMPLETION_INDEX => place.completion_index?.to_string(),
        keys::JOBSET_COORDINATOR if map == "annotations" => {
            let c = view.coordinator.as_ref()?;
            let host = format!("{}-{}-{}", c.replicated_job, c.job_index, c.pod_index);
            return named(place.address(&host));
        }
        _ => return None,
    };
    Some(value)
}
