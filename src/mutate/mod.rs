//! Mutation: stamping JobSets, and merging env into containers. Each function computes what
//! is wanted first and returns `None` when the object already has it, so an object that is
//! already right gets no patch (idempotence), as kubewarden's pod-ndots policy does.
pub mod affinity;
pub mod pod_patch;
pub mod stamp_job;
pub mod stamp_jobset;

use crate::json::Object;
use serde_json::{Map, Value};

/// Walks `keys` down from `root`, creating objects on the way; an array step takes an index.
pub fn object_at<'a>(root: &'a mut Value, keys: &[&str]) -> Option<&'a mut Object> {
    let mut current = root;
    for key in keys {
        current = match current {
            Value::Object(m) => {
                let slot = m
                    .entry(key.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
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

/// The object at `below` in replicated job `index`'s pod template. The view has checked every
/// step of these paths, so they resolve.
pub fn in_pod_template<'a>(
    object: &'a mut Value,
    index: usize,
    below: &[&str],
) -> Option<&'a mut Object> {
    let index = index.to_string();
    let mut path = vec![
        "spec",
        "replicatedJobs",
        &index,
        "template",
        "spec",
        "template",
    ];
    path.extend(below);
    object_at(object, &path)
}
