//! Pod CREATE: the group keys and env entries pod admission planned, written into the pod.
use super::env::prepend_env;
use super::object_entry;
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

/// Writes the additions into the pod in place. The view has checked every step of the path.
pub fn apply(object: &mut Value, metadata_adds: Vec<MetadataAdd>, env_changes: Vec<EnvChange>) {
    let Some(root) = object.as_object_mut() else {
        return;
    };
    let metadata = object_entry(root, "metadata");
    for add in metadata_adds {
        object_entry(metadata, add.map).insert(add.key.to_string(), Value::String(add.value));
    }
    let spec = object_entry(root, "spec");
    for change in env_changes {
        let container = spec
            .get_mut(change.list)
            .and_then(|l| l.get_mut(change.index))
            .and_then(Value::as_object_mut);
        if let Some(container) = container {
            prepend_env(container, change.entries);
        }
    }
}
