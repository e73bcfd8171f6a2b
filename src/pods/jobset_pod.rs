//! A JobSet pod: its place from the labels the JobSet and Job controllers put on it, the group
//! keys it lacks (§4.1), and the env each container lacks (§4.2–§4.4).
use super::env_families::{wanted_env, PodEnv};
use super::group_metadata;
use super::place::PodPlace;
use super::pod_plan::{env_changes, field_ref, PodPlan};
use crate::error::InputError;
use crate::keys;
use crate::paths::SpecAt;
use crate::settings::Settings;
use crate::views::pod_view::PodView;

pub fn plan(pod: &PodView, jobset: &str, settings: &Settings) -> Result<PodPlan, InputError> {
    let count = |key| pod.controller_count(key);
    let replicated_job = pod.controller_value(keys::REPLICATED_JOB_NAME);
    let (Some(replicated_job), Some(job_index)) = (replicated_job, count(keys::JOB_INDEX)?) else {
        return Ok(PodPlan::unchanged(format!(
            "pod of JobSet {jobset:?} has no {} or {} label, so it was not made by the JobSet controller; left unchanged",
            keys::REPLICATED_JOB_NAME,
            keys::JOB_INDEX
        )));
    };
    let subdomain = pod.facts.subdomain.as_deref().or(pod.subdomain);
    let place = PodPlace {
        jobset,
        replicated_job,
        replicated_job_replicas: count(keys::REPLICATED_JOB_REPLICAS)?.unwrap_or(1),
        job_index,
        job_global_index: count(keys::JOB_GLOBAL_INDEX)?.unwrap_or(job_index),
        global_replicas: count(keys::GLOBAL_REPLICAS)?.unwrap_or(1),
        completion_index: count(keys::COMPLETION_INDEX)?,
        subdomain: subdomain.unwrap_or(jobset),
    };
    let containers = &pod.containers;
    let (metadata_adds, mut warnings) = group_metadata::missing(pod, &place)?;
    // A fieldRef reads the pod as the kubelet will see it: with the group keys added here.
    let lookup = |path: &str| field_ref(pod, &metadata_adds, path);
    let env = PodEnv {
        spec: SpecAt::Pod,
        containers,
        facts: &pod.facts,
        place: &place,
        annotations: pod.annotations,
    };
    let (wanted, unset) = wanted_env(&env, settings, &lookup)?;
    let (env_changes, kept) = env_changes(containers, wanted, &lookup)?;
    warnings.extend(unset.into_iter().chain(kept));
    Ok(PodPlan {
        metadata_adds,
        env_changes,
        warnings,
    })
}
