//! JobSet CREATE: stamp each replicated job's pod template with its [`Facts`].
use super::in_pod_template;
use crate::facts::Facts;
use crate::json::map_str;
use crate::keys;
use crate::views::jobset_view::JobSetView;
use serde_json::Value;

/// The facts annotations to write, as (replicated job index, value); empty when the JobSet
/// already carries exactly them. A stale or forged facts annotation on a JobSet that needs
/// none is overwritten with `{}`, so no pod can claim facts this admission did not compute.
pub fn changes(view: &JobSetView, facts: &[Facts]) -> Vec<(usize, String)> {
    view.replicated_jobs
        .iter()
        .zip(facts)
        .filter_map(|(rjob, f)| {
            let current = map_str(rjob.template.annotations, keys::FACTS);
            let wanted = (!f.is_empty() || current.is_some()).then(|| f.to_annotation())?;
            (current != Some(wanted.as_str())).then_some((rjob.index, wanted))
        })
        .collect()
}

/// Writes the facts into the JobSet in place (no copy of a JobSet that may be megabytes).
pub fn apply(object: &mut Value, changes: Vec<(usize, String)>) {
    for (i, value) in changes {
        if let Some(annotations) = in_pod_template(object, i, &["metadata", "annotations"]) {
            annotations.insert(keys::FACTS.to_string(), Value::String(value));
        }
    }
}
