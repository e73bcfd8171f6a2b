//! Pod CREATE (SPEC §4): the view of a pod the cheap path kept, its plan, and the patch.
use super::Verdict;
use crate::error::InputError;
use crate::mutate::pod_patch;
use crate::pods::{self, pod_plan::PodPlan};
use crate::settings::Settings;
use crate::views::pod_view::PodView;
use serde_json::Value;

/// Admits a pod the policy serves, editing it in place when something is missing.
pub(super) fn admit(mut object: Value, settings: &Settings) -> Result<Verdict, InputError> {
    let plan = {
        let pod = PodView::parse(&object, &settings.tpu_resource)?;
        pods::plan(&pod, settings)?
    };
    if plan.is_empty() {
        return Ok(Verdict::with(None, plan.warnings));
    }
    let PodPlan {
        metadata_adds,
        env_changes,
        warnings,
    } = plan;
    pod_patch::apply(&mut object, metadata_adds, env_changes);
    Ok(Verdict::with(Some(object), warnings))
}
