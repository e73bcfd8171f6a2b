//! JobSet CREATE: stamp each replicated job's pod template with its [`Facts`].
use super::object_at;
use crate::facts::Facts;
use crate::jobset::JobSetView;
use crate::json::map_str;
use crate::keys;
use serde_json::Value;

/// The annotation value wanted on each replicated job's pod template, or `None` where the
/// annotation should stay absent. A stale or forged facts annotation on a JobSet that needs
/// none is overwritten with `{}`, so no pod can claim facts this admission did not compute.
pub fn wanted_annotations(view: &JobSetView, facts: &[Facts]) -> Vec<Option<String>> {
    view.replicated_jobs
        .iter()
        .zip(facts)
        .map(|(rjob, f)| {
            let present = map_str(rjob.pod_annotations, keys::FACTS).is_some();
            (!f.is_empty() || present).then(|| f.to_annotation())
        })
        .collect()
}

/// The JobSet with its facts stamped, or `None` when it already carries exactly them.
pub fn stamp(object: &Value, view: &JobSetView, facts: &[Facts]) -> Option<Value> {
    let wanted = wanted_annotations(view, facts);
    let changes: Vec<(usize, String)> = wanted
        .into_iter()
        .enumerate()
        .filter_map(|(i, w)| {
            let current = map_str(view.replicated_jobs[i].pod_annotations, keys::FACTS);
            w.filter(|w| current != Some(w.as_str())).map(|w| (i, w))
        })
        .collect();
    if changes.is_empty() {
        return None;
    }
    let mut mutated = object.clone();
    for (i, value) in changes {
        let index = i.to_string();
        let path = [
            "spec",
            "replicatedJobs",
            &index,
            "template",
            "spec",
            "template",
            "metadata",
            "annotations",
        ];
        // The view has checked every step of this path, so it resolves.
        if let Some(annotations) = object_at(&mut mutated, &path) {
            annotations.insert(keys::FACTS.to_string(), Value::String(value));
        }
    }
    Some(mutated)
}
