//! SPEC §4.5 checks over a host-computed patch: which paths the policy may touch, and that
//! nothing of the original object is lost.
use json_patch::{Patch, PatchOperation};
use serde_json::Value;

const FACTS_KEY: &str = "multislice.kubewarden.io~1facts";
const GROUP_KEYS: [&str; 3] = [
    "jobset.sigs.k8s.io~1group-name",
    "jobset.sigs.k8s.io~1group-replicas",
    "jobset.sigs.k8s.io~1job-group-index",
];

fn is_index(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The operation is one the policy may cause on a JobSet: adding its facts annotation (or
/// the objects that hold it), or replacing its own facts.
fn jobset_op_allowed(op: &str, seg: &[&str]) -> bool {
    let prefix_ok = seg.len() >= 7
        && seg[..2] == ["spec", "replicatedJobs"]
        && is_index(seg[2])
        && seg[3..7] == ["template", "spec", "template", "metadata"];
    if !prefix_ok {
        return false;
    }
    match (&seg[7..], op) {
        ([], "add") | (["annotations"], "add") => true,
        (["annotations", key], "add" | "replace") => *key == FACTS_KEY,
        _ => false,
    }
}

/// The operation is one the policy may cause on a pod: adding group labels and annotations
/// (or the maps that hold them), and env edits. Env edits may show as replace or remove at
/// an index, because the host's diff is index-based and the policy inserts its variables
/// before the user's; [`nothing_lost`] checks that every user entry survives that shift.
fn pod_op_allowed(op: &str, seg: &[&str]) -> bool {
    match seg {
        ["metadata", "labels" | "annotations"] => op == "add",
        ["metadata", "labels" | "annotations", key] => op == "add" && GROUP_KEYS.contains(key),
        ["spec", "containers" | "initContainers", i, "env", ..] => is_index(i),
        _ => false,
    }
}

/// Every operation of `patch` that falls outside what the policy may touch.
pub fn disallowed_ops(patch: &Patch, kind: &str) -> Vec<String> {
    patch
        .0
        .iter()
        .filter_map(|op| {
            let (name, path) = match op {
                PatchOperation::Add(o) => ("add", o.path.to_string()),
                PatchOperation::Remove(o) => ("remove", o.path.to_string()),
                PatchOperation::Replace(o) => ("replace", o.path.to_string()),
                PatchOperation::Move(o) => ("move", o.path.to_string()),
                PatchOperation::Copy(o) => ("copy", o.path.to_string()),
                PatchOperation::Test(o) => ("test", o.path.to_string()),
            };
            let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
            let ok = match kind {
                "JobSet" => jobset_op_allowed(name, &seg),
                _ => pod_op_allowed(name, &seg),
            };
            (!ok).then(|| format!("{name} {path}"))
        })
        .collect()
}

/// Where `after` drops or changes anything of `before`. Objects keep every key; a container's
/// `env` keeps every entry, in order, after the injected ones; other arrays are unchanged in
/// length and kept element by element; the policy's own facts annotation may change.
pub fn nothing_lost(before: &Value, after: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    walk(before, after, "", &mut problems);
    problems
}

fn walk(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, bv) in b {
                let p = format!("{path}/{k}");
                match a.get(k) {
                    None => out.push(format!("{p} was removed")),
                    Some(_) if k == "multislice.kubewarden.io/facts" => {}
                    Some(av) => walk(bv, av, &p, out),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) if path.ends_with("/env") => {
            if a.len() < b.len() || a[a.len() - b.len()..] != b[..] {
                out.push(format!(
                    "{path}: the user's entries are not kept, in order, at the end"
                ));
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            if a.len() != b.len() {
                out.push(format!(
                    "{path}: length changed from {} to {}",
                    b.len(),
                    a.len()
                ));
            }
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                walk(bv, av, &format!("{path}/{i}"), out);
            }
        }
        // A null or empty map may become a map the policy fills.
        (Value::Null, Value::Object(_)) => {}
        (b, a) if b == a => {}
        _ => out.push(format!("{path} changed")),
    }
}
