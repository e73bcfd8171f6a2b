//! A JobSet, Job or pod read into a tree as serde reads it, except its containers, of which
//! only what the views read is built (issue 30). Building the tree and dropping it is a third of
//! a JobSet CREATE, and a container's image, command (often a whole script in a training
//! JobSet), probes and mounts (a defaulted pod's token mount) are nodes the policy never reads.
//!
//! Every other member is read as serde reads it where the walk meets it, plain values by the
//! cursor (`json_text::plain`) and the rest by serde, so the tree reads as it did (serde's
//! nesting limit of 128 then counts from that member, at most ten levels below the root: a
//! JobSet container's). A text of a shape the walk does not expect, or a value serde refuses,
//! is read whole by serde, which then names the problem in its own words. What the walk skips
//! it checks as serde's skip would, so that a JobSet's object read where the envelope meets it
//! (`admission::envelope`) is checked as serde would have checked it there.
use crate::json_text::{Cursor, PathStep};
use crate::views::pod_spec::{CONTAINER_LISTS, CONTAINER_READ};
use serde_json::{Map, Value};

mod found;
use found::Found;
pub use found::Templates;

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
    read_lean(text, to_pod_specs, Lean::PodSpec, Found::nothing()).map(|read| read.tree)
}

/// A text read by [`read_with_templates`].
#[derive(Debug)]
pub struct LeanRead {
    pub tree: Value,
    pub templates: Templates,
    /// Whether the root object may have a key twice: serde keeps the last, so a cheap read
    /// that stopped at the first may have read the one the tree does not hold. False only
    /// when the walk read every key of the root.
    pub root_may_repeat_a_key: bool,
}

impl LeanRead {
    /// A tree read whole, or without looking for templates: none found, and nothing known of
    /// its keys.
    pub fn whole(tree: Value) -> Self {
        LeanRead {
            tree,
            templates: Templates::new(),
            root_may_repeat_a_key: true,
        }
    }
}

/// [`read`], with where each pod template (one step above a pod spec) is: the policy writes
/// only under them, and the splice starts there rather than walk the whole text again. None
/// when the text repeats a key on the way or in a template, or is read whole.
pub fn read_with_templates(
    text: &str,
    to_pod_specs: &[Step],
) -> Result<LeanRead, serde_json::Error> {
    let found = Found::at_depth(to_pod_specs.len().checked_sub(1));
    read_lean(text, to_pod_specs, Lean::PodSpec, found)
}

/// [`read_with_templates`] of the value `text` starts with, which goes on after it: an
/// envelope's object, read where the envelope meets it. With the value's length; `None` where
/// the walk fails, and serde must read the whole payload.
pub fn read_first_with_templates(text: &str, to_pod_specs: &[Step]) -> Option<(LeanRead, usize)> {
    let mut found = Found::at_depth(to_pod_specs.len().checked_sub(1));
    let mut cursor = Cursor::new(text);
    let tree = value(&mut cursor, to_pod_specs, Lean::PodSpec, &mut found)?;
    Some((finished(tree, found), cursor.position()))
}

/// A list of containers, each with only the members its view reads ([`CONTAINER_READ`]). A
/// repeated member is read as serde reads it, the last one kept.
pub fn container_list(text: &str) -> Result<Value, serde_json::Error> {
    read_lean(text, &[Step::Each], Lean::Container, Found::nothing()).map(|read| read.tree)
}

/// What is read lean at the end of the steps.
#[derive(Debug, Clone, Copy)]
enum Lean {
    /// A pod spec: its container lists.
    PodSpec,
    /// A container: only [`CONTAINER_READ`].
    Container,
}

fn read_lean(
    text: &str,
    steps: &[Step],
    lean: Lean,
    mut found: Found,
) -> Result<LeanRead, serde_json::Error> {
    let mut cursor = Cursor::new(text);
    let walked = value(&mut cursor, steps, lean, &mut found).filter(|_| cursor.at_end());
    match walked {
        Some(tree) => Ok(finished(tree, found)),
        None => serde_json::from_str(text).map(LeanRead::whole),
    }
}

/// The read of `tree`, with what was found on the way.
fn finished(tree: Value, found: Found) -> LeanRead {
    let (templates, root_may_repeat_a_key) = found.finish();
    LeanRead {
        tree,
        templates,
        root_may_repeat_a_key,
    }
}

/// The value that comes next, read down `steps`, noting where it is when it is at the depth
/// looked for; `None` when the walk or serde fails.
fn value(c: &mut Cursor, steps: &[Step], lean: Lean, found: &mut Found) -> Option<Value> {
    if found.depth.is_some_and(|depth| depth == found.at.len()) {
        let (tree, span) = c.spanned(|c| value_below(c, steps, lean, found))?;
        found.places.push((found.at.clone(), span));
        return Some(tree);
    }
    value_below(c, steps, lean, found)
}

fn value_below(c: &mut Cursor, steps: &[Step], lean: Lean, found: &mut Found) -> Option<Value> {
    match (steps.split_first(), c.next_byte()?) {
        (Some((Step::Member(name), rest)), b'{') => {
            let at_root = found.depth.is_some() && found.at.is_empty();
            let at_template = found.depth == Some(found.at.len());
            let mut seen = false;
            let mut members = 0usize;
            let tree = object(c, |c, key| {
                members += 1;
                match key == *name {
                    true => {
                        found.repeated |= seen;
                        seen = true;
                        let step = PathStep::Key(name);
                        found
                            .below(step, |found| value(c, rest, lean, found))
                            .map(Some)
                    }
                    false => parsed(c).map(Some),
                }
            })?;
            // Every member is kept, so fewer in the map is a key met twice. The splice stops
            // walking a template once it has found what it writes, so a template with a key
            // twice is no template.
            let repeats = tree.as_object().map_or(0, Map::len) < members;
            found.root_repeats |= at_root && repeats;
            found.repeated |= at_template && repeats;
            Some(tree)
        }
        (Some((Step::Each, rest)), b'[') => {
            let mut items = Vec::new();
            c.array(|c, i| {
                let step = PathStep::Index(i);
                items.push(found.below(step, |found| value(c, rest, lean, found))?);
                Some(())
            })?;
            Some(Value::Array(items))
        }
        (None, b'{') => match lean {
            Lean::PodSpec => object(c, |c, key| match CONTAINER_LISTS.contains(&key) {
                true => value(c, &[Step::Each], Lean::Container, &mut Found::nothing()).map(Some),
                false => parsed(c).map(Some),
            }),
            // What is not read is skipped, and checked as serde would: the envelope read by
            // the cursor leaves a JobSet CREATE's object to this read alone.
            Lean::Container => object(c, |c, key| match CONTAINER_READ.contains(&key) {
                true => parsed(c).map(Some),
                false => c.skip_valid().map(|_| None),
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
        let key = key.checked()?;
        if let Some(value) = member(c, &key)? {
            map.insert(key.into_owned(), value);
        }
        Some(())
    })?;
    Some(Value::Object(map))
}

/// The value that comes next, as serde reads it.
fn parsed(c: &mut Cursor) -> Option<Value> {
    c.value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_text::Span;
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
    fn each_pod_template_is_found_with_its_path_and_span_and_none_when_a_step_repeats() {
        let template =
            |n| format!(r#"{{"metadata": {{}}, "spec": {{"containers": [{{"name": "c{n}"}}]}}}}"#);
        let (a, b) = (template(0), template(1));
        let text = format!(
            r#"{{"spec": {{"replicatedJobs": [{{"template": {{"spec": {{"template": {a}}}}}}},
                {{"name": "r", "template": {{"spec": {{"parallelism": 1, "template": {b} }}}}}}]}}}}"#
        );
        let read = read_with_templates(&text, &JOBSET_POD_SPECS).unwrap();
        assert_eq!(read.tree, serde_json::from_str::<Value>(&text).unwrap());
        assert!(!read.root_may_repeat_a_key);
        let expected = |i: usize, template: &str| {
            let start = text.find(template).unwrap();
            let at = [
                PathStep::Key("spec"),
                PathStep::Key("replicatedJobs"),
                PathStep::Index(i),
                PathStep::Key("template"),
                PathStep::Key("spec"),
                PathStep::Key("template"),
            ];
            let span = Span {
                start,
                end: start + template.len(),
            };
            (at.to_vec(), span)
        };
        assert_eq!(read.templates, vec![expected(0, &a), expected(1, &b)]);
        let job = r#"{"spec": {"template": {"spec": {}}}}"#;
        let templates = read_with_templates(job, &JOB_POD_SPEC).unwrap().templates;
        let span = Span { start: 22, end: 34 };
        assert_eq!(
            templates,
            vec![(vec![PathStep::Key("spec"), PathStep::Key("template")], span)]
        );
        // A splice from one of two `template`s would leave the other as it was, and one that
        // stops at a template's first `metadata` would leave its second.
        for repeated in [
            r#"{"spec": {"template": {}, "template": {"spec": {}}}}"#,
            r#"{"spec": {"template": {"spec": {}}}, "spec": {"template": {"spec": {}}}}"#,
            r#"{"spec": {"template": {"metadata": {}, "spec": {}, "metadata": {}}}}"#,
        ] {
            let read = read_with_templates(repeated, &JOB_POD_SPEC).unwrap();
            assert_eq!(read.tree, serde_json::from_str::<Value>(repeated).unwrap());
            assert_eq!(read.templates, Templates::new(), "{repeated}");
        }
        // Read whole by serde: nothing found.
        let read = read_with_templates("[1]", &JOB_POD_SPEC).unwrap();
        assert_eq!(read.templates, Templates::new());
    }

    /// Whether the root object has a key twice, any key, however deep the walk went below it.
    #[test]
    fn a_key_the_root_object_repeats_is_noted_and_one_below_it_is_not() {
        for (text, repeats) in [
            (
                r#"{"metadata": {}, "spec": {"template": {"spec": {}}}}"#,
                false,
            ),
            (
                r#"{"metadata": {}, "spec": {"template": {}}, "metadata": {}}"#,
                true,
            ),
            (r#"{"metad\u0061ta": 1, "metadata": 2}"#, true),
            (r#"{"spec": {"template": {}}, "spec": {}}"#, true),
            (
                r#"{"spec": {"a": 1, "a": 2, "template": {"spec": {}}}}"#,
                false,
            ),
            ("[1]", false),
        ] {
            let read = read_with_templates(text, &JOB_POD_SPEC).unwrap();
            assert_eq!(read.root_may_repeat_a_key, repeats, "{text}");
        }
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
