//! What pod admission adds to a pod, and the per-container env changes that JobSet pods and
//! Job pods share.
use super::env_merge::plan_env;
use crate::error::InputError;
use crate::views::container_env::{self, WantedVar};
use crate::views::pod_spec::ContainerView;
use crate::views::pod_view::PodView;
use serde_json::Value;

/// A label or annotation the pod lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataAdd {
    /// `labels` or `annotations`.
    pub map: &'static str,
    pub key: &'static str,
    pub value: String,
}

/// Env entries to put first in one container.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvChange {
    /// `initContainers` or `containers`.
    pub list: &'static str,
    pub index: usize,
    pub entries: Vec<Value>,
}

/// What pod admission adds: metadata entries, and per container the env entries to put
/// first; with the warnings for what it leaves alone.
#[derive(Debug, Default)]
pub struct PodPlan {
    pub metadata_adds: Vec<MetadataAdd>,
    pub env_changes: Vec<EnvChange>,
    pub warnings: Vec<String>,
}

impl PodPlan {
    /// Nothing to add: the pod gets no patch.
    pub fn is_empty(&self) -> bool {
        self.metadata_adds.is_empty() && self.env_changes.is_empty()
    }

    /// A pod left unchanged, with the warning that says why.
    pub fn unchanged(warning: String) -> Self {
        PodPlan {
            warnings: vec![warning],
            ..PodPlan::default()
        }
    }
}

/// Per container, the wanted variables it lacks, to put first; warnings for the ones it sets
/// to something else. Computed first: a pod that has everything gets no change.
pub fn env_changes(
    containers: &[ContainerView],
    wanted: Vec<Vec<WantedVar>>,
    lookup: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Result<Vec<EnvChange>, InputError> {
    let mut changes = Vec::new();
    for (c, wanted) in containers.iter().zip(wanted) {
        if wanted.is_empty() {
            continue;
        }
        let label = format!("container {:?} ({})", c.name, c.path());
        let plan = plan_env(&c.user_entries()?, &label, &wanted, lookup);
        warnings.extend(plan.warnings);
        if !plan.prepend.is_empty() {
            changes.push(EnvChange {
                list: c.list,
                index: c.index,
                entries: plan.prepend,
            });
        }
    }
    Ok(changes)
}

/// What a `fieldRef` to the pod's `path` reads: the pod's own label or annotation, else one
/// that admission is adding.
pub fn field_ref(pod: &PodView, adds: &[MetadataAdd], path: &str) -> Option<String> {
    let (map, key) = container_env::metadata_key(path)?;
    pod.own_metadata(map, key).map(str::to_string).or_else(|| {
        adds.iter()
            .find(|a| a.map == map && a.key == key)
            .map(|a| a.value.clone())
    })
}
