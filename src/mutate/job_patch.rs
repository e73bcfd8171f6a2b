//! Job CREATE: an opted-in plain Indexed Job's pod template stamped with its [`Facts`] (SPEC §4.6).
use super::annotate;
use crate::facts::Facts;
use crate::json::map_str;
use crate::keys;
use crate::paths::TemplateAt;
use crate::views::job_view::JobView;
use serde_json::Value;

/// The facts annotation the Job's template lacks, if any.
pub struct JobPatch(Option<String>);

impl JobPatch {
    /// What the Job lacks of `facts`: nothing when its template already carries exactly them.
    pub fn new(job: &JobView, facts: &Facts) -> JobPatch {
        let wanted = facts.to_annotation();
        let current = map_str(job.template.annotations, keys::FACTS);
        JobPatch((current != Some(wanted.as_str())).then_some(wanted))
    }

    /// The Job with the facts written in place; `None` when it lacks nothing.
    pub fn applied_to(self, mut object: Value) -> Option<Value> {
        annotate(&mut object, TemplateAt::Job, keys::FACTS, self.0?);
        Some(object)
    }
}
