//! JobSet CREATE (and opted-in Job CREATE, §4.6): a warning wherever a pod template's own
//! env contradicts what its pods will get (SPEC §4.2). That response is the one `kubectl apply` prints; a pod's warnings go to
//! the Job controller. A template's value is predicted from what it shows: literals (with
//! `$(VAR)` expanded as the kubelet will) and `fieldRef`s to the controllers' labels and
//! annotations. Each is compared on a few pods of each replicated job: the first two and the
//! last job indexes and completion indexes, where every hand-written pattern that goes wrong
//! (a count that includes a CPU job, an index that ignores earlier replicated jobs, a literal
//! where each job differs) already differs.
use super::job::JobPlace;
use super::place::PodPlace;
use super::{container_object, wanted_env, PodEnv};
use crate::error::{checked_add, InputError};
use crate::facts::{Facts, JobFacts};
use crate::groups;
use crate::json;
use crate::keys;
use crate::settings::{JaxEnv, Settings};
use crate::views::container_env::WantedVar;
use crate::views::container_env::{self, metadata_key};
use crate::views::job_view::JobView;
use crate::views::jobset_view::{JobSetView, ReplicatedJob};
use crate::views::pod_spec::ContainerView;
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
    // Most JobSets set none of the variables: find that out before any other work.
    let mut sets_any = false;
    for r in &view.replicated_jobs {
        let template = Template {
            spec: pod_spec(object, r)?,
            spec_path: &r.pod_spec_path,
            containers: &r.containers,
        };
        if template.sets_any() {
            sets_any = true;
            break;
        }
    }
    if !sets_any {
        return Ok(out);
    }
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
        if f.slice.is_none() && f.jax.is_none() {
            continue;
        }
        let template = Template {
            spec: pod_spec(object, r)?,
            spec_path: &r.pod_spec_path,
            containers: &r.containers,
        };
        if !template.sets_any() {
            continue;
        }
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
                    spec: template.spec,
                    spec_path: &r.pod_spec_path,
                    containers: &r.containers,
                    facts: f,
                    place: &place,
                    annotations: None,
                };
                let wanted = wanted_env(&pod, settings, &lookup, &mut Vec::new())?;
                let host = format!("{}-{j}-{c}", r.name);
                let pod_name = if view.name.is_empty() {
                    host
                } else {
                    format!("{}-{host}", view.name)
                };
                let sample = Sample {
                    pod: format!("pod {pod_name}"),
                    name_known: !view.name.is_empty(),
                    lookup: &lookup,
                };
                compare(&template, &wanted, &sample, &mut seen, &mut out)?;
            }
        }
    }
    Ok(out)
}

/// The warnings for an opted-in plain Job about to be admitted (SPEC §4.6), on the pods with
/// the first two and the last completion indexes.
pub fn job_warnings(
    view: &JobView,
    job: &JobFacts,
    settings: &Settings,
) -> Result<Vec<String>, InputError> {
    let mut out = Vec::new();
    let template = Template {
        spec: view.pod_spec,
        spec_path: JOB_POD_SPEC,
        containers: &view.containers,
    };
    let Some(subdomain) = view.subdomain else {
        return Ok(out);
    };
    if settings.jax_env == JaxEnv::Never || !template.sets_any() {
        return Ok(out);
    }
    let mut seen = Vec::new();
    for c in samples(job.completions) {
        let place = JobPlace {
            job: view.name,
            subdomain,
            completion_index: c,
        };
        let wanted = super::job::wanted_env(
            &view.containers,
            job,
            &place,
            settings.jax_coordinator_port,
            JOB_POD_SPEC,
        )?;
        let lookup = |path: &str| predicted_for_job(view.name, c, path);
        let sample = Sample {
            pod: format!("the pod with completion index {c}"),
            name_known: !view.name.is_empty(),
            lookup: &lookup,
        };
        compare(&template, &wanted, &sample, &mut seen, &mut out)?;
    }
    Ok(out)
}

const JOB_POD_SPEC: &str = "spec.template.spec";

/// A pod template whose containers' own env is compared.
struct Template<'a> {
    spec: &'a json::Object,
    spec_path: &'a str,
    containers: &'a [ContainerView<'a>],
}

impl Template<'_> {
    fn container_path(&self, c: &ContainerView) -> String {
        json::index(&json::join(self.spec_path, c.list), c.index)
    }

    fn entries(&self, c: &ContainerView) -> Result<Vec<container_env::UserEntry<'_>>, InputError> {
        let obj = container_object(self.spec, self.spec_path, c)?;
        container_env::user_entries(obj, &self.container_path(c))
    }

    /// Whether any container names a variable the policy may inject; most templates name
    /// none, and this is what every JobSet CREATE pays for them, so it reads the names only.
    /// A malformed env is the pods' problem, reported at pod admission.
    fn sets_any(&self) -> bool {
        self.containers.iter().any(|c| {
            let env = self
                .spec
                .get(c.list)
                .and_then(|l| l.get(c.index))
                .and_then(|c| c.get("env"))
                .and_then(Value::as_array);
            env.is_some_and(|env| {
                env.iter().any(|e| {
                    e.get("name")
                        .and_then(Value::as_str)
                        .is_some_and(|n| ALL_VARS.contains(&n))
                })
            })
        })
    }
}

/// One predicted pod of a template.
struct Sample<'a> {
    /// How a warning names the pod.
    pod: String,
    /// Whether the object's name is known; under `generateName` it is not, and the variables
    /// that hold it are not compared.
    name_known: bool,
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

/// A warning for each variable a container of `template` sets that resolves, on `sample`, to
/// something other than `wanted`; once per (container, variable), tracked in `seen`.
fn compare(
    template: &Template,
    wanted: &[Vec<WantedVar>],
    sample: &Sample,
    seen: &mut Vec<(usize, &'static str)>,
    out: &mut Vec<String>,
) -> Result<(), InputError> {
    for (ci, (container, vars)) in template.containers.iter().zip(wanted).enumerate() {
        if vars.is_empty() {
            continue;
        }
        let c_path = template.container_path(container);
        let entries = template.entries(container)?;
        let injected: Vec<WantedVar> = vars
            .iter()
            .filter(|v| !entries.iter().any(|e| e.name == v.name))
            .cloned()
            .collect();
        let resolved = container_env::resolve_all(&entries, &injected, sample.lookup);
        for var in vars {
            if !sample.name_known && NAMED_VARS.contains(&var.name) {
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
            out.push(format!(
                "{}: {} resolves to {value:?} for {} but the policy computed {:?}; the container's value is kept",
                json::index(&json::join(&c_path, "env"), e),
                var.name,
                sample.pod,
                var.value
            ));
        }
    }
    Ok(())
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

/// The replicated job's pod spec; the view has checked that it is an object.
fn pod_spec<'a>(object: &'a Value, r: &ReplicatedJob) -> Result<&'a json::Object, InputError> {
    let index = r
        .path
        .strip_prefix("spec.replicatedJobs[")
        .and_then(|s| s.strip_suffix(']'))
        .and_then(|s| s.parse::<usize>().ok());
    let spec = index.and_then(|i| {
        ["template", "spec", "template", "spec"].iter().try_fold(
            object.get("spec")?.get("replicatedJobs")?.get(i)?,
            |v, k| v.get(k),
        )
    });
    spec.and_then(Value::as_object)
        .ok_or_else(|| InputError::Missing {
            path: r.pod_spec_path.clone(),
        })
}

/// What the Job controller's labels and annotations will hold on the pod with completion
/// index `c` of the Job `name` (empty under `generateName`).
fn predicted_for_job(name: &str, c: u32, path: &str) -> Option<String> {
    let (_, key) = metadata_key(path)?;
    match key {
        keys::COMPLETION_INDEX => Some(c.to_string()),
        keys::JOB_NAME | keys::LEGACY_JOB_NAME if !name.is_empty() => Some(name.to_string()),
        _ => None,
    }
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
