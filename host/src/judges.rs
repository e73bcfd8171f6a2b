//! The judges of a patch (docs/contributing/spec.md §4.5), kept apart from the policy's code so they can judge it:
//! which paths a host-computed patch may touch, and that nothing of the original object is
//! lost. (`tests/gen`'s `invariants.rs` holds the properties of whole generated JobSets.)
use json_patch::{Patch, PatchOperation};
use serde_json::Value;

const FACTS_KEY: &str = "multislice.kubewarden.io~1facts";
/// The policy's mark of a narrowed affinity (docs/contributing/spec.md §4.7), on a JobSet's pod templates.
const MARK_KEY: &str = "multislice.kubewarden.io~1narrowed";
/// Kueue's slice size, which the policy adds where a slice topology lacks it (docs/rules.md, K2).
const SLICE_SIZE_KEY: &str = "kueue.x-k8s.io~1podset-slice-size";
const REQUIRED: [&str; 3] = [
    "affinity",
    "nodeAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
];
const GROUP_KEYS: [&str; 3] = [
    "jobset.sigs.k8s.io~1group-name",
    "jobset.sigs.k8s.io~1group-replicas",
    "jobset.sigs.k8s.io~1job-group-index",
];

/// Every variable the policy may put at the top of a container's env (docs/contributing/spec.md §4.2–§4.4).
pub const POLICY_ENV: [&str; 12] = [
    "MEGASCALE_NUM_SLICES",
    "MEGASCALE_SLICE_ID",
    "MEGASCALE_COORDINATOR_ADDRESS",
    "MEGASCALE_PORT",
    "TPU_WORKER_ID",
    "TPU_WORKER_HOSTNAMES",
    "TPU_PROCESS_PORT",
    "TPU_PROCESS_ADDRESSES",
    "TPU_NAME",
    "JAX_COORDINATOR_ADDRESS",
    "JAX_NUM_PROCESSES",
    "JAX_PROCESS_ID",
];

fn is_index(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The operation is one the policy may cause on a JobSet: adding its facts annotation (or
/// the objects that hold it), or replacing its own facts; adding Kueue's slice size where a slice
/// topology lacks it; and the narrowing of a pod
/// template's required node affinity with its mark (docs/contributing/spec.md §4.7): the objects that hold the
/// terms, and any edit of the terms, which [`nothing_lost`] then checks term by term.
fn jobset_op_allowed(op: &str, seg: &[&str]) -> bool {
    let prefix_ok = seg.len() >= 7
        && seg[..2] == ["spec", "replicatedJobs"]
        && is_index(seg[2])
        && seg[3..6] == ["template", "spec", "template"];
    if !prefix_ok {
        return false;
    }
    match seg[6..] {
        ["metadata", ref below @ ..] => {
            facts_op_allowed(op, below)
                || matches!((below, op), (["annotations", key], "add" | "replace") if *key == MARK_KEY)
                || matches!((below, op), (["annotations", key], "add") if *key == SLICE_SIZE_KEY)
        }
        ["spec", ref below @ ..] => affinity_op_allowed(op, below),
        _ => false,
    }
}

/// Below a pod spec: adding the objects that hold the required terms, and any edit of the
/// terms themselves.
fn affinity_op_allowed(op: &str, below_spec: &[&str]) -> bool {
    let depth = below_spec.len();
    if (1..=REQUIRED.len()).contains(&depth) {
        return op == "add" && below_spec == &REQUIRED[..depth];
    }
    depth > REQUIRED.len()
        && below_spec[..REQUIRED.len()] == REQUIRED
        && below_spec[REQUIRED.len()] == "nodeSelectorTerms"
}

/// The same on a plain Job (docs/contributing/spec.md §4.6), whose one pod template is `spec.template`.
fn job_op_allowed(op: &str, seg: &[&str]) -> bool {
    seg.len() >= 3
        && seg[..3] == ["spec", "template", "metadata"]
        && facts_op_allowed(op, &seg[3..])
}

/// Below a pod template's `metadata`: adding the annotations (or the metadata itself), or
/// adding or replacing the policy's facts.
fn facts_op_allowed(op: &str, below_metadata: &[&str]) -> bool {
    match (below_metadata, op) {
        ([], "add") | (["annotations"], "add") => true,
        (["annotations", key], "add" | "replace") => *key == FACTS_KEY,
        _ => false,
    }
}

/// The operation is one the policy may cause on a pod (`before`): adding group labels and
/// annotations (or the maps that hold them), and the operations an index-based diff makes of a
/// prepend to a container's env (docs/contributing/spec.md §4.5): the list itself where there was none, `add` at
/// indexes past the original end, and `replace` at (or any edit inside) an original index,
/// whose entry moved down. Never a `remove` of an entry. [`nothing_lost`] then checks that
/// the original entries are all still there, in order, after the prepended ones.
fn pod_op_allowed(before: &Value, op: &str, seg: &[&str]) -> bool {
    match seg {
        ["metadata", "labels" | "annotations"] => op == "add",
        ["metadata", "labels" | "annotations", key] => op == "add" && GROUP_KEYS.contains(key),
        ["spec", list @ ("containers" | "initContainers"), i, "env", rest @ ..] if is_index(i) => {
            let env = before.pointer(&format!("/spec/{list}/{i}/env"));
            let len = env.and_then(Value::as_array).map(Vec::len);
            let index = |j: &str| j.parse::<usize>().ok().filter(|_| is_index(j));
            match (rest, len) {
                ([], None) => op == "add" || (op == "replace" && env == Some(&Value::Null)),
                ([j], Some(len)) => index(j)
                    .is_some_and(|j| (op == "add" && j >= len) || (op == "replace" && j < len)),
                ([j, _, ..], Some(len)) => index(j).is_some_and(|j| j < len),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Every operation of `patch` that falls outside what the policy may touch.
/// `before` is the object the patch was computed from.
pub fn disallowed_ops(before: &Value, patch: &Patch, kind: &str) -> Vec<String> {
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
                "Job" => job_op_allowed(name, &seg),
                _ => pod_op_allowed(before, name, &seg),
            };
            (!ok).then(|| format!("{name} {path}"))
        })
        .collect()
}

/// Where `after` drops or changes anything of `before`. Objects keep every key; a container's
/// `env` keeps every entry, in order, after the injected ones, which are literal entries of
/// the policy's own variables; other arrays are unchanged in length and kept element by
/// element; the policy's own facts annotation may change.
pub fn nothing_lost(before: &Value, after: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    walk(before, after, "", &mut problems);
    problems
}

/// docs/contributing/spec.md §4.5's one exception (§4.7): each original required term is repeated once per pair
/// the policy narrowed to, in order, and every term made from it keeps all its fields and
/// starts with all its expressions. Terms where there were none are the policy's alone.
fn terms_kept(before: &Value, after: &[Value], path: &str, out: &mut Vec<String>) {
    let Some(before) = before.as_array().filter(|b| !b.is_empty()) else {
        return;
    };
    if !after.len().is_multiple_of(before.len()) {
        out.push(format!(
            "{path}: {} terms cannot be made of the {} original ones",
            after.len(),
            before.len()
        ));
        return;
    }
    let made = after.len() / before.len();
    for (i, (own, chunk)) in before.iter().zip(after.chunks(made)).enumerate() {
        let own_expressions = own["matchExpressions"].as_array().map_or(&[][..], |e| e);
        for (j, term) in chunk.iter().enumerate() {
            let expressions = term["matchExpressions"].as_array().map_or(&[][..], |e| e);
            let fields_kept = own.as_object().is_some_and(|o| {
                o.iter()
                    .all(|(k, v)| k == "matchExpressions" || term.get(k) == Some(v))
            });
            if !fields_kept || !expressions.starts_with(own_expressions) {
                out.push(format!(
                    "{path}/{}: does not keep original term {i}",
                    i * made + j
                ));
            }
        }
    }
}

/// `{"name": <a policy variable>, "value": <string>}` and nothing else.
fn is_policy_entry(entry: &Value) -> bool {
    entry.as_object().is_some_and(|e| {
        e.len() == 2
            && e.get("value").is_some_and(Value::is_string)
            && e.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| POLICY_ENV.contains(&n))
    })
}

fn walk(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, bv) in b {
                let p = format!("{path}/{k}");
                match a.get(k) {
                    None => out.push(format!("{p} was removed")),
                    Some(_) if k == "multislice.kubewarden.io/facts" => {}
                    Some(_) if k == "multislice.kubewarden.io/narrowed" => {}
                    Some(Value::Array(terms)) if k == "nodeSelectorTerms" => {
                        terms_kept(bv, terms, &p, out)
                    }
                    Some(av) => walk(bv, av, &p, out),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) if path.ends_with("/env") => {
            if a.len() < b.len() || a[a.len() - b.len()..] != b[..] {
                out.push(format!(
                    "{path}: the user's entries are not kept, in order, at the end"
                ));
                return;
            }
            for (i, entry) in a[..a.len() - b.len()].iter().enumerate() {
                if !is_policy_entry(entry) {
                    out.push(format!(
                        "{path}/{i}: {entry} is not one of the policy's variables"
                    ));
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(env: Value) -> Value {
        json!({"spec": {"containers": [{"name": "c", "env": env}]}})
    }

    fn problems(before: &Value, after: &Value) -> Vec<String> {
        let patch = json_patch::diff(before, after);
        let mut out = disallowed_ops(before, &patch, "Pod");
        out.extend(nothing_lost(before, after));
        out
    }

    #[test]
    fn a_prepend_is_exactly_what_passes() {
        let user = json!([
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "B", "value": "$(MEGASCALE_SLICE_ID)"}
        ]);
        let injected = json!({"name": "MEGASCALE_SLICE_ID", "value": "1"});
        let prepended = json!([injected.clone(), user[0].clone(), user[1].clone()]);
        assert_eq!(
            problems(&pod(user.clone()), &pod(prepended)),
            Vec::<String>::new()
        );
        let fresh = json!({"spec": {"containers": [{"name": "c"}]}});
        let added = pod(json!([injected.clone()]));
        assert_eq!(problems(&fresh, &added), Vec::<String>::new());

        // An entry dropped, or one edited in place, or a foreign entry prepended, fails.
        let dropped = pod(json!([injected.clone(), user[1].clone()]));
        assert!(!problems(&pod(user.clone()), &dropped).is_empty());
        let edited = pod(json!([injected.clone(), user[0].clone(), {"name": "B", "value": "x"}]));
        assert!(!problems(&pod(user.clone()), &edited).is_empty());
        let foreign =
            pod(json!([{"name": "LD_PRELOAD", "value": "x"}, user[0].clone(), user[1].clone()]));
        assert!(!problems(&pod(user.clone()), &foreign).is_empty());
        let truncated = pod(json!([injected]));
        let ops = disallowed_ops(
            &pod(user.clone()),
            &json_patch::diff(&pod(user), &truncated),
            "Pod",
        );
        assert_eq!(ops, ["remove /spec/containers/0/env/1"]);
    }

    fn jobset(terms: Value) -> Value {
        json!({"spec": {"replicatedJobs": [{"template": {"spec": {"template": {"spec": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": terms}}}}}}}}]}})
    }

    fn jobset_problems(before: &Value, after: &Value) -> Vec<String> {
        let patch = json_patch::diff(before, after);
        let mut out = disallowed_ops(before, &patch, "JobSet");
        out.extend(nothing_lost(before, after));
        out
    }

    /// docs/contributing/spec.md §4.5's exception: each user term repeated per pair, with the pair appended.
    #[test]
    fn a_narrowing_keeps_every_user_term_in_every_term_made_from_it() {
        let zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
        let spot = json!({"key": "spot", "operator": "Exists"});
        let p1 = json!({"key": "acc", "operator": "In", "values": ["v6e"]});
        let p2 = json!({"key": "acc", "operator": "In", "values": ["v5e"]});
        let user = json!([{"matchExpressions": [zone.clone()]}, {"matchExpressions": [spot.clone()], "matchFields": []}]);
        let narrowed = json!([
            {"matchExpressions": [zone.clone(), p1.clone()]},
            {"matchExpressions": [zone.clone(), p2.clone()]},
            {"matchExpressions": [spot.clone(), p1.clone()], "matchFields": []},
            {"matchExpressions": [spot.clone(), p2.clone()], "matchFields": []}
        ]);
        assert_eq!(
            jobset_problems(&jobset(user.clone()), &jobset(narrowed)),
            Vec::<String>::new()
        );
        let fresh = json!({"spec": {"replicatedJobs": [{"template": {"spec": {"template": {"spec": {}}}}}]}});
        assert_eq!(
            jobset_problems(&fresh, &jobset(json!([{"matchExpressions": [p1.clone()]}]))),
            Vec::<String>::new()
        );
        // A user expression dropped, or a term's other field lost, fails.
        let dropped = json!([
            {"matchExpressions": [p1.clone()]},
            {"matchExpressions": [zone.clone(), p2.clone()]},
            {"matchExpressions": [spot.clone(), p1.clone()], "matchFields": []},
            {"matchExpressions": [spot.clone(), p2.clone()], "matchFields": []}
        ]);
        assert!(!jobset_problems(&jobset(user.clone()), &jobset(dropped)).is_empty());
        let fields_lost = json!([
            {"matchExpressions": [zone.clone(), p1.clone()]},
            {"matchExpressions": [spot, p1]}
        ]);
        assert!(!jobset_problems(&jobset(user), &jobset(fields_lost)).is_empty());
    }
}
