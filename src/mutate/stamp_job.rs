//! Job CREATE: stamp an opted-in plain Indexed Job's pod template with its [`Facts`] (SPEC §4.6),
//! which `facts::of_job` computes.
use super::annotate;
use crate::facts::Facts;
use crate::json::map_str;
use crate::keys;
use crate::paths::TemplateAt;
use crate::views::job_view::JobView;
use serde_json::Value;

/// The annotation to write, or `None` when the template already carries exactly it.
pub fn change(job: &JobView, facts: &Facts) -> Option<String> {
    let wanted = facts.to_annotation();
    (map_str(job.template.annotations, keys::FACTS) != Some(wanted.as_str())).then_some(wanted)
}

/// Writes the facts into the Job in place.
pub fn apply(object: &mut Value, annotation: String) {
    annotate(object, TemplateAt::Job, keys::FACTS, annotation);
}
