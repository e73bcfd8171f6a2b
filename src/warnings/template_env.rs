//! JobSet CREATE (and opted-in Job CREATE, §4.6): a warning wherever a pod template's own env
//! contradicts what its pods will get (SPEC §4.2); `kubectl apply` prints that response, while a
//! pod's warnings go to the Job controller. A value is predicted from literals (`$(VAR)` expanded
//! as the kubelet will) and `fieldRef`s to the controllers' keys, on the first two and the last
//! job and completion indexes of each replicated job: every hand-written pattern that goes wrong
//! (a count that includes a CPU job, an index that ignores earlier replicated jobs, a literal
//! where each job differs) already differs there.
use crate::error::InputError;
use crate::facts::{Facts, GroupFacts, JobFacts};
use crate::groups::{offsets, JobSetPlan};
use crate::json;
use crate::keys;
use crate::names;
use crate::pods::env_families::{wanted_env, PodEnv};
use crate::pods::job_pod::{self, JobPlace};
use crate::pods::place::PodPlace;
use crate::settings::Settings;
use crate::views::container_env::{self, metadata_key, WantedVar};
use crate::views::job_view::JobView;
use crate::views::jobset_view::{JobSetView, ReplicatedJob};
use crate::views::pod_template::PodTemplateView;
use std::collections::BTreeSet;

/// The warnings for a JobSet about to be admitted with `facts`.
pub fn warnings(plan: &JobSetPlan, facts: &[Facts]) -> Result<Vec<String>, InputError> {
    let (view, settings) = (plan.view, plan.settings);
    let mut out = Vec::new();
    // Most JobSets set none of the variables: find that out before any other work.
    if !view.replicated_jobs.iter().any(|r| sets_any(&r.template)) {
        return Ok(out);
    }
    // The pods' global-replicas, and each replicated job's job-global-index of its job 0.
    let rjobs: Vec<&ReplicatedJob> = view.replicated_jobs.iter().collect();
    let (global_replicas, starts) = offsets(&rjobs, |r| Ok(r.replicas))?;
    let group_keys = plan.group_keys.as_deref().map_err(Clone::clone)?;
    let each = rjobs.into_iter().zip(facts).zip(group_keys).zip(starts);
    for (((rjob, f), group), start) in each {
        if (f.slice.is_none() && f.jax.is_none()) || !sets_any(&rjob.template) {
            continue;
        }
        let mut seen = BTreeSet::new();
        for j in samples(rjob.replicas) {
            for c in samples(rjob.parallelism) {
                // `j` is below the replicas, so `start + j` is below `global_replicas`, whose sum
                // did not overflow.
                let place = PodPlace {
                    jobset: view.name,
                    replicated_job: rjob.name,
                    replicated_job_replicas: rjob.replicas,
                    job_index: j,
                    job_global_index: start + j,
                    global_replicas,
                    completion_index: Some(c),
                    subdomain: view.subdomain.unwrap_or(view.name),
                };
                let lookup = |path: &str| predicted(view, group, &place, path);
                let pod = PodEnv {
                    spec: rjob.template.spec_at(),
                    containers: &rjob.template.containers,
                    facts: f,
                    place: &place,
                    annotations: None,
                };
                let (wanted, _) = wanted_env(&pod, settings, &lookup)?;
                let host = names::rjob_pod(rjob.name, j, c);
                let sample = Sample {
                    pod: match view.name {
                        "" => format!("pod {host}"),
                        jobset => format!("pod {}", names::in_jobset(jobset, &host)),
                    },
                    name_known: !view.name.is_empty(),
                    lookup: &lookup,
                };
                out.extend(compare(&rjob.template, &wanted, &sample, &mut seen)?);
            }
        }
    }
    Ok(out)
}

/// The warnings for an opted-in plain Job about to be admitted (SPEC §4.6) with the JAX env.
pub fn job_warnings(
    view: &JobView,
    job: &JobFacts,
    settings: &Settings,
) -> Result<Vec<String>, InputError> {
    let template = &view.template;
    let (Some(subdomain), true) = (view.subdomain, sets_any(template)) else {
        return Ok(Vec::new());
    };
    let (mut seen, mut out) = (BTreeSet::new(), Vec::new());
    for c in samples(job.completions) {
        let place = JobPlace {
            job: view.name,
            subdomain,
            completion_index: c,
        };
        let wanted = job_pod::jax_env(
            &view.template.containers,
            job,
            &place,
            settings.jax_coordinator_port,
            template.spec_at(),
        )?;
        let lookup = |path: &str| predicted_for_job(view.name, c, path);
        let sample = Sample {
            pod: format!("the pod with completion index {c}"),
            name_known: !view.name.is_empty(),
            lookup: &lookup,
        };
        out.extend(compare(template, &wanted, &sample, &mut seen)?);
    }
    Ok(out)
}

/// Whether any container names a variable the policy may inject: most templates name none, and
/// every JobSet CREATE pays for this, so it reads the names only.
fn sets_any(template: &PodTemplateView) -> bool {
    template
        .containers
        .iter()
        .any(|c| c.names_any(&keys::POLICY_ENV))
}

/// One predicted pod of a template, named as a warning names it.
struct Sample<'a> {
    pod: String,
    /// Whether the object's name is known; under `generateName` it is not, and the variables
    /// that hold it are not compared.
    name_known: bool,
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

/// A warning for each variable a container of `template` sets that resolves, on `sample`, to
/// something other than `wanted`; once per (container, variable), tracked in `seen`.
fn compare(
    template: &PodTemplateView,
    wanted: &[Vec<WantedVar>],
    sample: &Sample,
    seen: &mut BTreeSet<(usize, &'static str)>,
) -> Result<Vec<String>, InputError> {
    let mut out = Vec::new();
    for (ci, (container, vars)) in template.containers.iter().zip(wanted).enumerate() {
        if vars.is_empty() {
            continue;
        }
        let c_path = container.path();
        let entries = container.user_entries()?;
        for d in container_env::disagreements(&entries, vars, sample.lookup) {
            let var = d.var;
            if !sample.name_known && keys::ENV_NAMING_THE_JOBSET.contains(&var.name) {
                continue;
            }
            if !seen.insert((ci, var.name)) {
                continue;
            }
            let path = json::index(&json::join(&c_path, "env"), d.entry);
            out.push(format!(
                "{path}: {} keeps {:?} for {}, not the {:?} the policy computed",
                var.name, d.value, sample.pod, var.value
            ));
        }
    }
    Ok(out)
}

/// The first two and the last of `0..count`, none twice (the last is taken as at least 2).
fn samples(count: u32) -> impl Iterator<Item = u32> {
    [0, 1, count.saturating_sub(1).max(2)]
        .into_iter()
        .filter(move |&i| i < count)
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
fn predicted(
    view: &JobSetView,
    group: &GroupFacts,
    place: &PodPlace,
    path: &str,
) -> Option<String> {
    let (map, key) = metadata_key(path)?;
    let named = |v: String| (!view.name.is_empty()).then_some(v);
    let value = match key {
        keys::JOBSET_NAME => return named(view.name.to_string()),
        keys::REPLICATED_JOB_NAME => place.replicated_job.to_string(),
        keys::REPLICATED_JOB_REPLICAS => place.replicated_job_replicas.to_string(),
        keys::JOB_INDEX => place.job_index.to_string(),
        keys::JOB_GLOBAL_INDEX => place.job_global_index.to_string(),
        keys::GLOBAL_REPLICAS => place.global_replicas.to_string(),
        keys::GROUP_NAME => group.name.clone(),
        keys::GROUP_REPLICAS => group.replicas.to_string(),
        keys::JOB_GROUP_INDEX => group.offset.checked_add(place.job_index)?.to_string(),
        keys::COMPLETION_INDEX => place.completion_index?.to_string(),
        keys::JOBSET_COORDINATOR if map == "annotations" => {
            return named(place.address(&view.coordinator.as_ref()?.pod()));
        }
        _ => return None,
    };
    Some(value)
}
