//! Pod CREATE (SPEC §4): the view of a pod the cheap path kept, its plan, and the patch.
use super::heads::ObjectHead;
use super::verdict::Verdict;
use crate::error::InputError;
use crate::keys;
use crate::mutate::pod_patch::PodPatch;
use crate::pods::pod_plan::PodPlan;
use crate::pods::{job_pod, jobset_pod};
use crate::settings::Settings;
use crate::views::pod_view::PodView;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// The policy's facts, which an opted-in Job's pods carry (SPEC §4.6).
#[derive(Deserialize)]
struct FactsHead {
    #[serde(rename = "multislice.kubewarden.io/facts")]
    facts: Option<IgnoredAny>,
}

/// Whether the policy serves the pod: a JobSet pod, or a pod carrying the policy's facts.
pub(super) fn is_served(raw: &RawValue) -> bool {
    // A pod whose metadata cannot even be read this far is left to the full parse, which
    // names the problem.
    match serde_json::from_str::<ObjectHead<FactsHead>>(raw.get()) {
        Ok(head) => head.metadata.is_some_and(|m| {
            m.labels.is_some_and(|l| l.jobset_name.is_some())
                || m.annotations.is_some_and(|a| a.facts.is_some())
        }),
        Err(_) => true,
    }
}

/// Admits a pod the policy serves, patched in place when something is missing: a JobSet pod,
/// or a pod of an opted-in plain Job (the policy's facts on a pod outside any JobSet).
pub(super) fn admit(object: Value, settings: &Settings) -> Result<Verdict, InputError> {
    let pod = PodView::parse(&object, &settings.tpu_resource)?;
    let plan = match (pod.controller_value(keys::JOBSET_NAME), &pod.facts.job) {
        (Some(jobset), _) => jobset_pod::plan(&pod, jobset, settings)?,
        (None, Some(job)) => job_pod::plan(&pod, job, settings)?,
        (None, None) => PodPlan::default(),
    };
    let patch = PodPatch(plan.metadata_adds, plan.env_changes);
    Ok(Verdict::with(patch.applied_to(object), plan.warnings))
}
