//! What pod admission adds to a pod, and the per-container env changes that JobSet pods and
//! Job pods share.
use crate::error::InputError;
use crate::views::container_env::{self, UserEntry, WantedVar};
use crate::views::pod_spec::ContainerView;
use crate::views::pod_view::PodView;
use serde_json::{json, Value};

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

/// What pod admission adds, with the warnings for what it leaves alone.
#[derive(Debug, Default)]
pub struct PodPlan {
    pub metadata_adds: Vec<MetadataAdd>,
    pub env_changes: Vec<EnvChange>,
    pub warnings: Vec<String>,
}

impl PodPlan {
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
) -> Result<(Vec<EnvChange>, Vec<String>), InputError> {
    let (mut changes, mut warnings) = (Vec::new(), Vec::new());
    for (c, wanted) in containers.iter().zip(wanted) {
        if wanted.is_empty() {
            continue;
        }
        let label = format!("container {:?} ({})", c.name, c.path());
        let (entries, said) = merge_env(&c.user_entries()?, &label, &wanted, lookup);
        warnings.extend(said);
        if !entries.is_empty() {
            changes.push(EnvChange {
                list: c.list,
                index: c.index,
                entries,
            });
        }
    }
    Ok((changes, warnings))
}

/// The env merge (SPEC §4.2): the entries to put before the user's own, so that the user's
/// `$(VAR)` references to them expand. A variable the container already sets, by `value` or
/// `valueFrom`, is left exactly as it is, with a warning where its value resolves (see
/// [`container_env`]) to something else.
fn merge_env(
    user: &[UserEntry],
    label: &str,
    wanted: &[WantedVar],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> (Vec<Value>, Vec<String>) {
    let warnings = container_env::disagreements(user, wanted, lookup)
        .into_iter()
        .map(|d| {
            format!(
                "{label}: {} keeps {:?}, not the {:?} the policy computed",
                d.var.name, d.value, d.var.value
            )
        })
        .collect();
    let entries = wanted
        .iter()
        .filter(|var| !user.iter().any(|e| e.name == var.name))
        .map(|var| json!({"name": var.name, "value": var.value}))
        .collect();
    (entries, warnings)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::container_env::{env_entries, user_entries};

    #[test]
    fn keeps_user_values_and_warns_only_on_disagreeing_literals() {
        let c = json!({"name": "w", "env": [
            {"name": "A", "value": "1"},
            {"name": "B", "value": "9"},
            {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
        ]});
        let entries = env_entries(c.as_object().unwrap(), "spec.containers[0]");
        let (prepend, warnings) = merge_env(
            &user_entries(&entries).unwrap(),
            "container \"w\"",
            &[("A", "1"), ("B", "2"), ("C", "3"), ("D", "4")].map(|(n, v)| WantedVar::new(n, v)),
            &|_| None,
        );
        assert_eq!(prepend, vec![json!({"name": "D", "value": "4"})]);
        assert_eq!(
            warnings,
            vec!["container \"w\": B keeps \"9\", not the \"2\" the policy computed"]
        );
    }
}
