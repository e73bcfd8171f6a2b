//! Pod CREATE (docs/spec.md §4): the view of a pod the cheap path kept, its plan, and the patch.
use super::heads::LabelsHead;
use super::verdict::Verdict;
use crate::arena;
use crate::error::InputError;
use crate::json_text::Root;
use crate::mutate::pod_patch;
use crate::pods::{self, pod_plan::PodPlan};
use crate::settings::Settings;
use crate::views::pod_text::PodMaps;
use crate::views::pod_view::PodView;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

/// Just enough of a pod to see whether the policy serves it: a JobSet pod (the `jobset-name`
/// label) or an opted-in Job's pod (the policy's facts annotation, docs/spec.md §4.6).
#[derive(Deserialize)]
struct PodHead {
    #[serde(default)]
    metadata: Option<MetadataHead>,
}

#[derive(Deserialize)]
struct MetadataHead {
    #[serde(default)]
    labels: Option<LabelsHead>,
    #[serde(default)]
    annotations: Option<FactsHead>,
}

#[derive(Deserialize)]
struct FactsHead {
    #[serde(rename = "multislice.kubewarden.io/facts", default)]
    facts: Option<IgnoredAny>,
}

/// Whether the policy serves the pod: a JobSet pod, or a pod carrying the policy's facts.
pub(super) fn is_served(text: &str) -> bool {
    // A pod whose metadata cannot even be read this far is left to the full parse, which
    // names the problem.
    match serde_json::from_str::<PodHead>(text) {
        Ok(head) => head.metadata.is_some_and(|m| {
            m.labels.is_some_and(|l| l.jobset_name.is_some())
                || m.annotations.is_some_and(|a| a.facts.is_some())
        }),
        Err(_) => true,
    }
}

/// What `PodText` read of a pod: its labels and annotations, and where its root members are.
pub(super) struct FromText<'t> {
    pub(super) maps: PodMaps<'t>,
    pub(super) roots: Vec<Root<'static>>,
}

/// Admits a pod the policy serves, editing it in place when something is missing. `object`
/// is the pod read whole, or, with `from_text`, only the parts its view reads besides the
/// labels and annotations; `text` is the whole pod as the request has it. The tree is the
/// request's `Read`'s, which abandons it.
pub(super) fn admit(
    object: &mut Value,
    from_text: Option<FromText>,
    text: &str,
    settings: &Settings,
) -> Result<Verdict, InputError> {
    let (maps, roots) = match from_text {
        Some(read) => (Some(read.maps), read.roots),
        None => (None, Vec::new()),
    };
    // What the patch writes into the tree is made where the tree's blocks are.
    let plan = arena::building_tree(|| {
        let tpu = &settings.tpu_resource;
        let pod = match maps {
            Some((labels, annotations)) => PodView::with_maps(object, labels, annotations, tpu)?,
            None => PodView::parse(object, tpu)?,
        };
        pods::plan(&pod, settings)
    })?;
    if plan.is_empty() {
        return Ok(Verdict::with(None, plan.warnings));
    }
    let PodPlan {
        metadata_adds,
        env_changes,
        warnings,
    } = plan;
    let written = arena::building_tree(|| pod_patch::apply(object, metadata_adds, env_changes));
    Verdict::mutated(text, &roots, object, &written, warnings)
}
