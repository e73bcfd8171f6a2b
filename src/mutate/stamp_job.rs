//! Job CREATE: an opted-in plain Indexed Job's pod template stamped with its [`Facts`] (SPEC §4.6).
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

/// The Job with the facts written in place.
pub fn applied_to(mut object: Value, annotation: String) -> Value {
    annotate(&mut object, TemplateAt::Job, keys::FACTS, annotation);
    object
}
