//! JobSet CREATE: stamp each replicated job's pod template with its [`Facts`].
use super::splice::Written;
use super::{object_at, path_to, pod_template_mut, pod_template_steps, replicated_jobs_mut};
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

/// Writes the facts into the JobSet in place (no copy of a JobSet that may be megabytes); where
/// it wrote.
pub fn apply(object: &mut Value, changes: Vec<(usize, String)>) -> Written {
    let mut written = Written::new();
    // The view has checked every step to each template, and read its metadata and annotations
    // where they are; so the paths resolve.
    let Some(replicated_jobs) = replicated_jobs_mut(object) else {
        return written;
    };
    for (i, value) in changes {
        let template = pod_template_steps(i);
        let path = path_to(&template, &["metadata", "annotations"]);
        let annotations = pod_template_mut(replicated_jobs, i)
            .and_then(|t| object_at(t, &path[template.len()..]));
        if let Some(annotations) = annotations {
            annotations.insert(keys::FACTS.to_string(), Value::String(value));
            written.push(path);
        }
    }
    written
}
