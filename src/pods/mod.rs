//! Pod CREATE: the per-pod values of SPEC §4, from the labels the JobSet and Job controllers
//! put on the pod and the facts the policy stamped at JobSet admission.
use crate::error::{checked_add, checked_mul, InputError};
use crate::facts::Facts;
use crate::json::{self, map_str, Lazy, Object};
use crate::keys;
use crate::mutate::env::{plan_env, prepend_env, WantedVar};
use crate::mutate::object_entry;
use crate::podspec::{self, ContainerView};
use crate::settings::{JaxEnv, Settings};
use serde_json::Value;

/// The outcome of admitting a JobSet pod.
#[derive(Debug, Default, PartialEq)]
pub struct PodOutcome {
    pub mutated: Option<Value>,
    pub warnings: Vec<String>,
}

/// What the controllers told the pod about its place in the JobSet.
struct PodPlace<'a> {
    jobset: &'a str,
    replicated_job: &'a str,
    replicated_job_replicas: u32,
    job_index: u32,
    job_global_index: u32,
    global_replicas: u32,
    completion_index: Option<u32>,
    subdomain: &'a str,
}

impl PodPlace<'_> {
    /// `<jobset>-<host>.<subdomain>`, where `host` is `<rjob>-<jobIndex>-<podIndex>`.
    fn address(&self, host: &str) -> String {
        format!("{}-{host}.{}", self.jobset, self.subdomain)
    }

    /// The address of pod `i` of this pod's own Job.
    fn host_address(&self, i: u32) -> String {
        self.address(&format!("{}-{}-{i}", self.replicated_job, self.job_index))
    }
}

/// Labels first: the controllers write both, and a label is what selectors see. Returns
/// which map the value came from, for messages.
fn controller_entry<'a>(
    labels: Option<&'a Object>,
    annotations: Option<&'a Object>,
    key: &str,
) -> Option<(&'static str, &'a str)> {
    map_str(labels, key)
        .map(|v| ("labels", v))
        .or_else(|| map_str(annotations, key).map(|v| ("annotations", v)))
}

fn controller_value<'a>(
    labels: Option<&'a Object>,
    annotations: Option<&'a Object>,
    key: &str,
) -> Option<&'a str> {
    controller_entry(labels, annotations, key).map(|(_, v)| v)
}

fn controller_count(
    labels: Option<&Object>,
    annotations: Option<&Object>,
    key: &str,
) -> Result<Option<u32>, InputError> {
    controller_entry(labels, annotations, key)
        .map(|(map, v)| json::parse_count(v, Lazy(move || format!("metadata.{map}[{key:?}]"))))
        .transpose()
}

/// Admits a JobSet pod, editing it in place when something is missing.
pub fn admit(mut object: Value, settings: &Settings) -> Result<PodOutcome, InputError> {
    let plan = plan(&object, settings)?;
    if plan.metadata_adds.is_empty() && plan.env_changes.is_empty() {
        return Ok(PodOutcome {
            mutated: None,
            warnings: plan.warnings,
        });
    }
    apply(&mut object, plan.metadata_adds, plan.env_changes);
    Ok(PodOutcome {
        mutated: Some(object),
        warnings: plan.warnings,
    })
}

/// What pod admission adds: (map, key, value) metadata entries, and per container
/// (list, index, env entries to put first).
struct PodPlan {
    metadata_adds: Vec<(&'static str, &'static str, String)>,
    env_changes: Vec<(&'static str, usize, Vec<Value>)>,
    warnings: Vec<String>,
}

fn apply(
    object: &mut Value,
    metadata_adds: Vec<(&'static str, &'static str, String)>,
    env_changes: Vec<(&'static str, usize, Vec<Value>)>,
) {
    let Some(root) = object.as_object_mut() else {
        return;
    };
    let metadata = object_entry(root, "metadata");
    for (map, key, value) in metadata_adds {
        object_entry(metadata, map).insert(key.to_string(), Value::String(value));
    }
    let spec = object_entry(root, "spec");
    for (list, index, entries) in env_changes {
        let container = spec
            .get_mut(list)
            .and_then(|l| l.get_mut(index))
            .and_then(Value::as_object_mut);
        if let Some(container) = container {
            prepend_env(container, entries);
        }
    }
}

fn plan(object: &Value, settings: &Settings) -> Result<PodPlan, InputError> {
    let root = json::as_object(object, "object")?;
    let metadata = json::opt_object(root, "metadata", "")?;
    let (labels, annotations) = match metadata {
        Some(m) => (
            json::opt_string_map(m, "labels", "metadata")?,
            json::opt_string_map(m, "annotations", "metadata")?,
        ),
        None => (None, None),
    };
    let spec = json::opt_object(root, "spec", "")?.ok_or(InputError::Missing {
        path: "spec".into(),
    })?;
    let facts = match map_str(annotations, keys::FACTS) {
        Some(text) => Facts::from_annotation(text, "metadata.annotations")?,
        None => Facts::default(),
    };
    let count = |key| controller_count(labels, annotations, key);
    let jobset = controller_value(labels, annotations, keys::JOBSET_NAME).unwrap_or("");
    let replicated_job = controller_value(labels, annotations, keys::REPLICATED_JOB_NAME);
    let (Some(replicated_job), Some(job_index)) = (replicated_job, count(keys::JOB_INDEX)?) else {
        return Ok(PodPlan {
            metadata_adds: Vec::new(),
            env_changes: Vec::new(),
            warnings: vec![format!(
                "pod of JobSet {jobset:?} has no {} or {} label, so it was not made by the JobSet controller; left unchanged",
                keys::REPLICATED_JOB_NAME,
                keys::JOB_INDEX
            )],
        });
    };
    let pod_subdomain = json::opt_str(spec, "subdomain", "spec")?;
    let place = PodPlace {
        jobset,
        replicated_job,
        replicated_job_replicas: count(keys::REPLICATED_JOB_REPLICAS)?.unwrap_or(1),
        job_index,
        job_global_index: count(keys::JOB_GLOBAL_INDEX)?.unwrap_or(job_index),
        global_replicas: count(keys::GLOBAL_REPLICAS)?.unwrap_or(1),
        completion_index: count(keys::COMPLETION_INDEX)?,
        subdomain: facts
            .subdomain
            .as_deref()
            .or(pod_subdomain.filter(|s| !s.is_empty()))
            .unwrap_or(jobset),
    };
    let containers =
        podspec::require_valid_chips(podspec::containers(spec, "spec", &settings.tpu_resource)?)?;
    let mut warnings = Vec::new();

    let metadata_adds = group_metadata(labels, annotations, &facts, &place, &mut warnings)?;
    let env = container_env(
        &containers,
        &facts,
        &place,
        settings,
        annotations,
        &mut warnings,
    )?;

    // Compute first; build a mutated object only when something is missing.
    let mut env_changes = Vec::new();
    for (c, wanted) in containers.iter().zip(env) {
        if wanted.is_empty() {
            continue;
        }
        let c_path = json::index(&json::join("spec", c.list), c.index);
        let container = container_object(spec, c)?;
        let label = format!("container {:?} ({c_path})", c.name);
        let plan = plan_env(container, &c_path, &label, &wanted)?;
        warnings.extend(plan.warnings);
        if !plan.prepend.is_empty() {
            env_changes.push((c.list, c.index, plan.prepend));
        }
    }
    Ok(PodPlan {
        metadata_adds,
        env_changes,
        warnings,
    })
}

fn container_object<'a>(spec: &'a Object, c: &ContainerView) -> Result<&'a Object, InputError> {
    let path = json::index(&json::join("spec", c.list), c.index);
    let item = spec
        .get(c.list)
        .and_then(|l| l.get(c.index))
        .ok_or(InputError::Missing { path: path.clone() })?;
    json::as_object(item, &path)
}

/// The group labels and annotations the pod lacks (SPEC §4.1). Values the controller set
/// (JobSet v0.9+) are never touched.
fn group_metadata(
    labels: Option<&Object>,
    annotations: Option<&Object>,
    facts: &Facts,
    place: &PodPlace,
    warnings: &mut Vec<String>,
) -> Result<Vec<(&'static str, &'static str, String)>, InputError> {
    let maps = [("labels", labels), ("annotations", annotations)];
    let complete = |m: Option<&Object>| keys::GROUP_KEYS.iter().all(|k| map_str(m, k).is_some());
    if maps.iter().all(|(_, m)| complete(*m)) {
        return Ok(Vec::new());
    }
    let existing = |k| controller_value(labels, annotations, k);
    let values: [String; 3] = if let Some(g) = &facts.group {
        [
            g.name.clone(),
            g.replicas.to_string(),
            checked_add(g.offset, place.job_index, "metadata.labels")?.to_string(),
        ]
    } else if let (Some(name), Some(replicas), Some(index)) = (
        existing(keys::GROUP_NAME),
        existing(keys::GROUP_REPLICAS),
        existing(keys::JOB_GROUP_INDEX),
    ) {
        // A v0.9+ controller wrote one of the twins; copy it to the other.
        [name.to_string(), replicas.to_string(), index.to_string()]
    } else {
        warnings.push(format!(
            "pod of JobSet {:?}: its JobSet was admitted before this policy, so the pod was put in group \"default\" with group-replicas = global-replicas ({}) and job-group-index = job-global-index ({})",
            place.jobset, place.global_replicas, place.job_global_index
        ));
        [
            keys::DEFAULT_GROUP.to_string(),
            place.global_replicas.to_string(),
            place.job_global_index.to_string(),
        ]
    };
    let mut adds = Vec::new();
    for (map_name, map) in maps {
        for (key, value) in keys::GROUP_KEYS.iter().zip(&values) {
            if map_str(map, key).is_none() {
                adds.push((map_name, *key, value.clone()));
            }
        }
    }
    Ok(adds)
}

/// The variables each container should have, in container order.
fn container_env(
    containers: &[ContainerView],
    facts: &Facts,
    place: &PodPlace,
    settings: &Settings,
    annotations: Option<&Object>,
    warnings: &mut Vec<String>,
) -> Result<Vec<Vec<WantedVar>>, InputError> {
    let mut out: Vec<Vec<WantedVar>> = vec![Vec::new(); containers.len()];
    let has_tpu = containers.iter().any(ContainerView::is_tpu);

    if has_tpu && settings.multislice_env {
        let vars = multislice_vars(facts, place, annotations, warnings)?;
        for (c, wanted) in containers.iter().zip(out.iter_mut()) {
            if c.is_tpu() {
                wanted.extend(vars.iter().cloned());
            }
        }
    }
    if has_tpu && settings.tpu_worker_env {
        tpu_worker_vars(containers, facts, place, &mut out, warnings)?;
    }
    if settings.jax_env != JaxEnv::Never {
        if let Some(vars) = jax_vars(facts, place, settings, warnings)? {
            for wanted in out.iter_mut() {
                wanted.extend(vars.iter().cloned());
            }
        }
    }
    Ok(out)
}

fn var(name: &'static str, value: impl ToString) -> WantedVar {
    WantedVar {
        name,
        value: value.to_string(),
    }
}

fn multislice_vars(
    facts: &Facts,
    place: &PodPlace,
    annotations: Option<&Object>,
    warnings: &mut Vec<String>,
) -> Result<Vec<WantedVar>, InputError> {
    let (num_slices, slice_id, coordinator) = match (&facts.slice, &facts.coordinator) {
        (Some(slice), Some(coordinator)) => (
            slice.total,
            checked_add(slice.offset, place.job_index, "metadata.labels")?,
            place.address(coordinator),
        ),
        _ => {
            // No facts: the JobSet was admitted before the policy. The pod's own labels only
            // tell about its replicated job, so that is taken as the whole slice group.
            let coordinator = map_str(annotations, keys::JOBSET_COORDINATOR)
                .map(str::to_string)
                .unwrap_or_else(|| place.address(&format!("{}-0-0", place.replicated_job)));
            warnings.push(format!(
                "pod of JobSet {:?}: its JobSet was admitted before this policy, so replicated job {:?} was taken as its whole slice group ({} slices, coordinator {coordinator})",
                place.jobset, place.replicated_job, place.replicated_job_replicas
            ));
            (place.replicated_job_replicas, place.job_index, coordinator)
        }
    };
    Ok(vec![
        var(keys::ENV_NUM_SLICES, num_slices),
        var(keys::ENV_SLICE_ID, slice_id),
        var(keys::ENV_COORDINATOR, coordinator),
    ])
}

/// TPU host env (SPEC §4.3). A pod with n TPU containers follows LeaderWorkerSet: container k
/// is worker `completionIndex*n + k`, and each hostname is listed n times.
fn tpu_worker_vars(
    containers: &[ContainerView],
    facts: &Facts,
    place: &PodPlace,
    out: &mut [Vec<WantedVar>],
    warnings: &mut Vec<String>,
) -> Result<(), InputError> {
    let (Some(completion_index), Some(hosts)) = (place.completion_index, facts.pods_per_job) else {
        warnings.push(format!(
            "pod of JobSet {:?}: no completion index or no facts from JobSet admission, so TPU_WORKER_ID and TPU_WORKER_HOSTNAMES were not set",
            place.jobset
        ));
        return Ok(());
    };
    let workers: Vec<usize> = containers
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_tpu() && c.list == "containers")
        .map(|(i, _)| i)
        .collect();
    let n = u32::try_from(workers.len()).map_err(|_| InputError::Overflow {
        path: "spec.containers".into(),
        limit: u32::MAX,
    })?;
    let mut hostnames = Vec::new();
    for i in 0..hosts {
        let host = place.host_address(i);
        for _ in 0..n {
            hostnames.push(host.clone());
        }
    }
    let hostnames = hostnames.join(",");
    let base = checked_mul(completion_index, n, "metadata.annotations")?;
    for (k, &i) in (0u32..).zip(&workers) {
        let id = checked_add(base, k, "metadata.annotations")?;
        out[i].push(var(keys::ENV_TPU_WORKER_ID, id));
        out[i].push(var(keys::ENV_TPU_WORKER_HOSTNAMES, &hostnames));
    }
    Ok(())
}

/// JAX distributed env (SPEC §4.4), for every container of a pod in the JAX group.
fn jax_vars(
    facts: &Facts,
    place: &PodPlace,
    settings: &Settings,
    warnings: &mut Vec<String>,
) -> Result<Option<Vec<WantedVar>>, InputError> {
    let (Some(jax), Some(coordinator), Some(per_job)) =
        (&facts.jax, &facts.coordinator, facts.pods_per_job)
    else {
        return Ok(None);
    };
    let Some(completion_index) = place.completion_index else {
        warnings.push(format!(
            "pod of JobSet {:?}: no {} on the pod, so JAX_PROCESS_ID could not be computed and the JAX env was not set",
            place.jobset,
            keys::COMPLETION_INDEX
        ));
        return Ok(None);
    };
    let path = "metadata.annotations";
    let process_id = checked_add(
        checked_add(
            jax.offset,
            checked_mul(place.job_index, per_job, path)?,
            path,
        )?,
        completion_index,
        path,
    )?;
    Ok(Some(vec![
        var(
            keys::ENV_JAX_COORDINATOR,
            format!(
                "{}:{}",
                place.address(coordinator),
                settings.jax_coordinator_port
            ),
        ),
        var(keys::ENV_JAX_NUM_PROCESSES, jax.total),
        var(keys::ENV_JAX_PROCESS_ID, process_id),
    ]))
}
