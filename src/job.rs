//! A read-only view over a raw `batch/v1` Job that opted into the JAX env (SPEC §4.6): what
//! rules J1–J3 and the stamping need, each read naming its JSON path.
use crate::error::InputError;
use crate::json::{self, Object};
use crate::podspec::{self, ContainerView};
use serde_json::Value;

#[derive(Debug)]
pub struct JobView<'a> {
    /// Empty when the Job is created with `generateName`: its pods carry the name instead.
    pub name: &'a str,
    /// `spec.parallelism`; the Job default is 1.
    pub parallelism: u32,
    pub completions: Option<u32>,
    pub completion_mode: Option<&'a str>,
    /// `spec.template.spec.subdomain`, when set and not empty.
    pub subdomain: Option<&'a str>,
    pub pod_annotations: Option<&'a Object>,
    /// `spec.template.spec`, whose containers' own env the warnings read.
    pub pod_spec: &'a Object,
    pub containers: Vec<ContainerView<'a>>,
}

impl<'a> JobView<'a> {
    pub fn parse(object: &'a Value, tpu_resource: &str) -> Result<Self, InputError> {
        let root = json::as_object(object, "object")?;
        let name = match json::opt_object(root, "metadata", "")? {
            Some(m) => json::opt_str(m, "name", "metadata")?.unwrap_or(""),
            None => "",
        };
        let spec = required(root, "spec", "")?;
        let template = required(spec, "template", "spec")?;
        let pod_annotations = match json::opt_object(template, "metadata", "spec.template")? {
            Some(m) => json::opt_string_map(m, "annotations", "spec.template.metadata")?,
            None => None,
        };
        let pod_spec = required(template, "spec", "spec.template")?;
        Ok(JobView {
            name,
            parallelism: json::opt_count(spec, "parallelism", "spec")?.unwrap_or(1),
            completions: json::opt_count(spec, "completions", "spec")?,
            completion_mode: json::opt_str(spec, "completionMode", "spec")?,
            subdomain: json::opt_str(pod_spec, "subdomain", "spec.template.spec")?
                .filter(|s| !s.is_empty()),
            pod_annotations,
            pod_spec,
            containers: podspec::containers(pod_spec, "spec.template.spec", tpu_resource)?,
        })
    }
}

fn required<'a>(obj: &'a Object, key: &str, path: &str) -> Result<&'a Object, InputError> {
    json::opt_object(obj, key, path)?.ok_or_else(|| InputError::Missing {
        path: json::join(path, key),
    })
}

/// `spec.parallelism` (default 1) and `spec.completions` of a Job, for comparing an UPDATE
/// with the object it replaces. A field that cannot be read counts as absent: the API server
/// has validated both objects, and this only looks for a change.
pub fn counts(object: &Value) -> (u32, Option<u32>) {
    let read = |key: &str| {
        object
            .pointer(&format!("/spec/{key}"))
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    };
    (read("parallelism").unwrap_or(1), read("completions"))
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(view.containers.len(), 1);
    }

    #[test]
    fn wrong_shapes_name_their_field() {
        let no_template = json!({"spec": {"completions": 4}});
        assert_eq!(
            JobView::parse(&no_template, "google.com/tpu")
                .unwrap_err()
                .to_string(),
            "spec.template: is required"
        );
        let bad = json!({"spec": {"parallelism": "two", "template": {"spec": {}}}});
        assert_eq!(
            JobView::parse(&bad, "google.com/tpu")
                .unwrap_err()
                .to_string(),
            "spec.parallelism: expected a whole number, found the string \"two\""
        );
    }

    #[test]
    fn counts_default_parallelism_to_one() {
        assert_eq!(counts(&json!({"spec": {"completions": 3}})), (1, Some(3)));
        assert_eq!(
            counts(&json!({"spec": {"parallelism": 2, "completions": 2}})),
            (2, Some(2))
        );
    }
}
