//! A read-only view over a pod that admission serves: a JobSet pod, or a pod of an opted-in plain
//! Job (SPEC §4.6). Built only after the cheap path has decided the pod is the policy's, so a pod
//! outside any JobSet never pays for it.
use crate::error::InputError;
use crate::facts::Facts;
use crate::json::{self, map_str, required, Object};
use crate::keys;
use crate::paths::SpecAt;
use crate::views::pod_spec::{self, ContainerView};
use serde_json::Value;

#[derive(Debug)]
pub struct PodView<'a> {
    pub labels: Option<&'a Object>,
    pub annotations: Option<&'a Object>,
    /// The facts JobSet (or Job) admission stamped on the pod's template; empty when none.
    pub facts: Facts,
    /// The Job named by the pod's controller owner reference.
    owning_job: Option<&'a str>,
    pub subdomain: Option<&'a str>,
    /// The containers. A TPU quantity that does not parse is bad input here: pod admission has
    /// no rule to report it under.
    pub containers: Vec<ContainerView<'a>>,
}

impl<'a> PodView<'a> {
    pub fn parse(object: &'a Value, tpu_resource: &str) -> Result<Self, InputError> {
        let root = json::as_object(object, "object")?;
        let metadata = json::opt_object(root, "metadata", "")?;
        let (labels, annotations) = match metadata {
            Some(m) => (
                json::opt_string_map(m, "labels", "metadata")?,
                json::opt_string_map(m, "annotations", "metadata")?,
            ),
            None => (None, None),
        };
        let spec = required(root, "spec", "")?;
        let facts = Facts::read(annotations, "metadata.annotations")?.unwrap_or_default();
        let subdomain = json::opt_str(spec, "subdomain", "spec")?.filter(|s| !s.is_empty());
        let containers = pod_spec::containers(spec, SpecAt::Pod, tpu_resource)?;
        if let Some(e) = containers.iter().find_map(|c| c.tpu_chips.as_ref().err()) {
            return Err(e.clone());
        }
        Ok(PodView {
            labels,
            annotations,
            facts,
            owning_job: metadata.and_then(owning_job),
            subdomain,
            containers,
        })
    }

    /// A controller's label, else its annotation: the controllers write both, and a label is
    /// what selectors see. Returns which map the value came from, for messages.
    pub fn controller_entry(&self, key: &str) -> Option<(&'static str, &'a str)> {
        map_str(self.labels, key)
            .map(|v| ("labels", v))
            .or_else(|| map_str(self.annotations, key).map(|v| ("annotations", v)))
    }

    pub fn controller_value(&self, key: &str) -> Option<&'a str> {
        self.controller_entry(key).map(|(_, v)| v)
    }

    /// A controller's count, named by its map and key when it does not parse.
    pub fn controller_count(&self, key: &str) -> Result<Option<u32>, InputError> {
        self.controller_entry(key)
            .map(|(map, v)| json::parse_count(v, &format!("metadata.{map}[{key:?}]")))
            .transpose()
    }

    /// The name of the pod's Job: the Job controller's label (also under the legacy key), else
    /// the owner reference. Under `manualSelector: true` the API server adds no name label,
    /// but the Job controller always makes itself the pod's owner.
    pub fn job_name(&self) -> Option<&'a str> {
        self.controller_value(keys::JOB_NAME)
            .or_else(|| self.controller_value(keys::LEGACY_JOB_NAME))
            .or(self.owning_job)
    }

    /// The pod's own label (`map` "labels") or annotation.
    pub fn own_metadata(&self, map: &str, key: &str) -> Option<&'a str> {
        let own = if map == "labels" {
            self.labels
        } else {
            self.annotations
        };
        map_str(own, key)
    }
}

fn owning_job(metadata: &Object) -> Option<&str> {
    metadata
        .get("ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| {
            r.get("kind") == Some(&Value::from("Job"))
                && r.get("controller") == Some(&Value::Bool(true))
        })?
        .get("name")?
        .as_str()
}
