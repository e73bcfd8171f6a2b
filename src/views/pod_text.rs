//! A pod read from the request's text (issue 30): whether the policy serves it, from two keys,
//! and a tree of only the parts [`PodView`](super::pod_view::PodView) reads (the labels,
//! annotations and owner references; the subdomain and containers). The rest of a pod (its
//! volumes, affinity, tolerations, managed fields) is skipped, never built into a tree.
//!
//! A shape this reading does not expect (a key repeated on the way, `metadata` or `labels` of
//! the wrong type) gives `None`: the caller then reads the pod whole, as before, so that its
//! view names the problem in the same words.
use crate::json_text::{Cursor, Span};
use crate::keys;
use serde_json::{Map, Value};

/// The members of `metadata` and of `spec` that the pod's view reads.
const METADATA_READ: [&str; 3] = ["labels", "annotations", "ownerReferences"];
const SPEC_READ: [&str; 3] = ["subdomain", "containers", "initContainers"];

/// A member that is there: `null`, or an object, with where the members read are.
enum Part {
    Null,
    Object(Vec<(&'static str, Span)>),
}

pub struct PodText<'a> {
    text: &'a str,
    metadata: Option<Part>,
    spec: Option<Part>,
    served: bool,
}

impl<'a> PodText<'a> {
    /// One walk over the pod's text.
    pub fn read(text: &'a str) -> Option<Self> {
        let mut cursor = Cursor::new(text);
        let (mut metadata, mut spec, mut served) = (None, None, false);
        if cursor.next_byte()? != b'{' {
            return None;
        }
        cursor.object(|c, key| match key {
            _ if key.is("metadata") && metadata.is_none() => {
                metadata = Some(part(c, &METADATA_READ, |c, key| match key {
                    "labels" => map_having(c, keys::JOBSET_NAME, &mut served),
                    "annotations" => map_having(c, keys::FACTS, &mut served),
                    _ => c.skip(),
                })?);
                Some(())
            }
            _ if key.is("spec") && spec.is_none() => {
                spec = Some(part(c, &SPEC_READ, |c, _| c.skip())?);
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
            served,
        })
    }

    /// Whether the policy serves the pod: a JobSet pod (the `jobset-name` label), or a pod
    /// carrying the policy's facts (an opted-in Job's, docs/spec.md §4.6).
    pub fn is_served(&self) -> bool {
        self.served
    }

    /// The pod with only the members its view reads.
    pub fn tree(&self) -> Result<Value, serde_json::Error> {
        let mut root = Map::new();
        for (key, part) in [("metadata", &self.metadata), ("spec", &self.spec)] {
            let value = match part {
                None => continue,
                Some(Part::Null) => Value::Null,
                Some(Part::Object(read)) => {
                    let mut map = Map::new();
                    for (key, span) in read {
                        let text = span.of(self.text).unwrap_or_default();
                        map.insert(key.to_string(), serde_json::from_str(text)?);
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
fn part(
    c: &mut Cursor,
    read: &'static [&'static str],
    mut walk: impl FnMut(&mut Cursor, &'static str) -> Option<Span>,
) -> Option<Part> {
    if c.next_byte()? != b'{' {
        let span = c.skip()?;
        return span.is_null(c.text()).then_some(Part::Null);
    }
    let mut kept: Vec<(&'static str, Span)> = Vec::new();
    c.object(|c, found| {
        let Some(name) = read.iter().find(|r| found.is(r)) else {
            return c.skip().map(drop);
        };
        if kept.iter().any(|(k, _)| k == name) {
            return None;
        }
        kept.push((name, walk(c, name)?));
        Some(())
    })?;
    Some(Part::Object(kept))
}

/// Labels or annotations: `null`, or an object, noting in `has` whether `key` is set (and not
/// `null`); `None` for anything else, or when `key` is repeated. Its span.
fn map_having(c: &mut Cursor, key: &str, has: &mut bool) -> Option<Span> {
    if c.next_byte()? != b'{' {
        let span = c.skip()?;
        return span.is_null(c.text()).then_some(span);
    }
    let mut seen = false;
    c.object(|c, found| {
        if !found.is(key) {
            return c.skip().map(drop);
        }
        if seen {
            return None;
        }
        seen = true;
        let value = c.skip()?;
        *has |= !value.is_null(c.text());
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
                "metadata": {"labels": {"jobset.sigs.k8s.io/jobset-name": "js"},
                             "ownerReferences": [{"kind": "Job"}]},
                "spec": {"subdomain": "s", "containers": [{"name": "c"}]}
            })
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
            json!({"labels": {"jobset.sigs.k8s.io/jobset-name": null}, "annotations": null})
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
            r#"{"metadata": {"labels": {"jobset.sigs.k8s.io/jobset-name": "a", "jobset.sigs.k8s.io/jobset-name": "b"}}}"#,
            r#"{"spec": {"containers": [], "containers": []}}"#,
            r#"{"spec": 1}"#,
        ] {
            assert!(PodText::read(text).is_none(), "{text}");
        }
    }
}
