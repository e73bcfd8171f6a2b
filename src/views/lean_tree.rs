//! A JobSet, Job or pod read into a tree as serde reads it, except its containers, of which
//! only what the views read is built (issue 30). Building the tree and dropping it is a third of
//! a JobSet CREATE, and a container's image, command (often a whole script in a training
//! JobSet), probes and mounts (a defaulted pod's token mount) are nodes the policy never reads.
//!
//! Every other member is parsed by serde where the walk reads it, so the tree reads as it did
//! (serde's nesting limit of 128 then counts from that member, at most ten levels below the
//! root: a JobSet container's). A text of a shape the walk does not expect, or a value serde
//! refuses, is read whole by serde, which then names the problem in its own words.
use crate::json_text::Cursor;
use crate::views::pod_spec::{CONTAINER_LISTS, CONTAINER_READ};
use serde_json::{Map, Value};

/// A step on the way from an object's root to its pod specs: a member, or every element.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    Member(&'static str),
    Each,
}

/// From a pod to its spec.
pub const POD_SPEC: [Step; 1] = [Step::Member("spec")];

/// From a Job to its pod spec.
pub const JOB_POD_SPEC: [Step; 3] = [
    Step::Member("spec"),
    Step::Member("template"),
    Step::Member("spec"),
];

/// From a JobSet to each replicated job's pod spec.
pub const JOBSET_POD_SPECS: [Step; 7] = [
    Step::Member("spec"),
    Step::Member("replicatedJobs"),
    Step::Each,
    Step::Member("template"),
    Step::Member("spec"),
    Step::Member("template"),
    Step::Member("spec"),
];

/// `text` as a tree, with the containers of the pod specs at the end of `to_pod_specs` read
/// lean, as [`container_list`] reads them.
pub fn read(text: &str, to_pod_specs: &[Step]) -> Result<Value, serde_json::Error> {
    read_lean(text, to_pod_specs, Lean::PodSpec)
}

/// A list of containers, each with only the members its view reads ([`CONTAINER_READ`]). A
/// repeated member is read as serde reads it, the last one kept.
pub fn container_list(text: &str) -> Result<Value, serde_json::Error> {
    read_lean(text, &[Step::Each], Lean::Container)
}

/// What is read lean at the end of the steps.
#[derive(Debug, Clone, Copy)]
enum Lean {
    /// A pod spec: its container lists.
    PodSpec,
    /// A container: only [`CONTAINER_READ`].
    Container,
}

fn read_lean(text: &str, steps: &[Step], lean: Lean) -> Result<Value, serde_json::Error> {
    let mut cursor = Cursor::new(text);
    let read = value(&mut cursor, steps, lean).filter(|_| cursor.at_end());
    read.map_or_else(|| serde_json::from_str(text), Ok)
}

/// The value that comes next, read down `steps`; `None` when the walk or serde fails.
fn value(c: &mut Cursor, steps: &[Step], lean: Lean) -> Option<Value> {
    match (steps.split_first(), c.next_byte()?) {
        (Some((Step::Member(name), rest)), b'{') => object(c, |c, key| match key == *name {
            true => value(c, rest, lean).map(Some),
            false => parsed(c).map(Some),
        }),
        (Some((Step::Each, rest)), b'[') => {
            let mut items = Vec::new();
            c.array(|c, _| {
                items.push(value(c, rest, lean)?);
                Some(())
            })?;
            Some(Value::Array(items))
        }
        (None, b'{') => match lean {
            Lean::PodSpec => object(c, |c, key| match CONTAINER_LISTS.contains(&key) {
                true => value(c, &[Step::Each], Lean::Container).map(Some),
                false => parsed(c).map(Some),
            }),
            Lean::Container => object(c, |c, key| match CONTAINER_READ.contains(&key) {
                true => parsed(c).map(Some),
                false => c.skip().map(|_| None),
            }),
        },
        // Anything else (a `null` pod spec, a string where a container was): as serde reads it.
        _ => parsed(c),
    }
}

/// The object that comes next, each member's value given by `member`, or left out where it
/// gives `None`. A repeated key keeps the last, as serde does.
fn object(
    c: &mut Cursor,
    mut member: impl FnMut(&mut Cursor, &str) -> Option<Option<Value>>,
) -> Option<Value> {
    let mut map = Map::new();
    c.object(|c, key| {
        let key = key.unescaped()?;
        if let Some(value) = member(c, &key)? {
            map.insert(key.into_owned(), value);
        }
        Some(())
    })?;
    Some(Value::Object(map))
}

/// The value that comes next, parsed by serde.
fn parsed(c: &mut Cursor) -> Option<Value> {
    c.parse()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_containers_are_lean_and_the_rest_is_as_serde_reads_it() {
        let text = r#"{"kind": "JobSet", "metadata": {"name": "js", "labels": {"a": "1"}},
            "spec": {"replicatedJobs": [
                {"name": "r", "template": {"spec": {"parallelism": 2, "template": {
                    "metadata": {"annotations": {"k": "v"}},
                    "spec": {"nodeSelector": {"n": "1"}, "volumes": [{"name": "v"}],
                             "initContainers": [{"name": "i", "image": "x", "env": []}],
                             "containers": [{"name": "c", "command": ["sh", "-c", "a long script"],
                                             "resources": {"limits": {"google.com/tpu": 4}},
                                             "env": null, "env": [{"name": "A", "value": "1"}]},
                                            "not a container"]}}}}},
                "not a replicated job"]}}"#;
        assert_eq!(
            read(text, &JOBSET_POD_SPECS).unwrap(),
            json!({"kind": "JobSet", "metadata": {"name": "js", "labels": {"a": "1"}},
                "spec": {"replicatedJobs": [
                    {"name": "r", "template": {"spec": {"parallelism": 2, "template": {
                        "metadata": {"annotations": {"k": "v"}},
                        "spec": {"nodeSelector": {"n": "1"}, "volumes": [{"name": "v"}],
                                 "initContainers": [{"name": "i", "env": []}],
                                 "containers": [{"name": "c",
                                                 "resources": {"limits": {"google.com/tpu": 4}},
                                                 "env": [{"name": "A", "value": "1"}]},
                                                "not a container"]}}}}},
                    "not a replicated job"]}})
        );
        let job =
            r#"{"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}"#;
        assert_eq!(
            read(job, &JOB_POD_SPEC).unwrap(),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}})
        );
    }

    #[test]
    fn a_repeated_step_is_the_last_as_serde_reads_it() {
        let text =
            r#"{"spec": {"template": 1, "template": {"spec": {"containers": [{"image": "x"}]}}}}"#;
        assert_eq!(
            read(text, &JOB_POD_SPEC).unwrap(),
            json!({"spec": {"template": {"spec": {"containers": [{}]}}}})
        );
    }

    #[test]
    fn what_the_walk_does_not_expect_is_read_whole_in_serdes_words() {
        assert_eq!(read("[1]", &JOB_POD_SPEC).unwrap(), json!([1]));
        assert_eq!(container_list(r#"{"a": 1}"#).unwrap(), json!({"a": 1}));
        for text in ["{", r#"{"spec": }"#, "[1,]", "{} x"] {
            let serde = serde_json::from_str::<Value>(text).unwrap_err().to_string();
            assert_eq!(
                read(text, &JOB_POD_SPEC).unwrap_err().to_string(),
                serde,
                "{text}"
            );
        }
    }
}
