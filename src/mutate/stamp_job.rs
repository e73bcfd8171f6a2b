//! Job CREATE: stamp an opted-in plain Indexed Job's pod template with its [`Facts`] (SPEC §4.6).
use super::object_at;
use crate::facts::{Facts, JobFacts};
use crate::json::map_str;
use crate::keys;
use crate::views::job_view::JobView;
use serde_json::Value;

/// What the Job's pods need and cannot see themselves: how many processes there are. The
/// subdomain is on the pod already; it is stamped too, as for JobSets, and wins over the
/// pod's own where both exist.
pub fn facts(job: &JobView, counts: JobFacts) -> Facts {
    Facts {
        job: Some(counts),
        subdomain: job.subdomain.map(str::to_string),
        ..Facts::default()
    }
}

/// The annotation to write, or `None` when the template already carries exactly it.
pub fn change(job: &JobView, facts: &Facts) -> Option<String> {
    let wanted = facts.to_annotation();
    (map_str(job.pod_annotations, keys::FACTS) != Some(wanted.as_str())).then_some(wanted)
}

/// Writes the facts into the Job in place. The view has checked every step of the path.
pub fn apply(object: &mut Value, annotation: String) {
    let path = ["spec", "template", "metadata", "annotations"];
    if let Some(annotations) = object_at(object, &path) {
        annotations.insert(keys::FACTS.to_string(), Value::String(annotation));
    }
}
