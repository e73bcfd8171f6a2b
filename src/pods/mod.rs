//! Pod CREATE: the per-pod values of SPEC §4, from the labels the JobSet and Job controllers put on
//! the pod and the facts the policy stamped at JobSet (or Job) admission. A JobSet pod
//! ([`jobset_pod`]) or an opted-in Job's pod ([`job_pod`]) gets a [`PodPlan`], which
//! `mutate::pod_patch` applies. Each env family has its own module over the shared
//! [`place::PodPlace`]; [`env_families`] puts them together.
pub mod env_families;
pub mod env_merge;
pub mod group_metadata;
pub mod jax;
pub mod job_pod;
pub mod jobset_pod;
pub mod multislice;
pub mod place;
pub mod pod_plan;
pub mod tpu_host;

use crate::error::InputError;
use crate::keys;
use crate::settings::Settings;
use crate::views::pod_view::PodView;
use pod_plan::PodPlan;

/// The plan for a pod that admission serves: a JobSet pod, or a pod of an opted-in plain Job
/// (the policy's facts on a pod outside any JobSet). Anything else gets nothing.
pub fn plan(pod: &PodView, settings: &Settings) -> Result<PodPlan, InputError> {
    if let Some(jobset) = pod.controller_value(keys::JOBSET_NAME) {
        return jobset_pod::plan(pod, jobset, settings);
    }
    match &pod.facts.job {
        Some(job) => job_pod::plan(pod, job, settings),
        None => Ok(PodPlan::default()),
    }
}
