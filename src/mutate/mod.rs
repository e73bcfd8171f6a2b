//! Mutation: stamping JobSets, and merging env into containers. Each function computes what
//! is wanted first and returns `None` when the object already has it, so an object that is
//! already right gets no patch (idempotence), as kubewarden's pod-ndots policy does.
pub mod affinity;
pub mod pod_patch;
pub mod stamp_job;
pub mod stamp_jobset;

use crate::json::Object;
use serde_json::{Map, Value};

/// The object under `key`, created when absent or null. Callers only reach fields the view
/// has checked, so a non-object here is only ever an absent or null one.
pub fn object_entry<'a>(parent: &'a mut Object, key: &str) -> &'a mut Object {
    let slot = parent
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

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

/// The steps from a JobSet to replicated job `index`'s pod template.
pub fn pod_template_steps(index: &str) -> [&str; 6] {
    [
        "spec",
        "replicatedJobs",
        index,
        "template",
        "spec",
        "template",
    ]
}
