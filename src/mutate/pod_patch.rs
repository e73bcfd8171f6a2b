//! Pod CREATE: the group keys and env entries pod admission planned, written into the pod, the env
//! entries before the container's own (SPEC §4.2).
use super::object_at;
use crate::json::Object;
use crate::pods::pod_plan::{EnvChange, MetadataAdd};
use serde_json::Value;

/// What the pod lacks: labels and annotations, and env entries per container.
pub struct PodPatch(pub Vec<MetadataAdd>, pub Vec<EnvChange>);

impl PodPatch {
    /// The pod, patched in place; `None` when it lacks nothing.
    pub fn applied_to(self, mut object: Value) -> Option<Value> {
        let PodPatch(metadata_adds, env_changes) = self;
        if metadata_adds.is_empty() && env_changes.is_empty() {
            return None;
        }
        for add in metadata_adds {
            if let Some(map) = object_at(&mut object, &["metadata", add.map]) {
                map.insert(add.key.to_string(), Value::String(add.value));
            }
        }
        for change in env_changes {
            let index = change.index.to_string();
            if let Some(container) = object_at(&mut object, &["spec", change.list, &index]) {
                prepend_env(container, change.entries);
            }
        }
        Some(object)
    }
}

/// Puts `entries` before the container's own env.
fn prepend_env(container: &mut Object, entries: Vec<Value>) {
    if let Some(Value::Array(list)) = container.get_mut("env") {
        list.splice(0..0, entries);
    } else {
        container.insert("env".to_string(), Value::Array(entries));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prepends_before_the_users_entries() {
        let mut c = json!({"env": [{"name": "U", "value": "$(X)"}]});
        prepend_env(
            c.as_object_mut().unwrap(),
            vec![json!({"name": "X", "value": "1"})],
        );
        assert_eq!(
            c,
            json!({"env": [{"name": "X", "value": "1"}, {"name": "U", "value": "$(X)"}]})
        );
    }
}
