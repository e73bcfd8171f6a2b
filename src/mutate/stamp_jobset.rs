//! JobSet CREATE: stamp each replicated job's pod template with its [`Facts`].
use super::{object_at, pod_template_steps};
use crate::facts::Facts;
use crate::json::map_str;
use crate::keys;
use crate::views::jobset_view::JobSetView;
use serde_json::Value;

/// The annotation value wanted on each replicated job's pod template, or `None` where the
/// annotation should stay absent. A stale or forged facts annotation on a JobSet that needs
/// none is overwritten with `{}`, so no pod can claim facts this admission did not compute.
pub fn wanted_annotations(view: &JobSetView, facts: &[Facts]) -> Vec<Option<String>> {
    view.replicated_jobs
        .iter()
        .zip(facts)
        .map(|(rjob, f)| {
            let present = map_str(rjob.template.annotations, keys::FACTS).is_some();
            (!f.is_empty() || present).then(|| f.to_annotation())
        })
        .collect()
}

/// The facts annotations to write, as (replicated job index, value); empty when the JobSet
/// already carries exactly them.
pub fn changes(view: &JobSetView, facts: &[Facts]) -> Vec<(usize, String)> {
    view.replicated_jobs
        .iter()
        .zip(wanted_annotations(view, facts))
        .filter_map(|(rjob, w)| {
            let current = map_str(rjob.template.annotations, keys::FACTS);
            w.filter(|w| current != Some(w.as_str()))
                .map(|w| (rjob.index, w))
        })
        .collect()
}

/// Writes the facts into the JobSet in place (no copy of a JobSet that may be megabytes).
pub fn apply(object: &mut Value, changes: Vec<(usize, String)>) {
    for (i, value) in changes {
        let index = i.to_string();
        let mut path = pod_template_steps(&index).to_vec();
        path.extend(["metadata", "annotations"]);
        // The view has checked every step of this path, so it resolves.
        if let Some(annotations) = object_at(object, &path) {
            annotations.insert(keys::FACTS.to_string(), Value::String(value));
        }
    }
}
