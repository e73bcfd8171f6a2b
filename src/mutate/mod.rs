//! Mutation: stamping JobSets, and merging env into containers. Each function computes what
//! is wanted first and returns `None` when the object already has it, so an object that is
//! already right gets no patch (idempotence), as kubewarden's pod-ndots policy does.
pub mod affinity;
pub mod pod_patch;
pub mod splice;
pub mod stamp_job;
pub mod stamp_jobset;

use crate::json::Object;
use serde_json::{Map, Value};
use splice::PathStep;

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

/// The value at `path` below `root`, which must be there: one lookup a step, where
/// [`object_at`], which may have to add the member, takes two.
fn value_at<'a>(root: &'a mut Value, path: &[PathStep]) -> Option<&'a mut Value> {
    path.iter()
        .try_fold(root, |value, step| match (value, step) {
            (Value::Object(m), PathStep::Key(key)) => m.get_mut(*key),
            (Value::Array(a), PathStep::Index(i)) => a.get_mut(*i),
            _ => None,
        })
}

/// Walks `path` down from `root`, creating objects on the way.
pub fn object_at<'a>(root: &'a mut Value, path: &[PathStep]) -> Option<&'a mut Object> {
    let mut current = root;
    for step in path {
        current = match (current, step) {
            (Value::Object(m), PathStep::Key(key)) => {
                let slot = member(m, key)?;
                if slot.is_null() {
                    *slot = Value::Object(Map::new());
                }
                slot
            }
            (Value::Array(a), PathStep::Index(i)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    current.as_object_mut()
}

/// The member `key` of `parent`, an empty object added when absent. The key is copied only
/// when it is added: the paths walked are there, most of them.
fn member<'a>(parent: &'a mut Object, key: &str) -> Option<&'a mut Value> {
    if parent.contains_key(key) {
        parent.get_mut(key)
    } else {
        Some(
            parent
                .entry(key.to_string())
                .or_insert(Value::Object(Map::new())),
        )
    }
}

/// The steps from a JobSet to its replicated jobs.
const TO_REPLICATED_JOBS: [PathStep<'static>; 2] =
    [PathStep::Key("spec"), PathStep::Key("replicatedJobs")];

/// The steps from a replicated job to its pod template.
const TO_POD_TEMPLATE: [PathStep<'static>; 3] = [
    PathStep::Key("template"),
    PathStep::Key("spec"),
    PathStep::Key("template"),
];

/// The steps from a JobSet to replicated job `index`'s pod template.
pub fn pod_template_steps(index: usize) -> [PathStep<'static>; 6] {
    let [spec, replicated_jobs] = TO_REPLICATED_JOBS;
    let [template, job_spec, pod_template] = TO_POD_TEMPLATE;
    [
        spec,
        replicated_jobs,
        PathStep::Index(index),
        template,
        job_spec,
        pod_template,
    ]
}

/// A JobSet's replicated jobs, found once for all the templates written.
pub fn replicated_jobs_mut(jobset: &mut Value) -> Option<&mut Vec<Value>> {
    value_at(jobset, &TO_REPLICATED_JOBS)?.as_array_mut()
}

/// Replicated job `index`'s pod template.
pub fn pod_template_mut(replicated_jobs: &mut [Value], index: usize) -> Option<&mut Value> {
    value_at(replicated_jobs.get_mut(index)?, &TO_POD_TEMPLATE)
}

/// `path` followed by `more` keys.
pub fn path_to(path: &[PathStep<'static>], more: &[&'static str]) -> splice::Path<'static> {
    let mut to = Vec::with_capacity(path.len().saturating_add(more.len()));
    to.extend_from_slice(path);
    to.extend(more.iter().map(|k| PathStep::Key(k)));
    to
}
