//! Mutation: one patch per CREATE ([`jobset_patch`], [`job_patch`], [`pod_patch`]). `X::new`
//! keeps only what the object lacks of what its plan computed, and `applied_to` writes that in
//! place, or returns `None` when the object lacks nothing: an object that is already right gets
//! no patch (idempotence), as kubewarden's pod-ndots policy does.
pub mod job_patch;
pub mod jobset_patch;
pub mod pod_patch;

use crate::json::Object;
use crate::paths::TemplateAt;
use serde_json::{Map, Value};

/// Sets the annotation `key` of the pod template at `at`; the one write of the facts and the mark.
pub fn annotate(object: &mut Value, at: TemplateAt, key: &str, value: String) {
    if let Some(annotations) = object_at(object, &at.keys(&["metadata", "annotations"])) {
        annotations.insert(key.to_string(), Value::String(value));
    }
}

/// The object at `keys` below `root`, made where it is missing; an array step takes an index.
/// The view has checked every step of the paths the patches write, so they resolve.
pub fn object_at<'a>(root: &'a mut Value, keys: &[impl AsRef<str>]) -> Option<&'a mut Object> {
    let mut current = root;
    for key in keys.iter().map(AsRef::as_ref) {
        current = match current {
            Value::Object(m) => {
                let slot = m.entry(key).or_insert(Value::Null);
                if slot.is_null() {
                    *slot = Value::Object(Map::new());
                }
                slot
            }
            Value::Array(a) => a.get_mut(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    current.as_object_mut()
}
