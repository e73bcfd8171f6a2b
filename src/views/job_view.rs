//! A read-only view over a raw `batch/v1` Job that opted into the JAX env (SPEC §4.6).
use crate::error::InputError;
use crate::facts::{Facts, JobFacts};
use crate::json::{self, required, Object};
use crate::paths::TemplateAt;
use crate::views::pod_template::PodTemplateView;
use serde_json::Value;

#[derive(Debug)]
pub struct JobView<'a> {
    /// Empty when the Job is created with `generateName`: its pods carry the name instead.
    pub name: &'a str,
    /// `metadata.annotations`: the opt-in, and Kueue's partial admission (J4).
    pub annotations: Option<&'a Object>,
    pub parallelism: u32,
    pub completions: Option<u32>,
    pub completion_mode: Option<&'a str>,
    pub subdomain: Option<&'a str>,
    pub template: PodTemplateView<'a>,
}

impl<'a> JobView<'a> {
    /// What Job CREATE stamped on the pod template (SPEC §4.6), if it did: only such a Job's pods
    /// got a JAX env that a resize could make stale. Facts the policy cannot read count as none.
    pub fn stamped(&self) -> Option<JobFacts> {
        Facts::read(self.template.annotations, &TemplateAt::Job.annotations())
            .ok()??
            .job
    }

    pub fn parse(object: &'a Value, tpu_resource: &str) -> Result<Self, InputError> {
        let root = json::as_object(object, "object")?;
        let (name, annotations) = match json::opt_object(root, "metadata", "")? {
            Some(m) => (
                json::opt_str(m, "name", "metadata")?.unwrap_or(""),
                json::opt_string_map(m, "annotations", "metadata")?,
            ),
            None => ("", None),
        };
        let spec = required(root, "spec", "")?;
        let (template, pod_spec) = PodTemplateView::parse(spec, TemplateAt::Job, tpu_resource)?;
        Ok(JobView {
            name,
            annotations,
            parallelism: json::opt_count(spec, "parallelism", "spec")?.unwrap_or(1),
            completions: json::opt_count(spec, "completions", "spec")?,
            completion_mode: json::opt_str(spec, "completionMode", "spec")?,
            subdomain: json::opt_str(pod_spec, "subdomain", &TemplateAt::Job.spec())?
                .filter(|s| !s.is_empty()),
            template,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[test]
    fn reads_what_the_rules_need_with_job_defaults() {
        let job = json!({
            "metadata": {"generateName": "train-"},
            "spec": {"completions": 4, "completionMode": "Indexed", "template": {
                "metadata": {"annotations": {"a": "b"}},
                "spec": {"subdomain": "", "containers": [{"name": "jax"}]}}}
        });
        let view = JobView::parse(&job, "google.com/tpu").unwrap();
        assert_eq!(view.name, "");
        assert_eq!(view.parallelism, 1);
        assert_eq!(view.completions, Some(4));
        assert_eq!(view.completion_mode, Some("Indexed"));
        assert_eq!(view.subdomain, None);
        assert_eq!(view.template.containers.len(), 1);
    }

    #[rstest]
    #[case::no_template(json!({"spec": {"completions": 4}}), "spec.template: is required")]
    #[case::bad_parallelism(
        json!({"spec": {"parallelism": "two", "template": {"spec": {}}}}),
        "spec.parallelism: expected a whole number, found the string \"two\""
    )]
    fn wrong_shapes_name_their_field(#[case] job: Value, #[case] message: &str) {
        let got = JobView::parse(&job, "google.com/tpu").unwrap_err();
        assert_eq!(got.to_string(), message);
    }
}
