//! A pod read from the request's text in one walk (issue 30): its labels and annotations as
//! borrowed [`StrMap`]s, whether the policy serves it, and a tree of only the other parts
//! [`PodView`](super::pod_view::PodView) reads (the owner references; the subdomain, and of
//! each container its name, resources and env). The rest of a pod (its volumes, affinity,
//! tolerations, managed fields, each container's image, command, probes and mounts) is
//! skipped, never built into a tree.
//!
//! A shape this reading does not expect (a key repeated on the way, `metadata` or `labels` of
//! the wrong type, a label that is not a string) gives `None`: the caller then reads the pod
//! whole, as before, so that its view names the problem in the same words.
use crate::json_text::plain::value_of;
use crate::json_text::{Cursor, PathStep, Root, Span};
use crate::keys;
use crate::views::lean_tree::container_list;
use crate::views::str_map::StrMap;
use serde_json::{Map, Value};

/// The members of `metadata` and of `spec` that the pod's view reads.
const METADATA_READ: [&str; 3] = ["labels", "annotations", "ownerReferences"];
const SPEC_READ: [&str; 3] = ["subdomain", "containers", "initContainers"];
/// The paths to `metadata` and `spec`, where the splice starts.
const METADATA: &[PathStep] = &[PathStep::Key("metadata")];
const SPEC: &[PathStep] = &[PathStep::Key("spec")];
/// The members read into [`StrMap`]s rather than the tree.
const MAPS: [&str; 2] = ["labels", "annotations"];

/// A member that is there: `null`, or an object, with where the members read are (in the
/// order of its read list).
enum Part {
    Null,
    Object([Option<Span>; 3]),
}

pub struct PodText<'a> {
    text: &'a str,
    metadata: Option<Part>,
    spec: Option<Part>,
    /// Where `metadata` and `spec` are, for the splice to start there.
    roots: [Option<Root<'static>>; 2],
    /// Where the labels and annotations are, when they are objects.
    labels: Option<Span>,
    annotations: Option<Span>,
    served: bool,
}

/// A pod's labels and annotations.
pub type PodMaps<'a> = (Option<StrMap<'a>>, Option<StrMap<'a>>);

impl<'a> PodText<'a> {
    /// One walk over the pod's text.
    pub fn read(text: &'a str) -> Option<Self> {
        let mut cursor = Cursor::new(text);
        let (mut metadata, mut spec) = (None, None);
        // A fixed array: a pod outside any JobSet is read without allocating.
        let mut roots = [None; 2];
        let (mut labels, mut annotations) = (None, None);
        if cursor.next_byte()? != b'{' {
            return None;
        }
        let mut served = false;
        cursor.object(|c, key| match key {
            _ if key.is("metadata") && metadata.is_none() => {
                let (read, span) = c.spanned(|c| {
                    part(c, &METADATA_READ, |c, name| match name {
                        "labels" => {
                            let span = string_map(c, keys::JOBSET_NAME, &mut served)?;
                            labels = (!span.is_null(text)).then_some(span);
                            Some(span)
                        }
                        "annotations" => {
                            let span = string_map(c, keys::FACTS, &mut served)?;
                            annotations = (!span.is_null(text)).then_some(span);
                            Some(span)
                        }
                        _ => c.skip(),
                    })
                })?;
                metadata = Some(read);
                roots[0] = Some((METADATA, span));
                Some(())
            }
            _ if key.is("spec") && spec.is_none() => {
                let (read, span) = c.spanned(|c| part(c, &SPEC_READ, |c, _| c.skip()))?;
                spec = Some(read);
                roots[1] = Some((SPEC, span));
                Some(())
            }
            // A repeated `metadata` or `spec`.
            _ if key.is("metadata") || key.is("spec") => None,
            _ => c.skip().map(drop),
        })?;
        cursor.at_end().then_some(PodText {
            text,
            metadata,
            spec,
            roots,
            labels,
            annotations,
            served,
        })
    }

    /// Whether the policy serves the pod: a JobSet pod (the `jobset-name` label), or a pod
    /// carrying the policy's facts (an opted-in Job's, docs/spec.md §4.6).
    pub fn is_served(&self) -> bool {
        self.served
    }

    /// Where the pod's `metadata` and `spec` are.
    pub fn roots(&self) -> Vec<Root<'static>> {
        self.roots.iter().flatten().copied().collect()
    }

    /// The labels and annotations, read again from their spans: only a served pod needs them.
    pub fn maps(&self) -> Option<PodMaps<'a>> {
        let read = |span: Option<Span>| match span {
            Some(span) => StrMap::read(self.text, span).map(Some),
            None => Some(None),
        };
        Some((read(self.labels)?, read(self.annotations)?))
    }

    /// The pod with only the members its view reads from a tree: all but the two maps.
    pub fn tree(&self) -> Result<Value, serde_json::Error> {
        let mut root = Map::new();
        for (key, part) in [("metadata", &self.metadata), ("spec", &self.spec)] {
            let value = match part {
                None => continue,
                Some(Part::Null) => Value::Null,
                Some(Part::Object(spans)) => {
                    let names = if key == "metadata" {
                        &METADATA_READ
                    } else {
                        &SPEC_READ
                    };
                    let mut map = Map::new();
                    for (name, span) in names.iter().zip(spans) {
                        let Some(span) = span.filter(|_| !MAPS.contains(name)) else {
                            continue;
                        };
                        let text = span.of(self.text).unwrap_or_default();
                        let value = match *name {
                            "containers" | "initContainers" => container_list(text)?,
                            _ => value_of(text)?,
                        };
                        map.insert(name.to_string(), value);
                    }
                    Value::Object(map)
                }
            };
            root.insert(key.to_string(), value);
        }
        Ok(Value::Object(root))
    }
}

/// The member that comes next: `null`, or an object of which the members named in `read` are
/// walked by `walk` and kept; `None` for anything else, or when one of them is repeated.
fn part<'a>(
    c: &mut Cursor<'a>,
    read: &'static [&'static str; 3],
    mut walk: impl FnMut(&mut Cursor<'a>, &'static str) -> Option<Span>,
) -> Option<Part> {
    if c.next_byte()? != b'{' {
        let span = c.skip()?;
        return span.is_null(c.text()).then_some(Part::Null);
    }
    let mut kept = [None; 3];
    c.object(|c, found| {
        let Some(i) = read.iter().position(|r| found.is(r)) else {
            return c.skip().map(drop);
        };
        if kept[i].is_some() {
            return None;
        }
        kept[i] = Some(walk(c, read[i])?);
        Some(())
    })?;
    Some(Part::Object(kept))
}

/// Labels or annotations: `null`, or an object of strings, noting in `has` whether `key` is
/// among them; `None` for anything else. Its span.
fn string_map(c: &mut Cursor, key: &str, has: &mut bool) -> Option<Span> {
    if c.next_byte()? != b'{' {
        let span = c.skip()?;
        return span.is_null(c.text()).then_some(span);
    }
    c.object(|c, found| {
        c.string_value()?;
        *has |= found.is(key);
        Some(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_tree_holds_only_what_the_view_reads() {
        let text = json!({
            "kind": "Pod",
            "metadata": {"name": "p", "labels": {"jobset.sigs.k8s.io/jobset-name": "js"},
                         "ownerReferences": [{"kind": "Job"}], "managedFields": [{}]},
            "spec": {"subdomain": "s", "containers": [{"name": "c"}], "volumes": [{}]}
        })
        .to_string();
        let pod = PodText::read(&text).unwrap();
        assert!(pod.is_served());
        assert_eq!(
            pod.tree().unwrap(),
            json!({
                "metadata": {"ownerReferences": [{"kind": "Job"}]},
                "spec": {"subdomain": "s", "containers": [{"name": "c"}]}
            })
        );
        assert_eq!(
            pod.maps().unwrap().0.unwrap().to_value(),
            json!({"jobset.sigs.k8s.io/jobset-name": "js"})
        );
    }

    #[test]
    fn served_by_the_label_or_the_facts_and_not_by_a_null() {
        let served = |metadata: Value| {
            let text = json!({"metadata": metadata, "spec": {}}).to_string();
            PodText::read(&text).unwrap().is_served()
        };
        assert!(served(
            json!({"annotations": {"multislice.kubewarden.io/facts": "{}"}})
        ));
        assert!(!served(
            json!({"labels": {"app": "x"}, "annotations": null})
        ));
        assert!(!served(json!({"labels": {"app": "x"}})));
        assert!(!served(Value::Null));
    }

    #[test]
    fn unexpected_shapes_are_left_to_the_whole_reading() {
        for text in [
            r#"[{"metadata": {}}]"#,
            r#"{"metadata": "x"}"#,
            r#"{"metadata": {"labels": []}}"#,
            r#"{"metadata": {}, "metadata": {}}"#,
            r#"{"metadata": {"labels": {"jobset.sigs.k8s.io/jobset-name": null}}}"#,
            r#"{"spec": {"containers": [], "containers": []}}"#,
            r#"{"spec": 1}"#,
        ] {
            assert!(PodText::read(text).is_none(), "{text}");
        }
    }
}
