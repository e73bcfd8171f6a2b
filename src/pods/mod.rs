//! Pod CREATE: the per-pod values of SPEC §4, from the labels the JobSet and Job controllers
//! put on the pod and the facts the policy stamped at JobSet admission. Each env family has
//! its own module over the shared [`place::PodPlace`]; [`wanted_env`] puts them together, for
//! pod admission and for the JobSet CREATE warnings ([`contradictions`]). Pods of an
//! opted-in plain Job (§4.6) get theirs from [`job`].
pub mod contradictions;
pub mod jax;
pub mod job;
pub mod multislice;
pub mod place;
pub mod references;
pub mod tpu_host;

use crate::error::{checked_add, checked_mul, InputError};
use crate::facts::Facts;
use crate::json::{self, map_str, Lazy, Object, PathLike};
use crate::keys;
use crate::mutate::env::{plan_env, prepend_env, WantedVar};
use crate::mutate::object_entry;
use crate::mutate::resolve::{self, Source};
use crate::podspec::{self, ContainerView};
use crate::settings::{JaxEnv, Settings};
use place::{tpu_order, PodPlace};
use serde_json::Value;

/// The outcome of admitting a JobSet pod.
#[derive(Debug, Default, PartialEq)]
pub struct PodOutcome {
    pub mutated: Option<Value>,
    pub warnings: Vec<String>,
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

/// Env entries to put first in one container: (list, index in the list, entries).
type EnvChange = (&'static str, usize, Vec<Value>);

/// What pod admission adds: (map, key, value) metadata entries, and per container
/// (list, index, env entries to put first).
#[derive(Default)]
struct PodPlan {
    metadata_adds: Vec<(&'static str, &'static str, String)>,
    env_changes: Vec<EnvChange>,
    warnings: Vec<String>,
}

fn apply(
    object: &mut Value,
    metadata_adds: Vec<(&'static str, &'static str, String)>,
    env_changes: Vec<EnvChange>,
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
    let Some(jobset) = controller_value(labels, annotations, keys::JOBSET_NAME) else {
        // Admission lets through only JobSet pods and pods with the policy's facts.
        return match &facts.job {
            Some(job) => {
                let name = controller_value(labels, annotations, keys::JOB_NAME)
                    .or_else(|| controller_value(labels, annotations, keys::LEGACY_JOB_NAME))
                    // Under `manualSelector: true` the API server adds no name label, but the
                    // Job controller always makes itself the pod's owner.
                    .or_else(|| metadata.and_then(job::owning_job));
                job::plan_pod(spec, labels, annotations, name, job, &facts, settings)
            }
            None => Ok(PodPlan::default()),
        };
    };
    let count = |key| controller_count(labels, annotations, key);
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
    // A fieldRef reads the pod as the kubelet will see it: with the group keys added here.
    let lookup = |path: &str| field_ref(labels, annotations, &metadata_adds, path);
    let pod = PodEnv {
        spec,
        spec_path: "spec",
        containers: &containers,
        facts: &facts,
        place: &place,
        annotations,
    };
    let env = wanted_env(&pod, settings, &lookup, &mut warnings)?;
    let env_changes = env_changes(spec, &containers, env, &lookup, &mut warnings)?;
    Ok(PodPlan {
        metadata_adds,
        env_changes,
        warnings,
    })
}

/// Per container, the wanted variables it lacks, to put first; warnings for the ones it sets
/// to something else. Computed first: a pod that has everything gets no change.
fn env_changes(
    spec: &Object,
    containers: &[ContainerView],
    wanted: Vec<Vec<WantedVar>>,
    lookup: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Result<Vec<EnvChange>, InputError> {
    let mut changes = Vec::new();
    for (c, wanted) in containers.iter().zip(wanted) {
        if wanted.is_empty() {
            continue;
        }
        let c_path = json::index(&json::join("spec", c.list), c.index);
        let container = container_object(spec, "spec", c)?;
        let label = format!("container {:?} ({c_path})", c.name);
        let plan = plan_env(container, &c_path, &label, &wanted, lookup)?;
        warnings.extend(plan.warnings);
        if !plan.prepend.is_empty() {
            changes.push((c.list, c.index, plan.prepend));
        }
    }
    Ok(changes)
}

/// What a `fieldRef` to the pod's `path` reads: the pod's own label or annotation, else one
/// that admission is adding (`adds`, as (map, key, value)).
fn field_ref(
    labels: Option<&Object>,
    annotations: Option<&Object>,
    adds: &[(&'static str, &'static str, String)],
    path: &str,
) -> Option<String> {
    let (map, key) = resolve::metadata_key(path)?;
    let own = if map == "labels" { labels } else { annotations };
    map_str(own, key).map(str::to_string).or_else(|| {
        adds.iter()
            .find(|(m, k, _)| *m == map && *k == key)
            .map(|(_, _, v)| v.clone())
    })
}

/// The container `c` of the pod spec at `spec_path`.
fn container_object<'a>(
    spec: &'a Object,
    spec_path: &str,
    c: &ContainerView,
) -> Result<&'a Object, InputError> {
    // Built only for an error: this runs for every container of every sampled pod.
    let path = Lazy(|| json::index(&json::join(spec_path, c.list), c.index));
    let item = spec
        .get(c.list)
        .and_then(|l| l.get(c.index))
        .ok_or_else(|| InputError::Missing {
            path: path.render(),
        })?;
    json::as_object(item, path)
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

/// A pod (or a pod template, at JobSet admission) whose env is computed.
pub struct PodEnv<'a> {
    /// The pod spec, where the containers' own `env` is read.
    pub spec: &'a Object,
    pub spec_path: &'a str,
    pub containers: &'a [ContainerView<'a>],
    pub facts: &'a Facts,
    pub place: &'a PodPlace<'a>,
    /// The pod's annotations, for the controller's coordinator when there are no facts.
    pub annotations: Option<&'a Object>,
}

/// The variables each container should have, in container order: the multislice env, the TPU
/// host env, then the JAX env. `lookup` answers the pod's `fieldRef` paths.
pub fn wanted_env(
    pod: &PodEnv,
    settings: &Settings,
    lookup: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Result<Vec<Vec<WantedVar>>, InputError> {
    let PodEnv {
        facts,
        place,
        containers,
        ..
    } = pod;
    let mut out: Vec<Vec<WantedVar>> = vec![Vec::new(); containers.len()];
    let order = tpu_order(containers);
    let n = u32::try_from(order.len()).map_err(|_| InputError::Overflow {
        path: json::join(pod.spec_path, "containers"),
        limit: u32::MAX,
    })?;
    let mut give = |per_k: Vec<Vec<WantedVar>>| {
        for (&i, vars) in order.iter().zip(per_k) {
            out[i].extend(vars);
        }
    };

    if n > 0 && settings.multislice_env {
        give(multislice::vars(
            facts,
            place,
            pod.annotations,
            n,
            warnings,
        )?);
    }
    if n > 0 && settings.tpu_worker_env {
        match (place.completion_index, facts.pods_per_job) {
            (Some(c), Some(hosts)) => {
                let ports = process_ports(pod, &order, lookup, warnings)?;
                give(tpu_host::vars(place, c, hosts, &ports)?);
            }
            _ => warnings.push(format!(
                "pod of JobSet {:?}: no completion index or no facts from JobSet admission, so the TPU host env was not set",
                place.jobset
            )),
        }
    }
    if settings.jax_env != JaxEnv::Never {
        if let Some(per_process) = jax_vars(facts, place, settings, n, warnings)? {
            if facts.slice.is_some() {
                // A TPU group: each TPU container is a process of its own.
                give(per_process);
            } else if let Some(vars) = per_process.into_iter().next() {
                for wanted in out.iter_mut() {
                    wanted.extend(vars.iter().cloned());
                }
            }
        }
    }
    Ok(out)
}

/// Each TPU container's `TPU_PROCESS_PORT`: its own, where it sets one, else the default. A
/// value admission cannot resolve is taken as the default, and a warning says so.
fn process_ports(
    pod: &PodEnv,
    order: &[usize],
    lookup: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Result<Vec<String>, InputError> {
    let mut ports = Vec::with_capacity(order.len());
    for (k, &i) in (0u32..).zip(order) {
        let c = &pod.containers[i];
        let c_path = json::index(&json::join(pod.spec_path, c.list), c.index);
        let entries =
            resolve::user_entries(container_object(pod.spec, pod.spec_path, c)?, &c_path)?;
        let default = tpu_host::default_port(k)?;
        let Some(last) = entries
            .iter()
            .rposition(|e| e.name == keys::ENV_TPU_PROCESS_PORT)
        else {
            ports.push(default);
            continue;
        };
        let own = match entries[last].source {
            Source::Literal(_) | Source::FieldRef(_) => {
                resolve::resolve_all(&entries[..=last], &[], lookup)
                    .pop()
                    .flatten()
            }
            Source::Other => None,
        };
        match own {
            Some(port) => ports.push(port),
            None => {
                warnings.push(format!(
                    "container {:?} ({c_path}): its TPU_PROCESS_PORT cannot be resolved at admission, so TPU_PROCESS_ADDRESSES lists port {default} for it",
                    c.name
                ));
                ports.push(default);
            }
        }
    }
    Ok(ports)
}

/// JAX distributed env (SPEC §4.4) for a pod of the JAX group: one list per TPU container in
/// a TPU group, else one list for the whole pod.
fn jax_vars(
    facts: &Facts,
    place: &PodPlace,
    settings: &Settings,
    n: u32,
    warnings: &mut Vec<String>,
) -> Result<Option<Vec<Vec<WantedVar>>>, InputError> {
    let Some(group) = &facts.jax else {
        return Ok(None);
    };
    // Facts written before the JAX coordinator had its own field shared the slice one.
    let coordinator = group
        .coordinator
        .as_deref()
        .or(facts.coordinator.as_deref());
    let (Some(coordinator), Some(per_job)) = (coordinator, facts.pods_per_job) else {
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
    let pod_number = checked_add(
        checked_add(
            group.offset,
            checked_mul(place.job_index, per_job, path)?,
            path,
        )?,
        completion_index,
        path,
    )?;
    let address = place.address(coordinator);
    let jax_group = jax::JaxGroup {
        pods: group.total,
        coordinator: &address,
        coordinator_pod: group.coordinator_id,
        port: settings.jax_coordinator_port,
    };
    let processes = if facts.slice.is_some() {
        jax::Processes::PerTpuContainer(n)
    } else {
        jax::Processes::PerPod
    };
    jax::vars(&jax_group, pod_number, processes).map(Some)
}
