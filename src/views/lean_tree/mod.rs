//! A JobSet, Job or pod read into a tree as serde reads it, except on the way to its pod specs:
//! of its containers, its pod specs, its Job specs and a JobSet's replicated jobs, only what the
//! views read is built (issue 30). Building the tree and dropping it is a third of a JobSet
//! CREATE, and a container's image, command (often a whole script in a training JobSet),
//! probes and mounts (a defaulted pod's token mount), a pod spec's volumes and tolerations and
//! a Job's failure policy are nodes the policy never reads. The lists of what is read stand
//! beside the views that read them ([`CONTAINER_READ`], [`POD_SPEC_READ`]) or here, and a new
//! read must be added to its list.
//!
//! Every other member is read as serde reads it where the walk meets it, plain values by the
//! cursor (`json_text::plain`) and the rest by serde, so the tree reads as it did (serde's
//! nesting limit of 128 then counts from that member, at most ten levels below the root: a
//! JobSet container's). A text of a shape the walk does not expect, or a value serde refuses,
//! is read whole by serde, which then names the problem in its own words. What the walk skips
//! it checks as serde's skip would, so that a JobSet's object read where the envelope meets it
//! (`admission::envelope`) is checked as serde would have checked it there. A member never read
//! is so checked for its shape only, as serde checks a field it ignores and as a policy that
//! reads typed structs would: a number beyond `f64` or a lone surrogate there, which the API
//! server never sends, is not refused.
use crate::json_text::{Cursor, PathStep};
use crate::views::pod_spec::{CONTAINER_LISTS, CONTAINER_READ, POD_SPEC_READ};
use serde_json::{Map, Value};

mod found;
use found::Found;
pub use found::Templates;

/// A step on the way from an object's root to its pod specs: a member, or every element.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// The member walked down; the object's other members are read as serde reads them.
    Member(&'static str),
    /// The member walked down; of the object's other members, only these are read (what the
    /// views read there), and the rest skipped.
    MemberAmong(&'static str, &'static [&'static str]),
    Each,
}

/// What the views read of a Job's spec, a JobSet's replicated job's included, besides its
/// `template`.
const JOB_SPEC_READ: &[&str] = &["parallelism", "completions", "completionMode"];

/// What `JobSetView` reads of a replicated job, besides its `template`.
const REPLICATED_JOB_READ: &[&str] = &["name", "replicas", "groupName"];

/// From a pod to its spec.
pub const POD_SPEC: [Step; 1] = [Step::Member("spec")];

/// From a Job to its pod spec.
pub const JOB_POD_SPEC: [Step; 3] = [
    Step::Member("spec"),
    Step::MemberAmong("template", JOB_SPEC_READ),
    Step::Member("spec"),
];

/// From a JobSet to each replicated job's pod spec.
pub const JOBSET_POD_SPECS: [Step; 7] = [
    Step::Member("spec"),
    Step::Member("replicatedJobs"),
    Step::Each,
    Step::MemberAmong("template", REPLICATED_JOB_READ),
    Step::Member("spec"),
    Step::MemberAmong("template", JOB_SPEC_READ),
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
        (Some((step @ (Step::Member(name) | Step::MemberAmong(name, _)), rest)), b'{') => {
            let kept = match step {
                Step::MemberAmong(_, kept) => Some(*kept),
                _ => None,
            };
            let at_root = found.depth.is_some() && found.at.is_empty();
            let at_template = found.depth == Some(found.at.len());
            let mut seen = false;
            let mut members = 0usize;
            let tree = object(c, |c, key| {
                if key == *name {
                    members += 1;
                    found.repeated |= seen;
                    seen = true;
                    let step = PathStep::Key(name);
                    return found
                        .below(step, |found| value(c, rest, lean, found))
                        .map(Some);
                }
                let read = kept.is_none_or(|kept| kept.contains(&key));
                if read {
                    members += 1;
                }
                read_or_skip(c, read)
            })?;
            // Every member read is kept, so fewer in the map is a key met twice. The splice
            // stops walking a template once it has found what it writes, so a template with a
            // key twice is no template.
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
            Lean::PodSpec => object(c, |c, key| {
                if CONTAINER_LISTS.contains(&key) {
                    value(c, &[Step::Each], Lean::Container, &mut Found::nothing()).map(Some)
                } else {
                    read_or_skip(c, POD_SPEC_READ.contains(&key))
                }
            }),
            // What is not read is skipped, and checked as serde would: the envelope read by
            // the cursor leaves a JobSet CREATE's object to this read alone.
            Lean::Container => object(c, |c, key| read_or_skip(c, CONTAINER_READ.contains(&key))),
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

/// The member's value that comes next, as serde reads it where the views `read` it; else
/// skipped, checked as serde's skip checks it, and left out of the tree.
#[inline]
fn read_or_skip(c: &mut Cursor, read: bool) -> Option<Option<Value>> {
    match read {
        true => parsed(c).map(Some),
        false => c.skip_valid().map(|_| None),
    }
}

/// The value that comes next, as serde reads it.
fn parsed(c: &mut Cursor) -> Option<Value> {
    c.value()
}

#[cfg(test)]
mod walk_tests;
