//! The mutated object written as the request's own bytes, with only what changed replaced
//! (issue 30). Serialising the whole tree cost a TPU pod's admission a seventh of its time
//! natively, and more in wasm, where every string written is a copy out of the module; and a
//! pod's tree may now hold only the parts its view read. This file walks down the paths
//! written; `compare` compares what is at the end of one with the tree.
mod compare;

use crate::json_text::{Cursor, Span};
pub use crate::json_text::{Path, PathStep, Root};
use compare::{add_members, diff, Edit};
use serde_json::{Map, Value};

/// Where a mutation wrote: the path to each value it edited.
pub type Written = Vec<Path<'static>>;

/// `tree` written as `text` with only what differs under `written` replaced: members the tree
/// has and the text lacks are added last in their object, values that differ are written anew,
/// and the rest is the text's own bytes, skipped unread. Members of the text that the tree
/// lacks are kept: the tree may hold only the parts the policy read, and the policy's
/// mutations only add (docs/spec.md §4.5). One walk over the text; `None` when it is not one
/// JSON value. `roots` are values of the text already found, all as deep: when every path
/// goes through one of them, the walk starts there, and the rest of the object, read once
/// already, is not read again. The reader that finds them must find each value once only (of
/// a repeated key, the splice rewrites every occurrence), and only roots that repeat no key:
/// the walk of a root object stops once it has found the first step of every path.
pub fn splice(text: &str, tree: &Value, written: &[Path], roots: &[Root]) -> Option<Vec<u8>> {
    let mut edits = Vec::new();
    let paths: Vec<&[PathStep]> = written.iter().map(Vec::as_slice).collect();
    let span = match from_roots(text, tree, &paths, roots, &mut edits) {
        Some(span) => span,
        None => {
            edits.clear();
            let mut cursor = Cursor::new(text);
            let span = walk(&mut cursor, tree, &paths, &mut edits, None)?;
            cursor.at_end().then_some(span)?
        }
    };
    let mut out = Vec::with_capacity(text.len().saturating_add(1024));
    let mut copied = span.start;
    for edit in edits {
        out.extend_from_slice(text.as_bytes().get(copied..edit.at.start)?);
        out.extend_from_slice(&edit.bytes);
        copied = edit.at.end;
    }
    out.extend_from_slice(text.as_bytes().get(copied..span.end)?);
    Some(out)
}

/// The edits under `roots`, each walked from where it is; `None` when a path goes through
/// none of them. The whole text's span.
fn from_roots(
    text: &str,
    tree: &Value,
    paths: &[&[PathStep]],
    roots: &[Root],
    edits: &mut Vec<Edit>,
) -> Option<Span> {
    let depth = roots.first()?.0.len();
    if paths.is_empty() || roots.iter().any(|(at, _)| at.len() != depth) {
        return None;
    }
    // The roots by path, to find each path's in a JobSet of thousands of replicated jobs.
    let mut by_path: Vec<&Root> = roots.iter().collect();
    by_path.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut under = Vec::with_capacity(paths.len());
    // Paths come in the order of their roots, most often: the root after the last one found
    // is tried before a search.
    let mut next = 0;
    for path in paths {
        let (head, rest) = (path.get(..depth)?, path.get(depth..)?);
        let found = match by_path.get(next) {
            Some((at, _)) if *at == head => next,
            _ => by_path.binary_search_by(|(at, _)| (*at).cmp(head)).ok()?,
        };
        let (at, span) = *by_path.get(found)?;
        under.push((span, at, rest));
        next = found.saturating_add(1);
    }
    // In the order of the text, as the edits must be; the paths under one root together.
    under.sort_by_key(|(span, _, _)| span.start);
    let mut descent = Descent::new(tree);
    for group in under.chunk_by(|a, b| a.0 == b.0) {
        let (span, at, _) = *group.first()?;
        let below: Vec<&[PathStep]> = group.iter().map(|(_, _, rest)| *rest).collect();
        let mut cursor = Cursor::at(text, span.start);
        walk(&mut cursor, descent.to(at)?, &below, edits, Some(*span))?;
    }
    let start = text.len() - text.trim_start().len();
    Some(Span {
        start,
        end: text.trim_end().len(),
    })
}

/// The tree's values down the last path asked for, so that the next is found from where the
/// two part: the pod templates of a JobSet share their first steps.
struct Descent<'t, 'p> {
    /// The steps taken, and the value after each; `values[0]` is the tree.
    steps: &'p [PathStep<'p>],
    values: Vec<&'t Value>,
}

impl<'t, 'p> Descent<'t, 'p> {
    fn new(tree: &'t Value) -> Self {
        let mut values = Vec::with_capacity(8);
        values.push(tree);
        Descent { steps: &[], values }
    }

    /// The tree's value at `path`.
    fn to(&mut self, path: &'p [PathStep<'p>]) -> Option<&'t Value> {
        let shared = self
            .steps
            .iter()
            .zip(path)
            .take_while(|(a, b)| a == b)
            .count();
        self.values.truncate(shared.checked_add(1)?);
        // Taken only once the whole path is found, so that `values` always follow `steps`.
        self.steps = &[];
        for step in path.get(shared..)? {
            let value = *self.values.last()?;
            let next = match step {
                PathStep::Key(key) => value.as_object()?.get(*key),
                PathStep::Index(i) => value.as_array()?.get(*i),
            };
            self.values.push(next?);
        }
        self.steps = path;
        self.values.last().copied()
    }
}

/// Walks the value that comes next down `paths` (what is left of each written path from here):
/// the value at the end of a path is compared whole ([`diff`]), and whatever no path leads
/// into is skipped. Its span. `known` is that span when a reader found it already (a root): an
/// object is then walked only until every path's first step is found (a pod template's
/// `metadata` comes before its `spec`, which is most of it and is then not read).
fn walk(
    cursor: &mut Cursor,
    tree: &Value,
    paths: &[&[PathStep]],
    edits: &mut Vec<Edit>,
    known: Option<Span>,
) -> Option<Span> {
    if paths.iter().any(|p| p.is_empty()) {
        return diff(cursor, tree, edits);
    }
    match (tree, cursor.next_byte()?) {
        (Value::Object(map), b'{') => walk_object(cursor, map, paths, edits, known),
        (Value::Array(items), b'[') => {
            // The paths by the index they go through, read once: a JobSet of thousands of
            // replicated jobs has a path through each.
            let mut by_index: Vec<(usize, &[PathStep])> = paths
                .iter()
                .filter_map(|p| match p.split_first()? {
                    (PathStep::Index(i), rest) => Some((*i, rest)),
                    _ => None,
                })
                .collect();
            by_index.sort_by_key(|(i, _)| *i);
            let mut next = 0;
            cursor.array(|c, i| {
                let from = next;
                while by_index.get(next).is_some_and(|(j, _)| *j <= i) {
                    next += 1;
                }
                let below: Vec<&[PathStep]> = by_index
                    .get(from..next)?
                    .iter()
                    .filter(|(j, _)| *j == i)
                    .map(|(_, rest)| *rest)
                    .collect();
                match items.get(i) {
                    Some(item) if !below.is_empty() => walk(c, item, &below, edits, None).map(drop),
                    _ => c.skip().map(drop),
                }
            })
        }
        // The mutation made a value of another kind here (an object where there was `null`).
        _ => diff(cursor, tree, edits),
    }
}

/// The object that comes next, walked down `paths`. With its span `known`, the walk stops once
/// every path's first step is found: the rest of the object holds none of them again.
fn walk_object(
    cursor: &mut Cursor,
    map: &Map<String, Value>,
    paths: &[&[PathStep]],
    edits: &mut Vec<Edit>,
    known: Option<Span>,
) -> Option<Span> {
    let wanted = known.map(|_| {
        let mut keys: Vec<&str> = paths
            .iter()
            .filter_map(|p| match p.first()? {
                PathStep::Key(key) => Some(*key),
                PathStep::Index(_) => None,
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys.len()
    });
    let mut found: Vec<&str> = Vec::new();
    let mut written_members = 0usize;
    let mut stopped = false;
    let walked = cursor.object(|c, key| {
        written_members += 1;
        let below = rest_after(paths, |step| match step {
            PathStep::Key(name) => key.is(name),
            PathStep::Index(_) => false,
        });
        if below.is_empty() {
            return c.skip().map(drop);
        }
        let Some((name, value)) = map.get_key_value(key.unescaped()?.as_ref()) else {
            return c.skip().map(drop);
        };
        if !found.contains(&name.as_str()) {
            found.push(name);
        }
        walk(c, value, &below, edits, None)?;
        stopped = wanted == Some(found.len());
        (!stopped).then_some(())
    });
    let span = match (walked, known) {
        (Some(span), _) => span,
        (None, Some(span)) if stopped => span,
        _ => return None,
    };
    // A path through a member the text lacks: the tree's member is added whole.
    let mut missing = Vec::new();
    for path in paths {
        let Some(PathStep::Key(step)) = path.first() else {
            continue;
        };
        if found.contains(step) {
            continue;
        }
        found.push(step);
        if let Some(member) = map.get_key_value(*step) {
            missing.push(member);
        }
    }
    add_members(edits, span, written_members, missing.into_iter())?;
    Some(span)
}

/// What is left of the paths whose next step `matches`.
fn rest_after<'p, 'k>(
    paths: &[&'p [PathStep<'k>]],
    matches: impl Fn(&PathStep) -> bool,
) -> Vec<&'p [PathStep<'k>]> {
    paths
        .iter()
        .filter_map(|p| {
            let (first, rest) = p.split_first()?;
            matches(first).then_some(rest)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The root: the whole tree is compared.
    pub(super) fn whole() -> Written {
        vec![vec![]]
    }

    /// A path written as keys, a number for a list's element.
    pub(crate) fn path(steps: &[&'static str]) -> Path<'static> {
        steps
            .iter()
            .map(|s| s.parse().map_or(PathStep::Key(s), PathStep::Index))
            .collect()
    }

    #[test]
    fn only_the_written_paths_are_read_and_a_missing_member_on_one_is_added() {
        let text = r#"{"kind":"Pod","metadata":{"labels":{"a":"1"}},"spec":{"containers":[{"name":"c"},{"name":"d","env":[]}],"volumes":[{"name":"v"}]}}"#;
        // The tree holds only what was read: `kind` is absent, and `labels` was never read.
        let tree = json!({
            "metadata": {"labels": {"b": "2"}, "annotations": {"x": "y"}},
            "spec": {"containers": [{"name": "c", "env": [{"name": "A"}]}, {"name": "other", "env": [{"name": "B"}]}]}
        });
        let written = vec![
            path(&["metadata", "labels"]),
            path(&["metadata", "annotations"]),
            path(&["spec", "containers", "0", "env"]),
            path(&["spec", "containers", "1", "env"]),
        ];
        let out = String::from_utf8(splice(text, &tree, &written, &[]).unwrap()).unwrap();
        let metadata = text.find(r#"{"labels""#).unwrap();
        let spec = text.find(r#"{"containers""#).unwrap();
        let roots = [
            (
                &path(&["metadata"])[..],
                Span {
                    start: metadata,
                    end: spec - 8,
                },
            ),
            (
                &path(&["spec"])[..],
                Span {
                    start: spec,
                    end: text.len() - 1,
                },
            ),
        ];
        let from_roots = splice(text, &tree, &written, &roots).unwrap();
        assert_eq!(String::from_utf8(from_roots).unwrap(), out);
        assert_eq!(
            out,
            r#"{"kind":"Pod","metadata":{"labels":{"a":"1","b":"2"},"annotations":{"x":"y"}},"spec":{"containers":[{"name":"c","env":[{"name":"A"}]},{"name":"d","env":[{"name":"B"}]}],"volumes":[{"name":"v"}]}}"#
        );
    }

    /// A root's walk stops once it has found every path's first step; what it has not read
    /// is copied as it is, and a path through a member the root lacks is added at its end,
    /// which the reader found.
    #[test]
    fn a_root_is_walked_until_every_path_is_found_and_its_end_is_where_the_reader_found_it() {
        let text = r#"{"t":{"metadata":{"labels":{"a":"1"}},"spec":{"containers":[{"name":"c"}]},"x":[1]}}"#;
        let start = text.find(r#"{"metadata""#).unwrap();
        let root = [(
            &path(&["t"])[..],
            Span {
                start,
                end: text.len() - 1,
            },
        )];
        let splices = |tree: &Value, written: &Written| {
            let from_root = splice(text, tree, written, &root).unwrap();
            let whole = splice(text, tree, written, &[]).unwrap();
            assert_eq!(from_root, whole);
            String::from_utf8(from_root).unwrap()
        };
        let labels = vec![path(&["t", "metadata", "labels"])];
        let tree = json!({"t": {"metadata": {"labels": {"a": "1", "b": "2"}}}});
        assert_eq!(
            splices(&tree, &labels),
            r#"{"t":{"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"containers":[{"name":"c"}]},"x":[1]}}"#
        );
        // `affinity` in a `spec` the root has, `y` in none: both walked to the end.
        let written = vec![
            path(&["t", "metadata", "labels"]),
            path(&["t", "spec", "affinity"]),
            path(&["t", "y"]),
        ];
        let tree = json!({"t": {"metadata": {"labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c"}], "affinity": {}}, "y": 2}});
        assert_eq!(
            splices(&tree, &written),
            r#"{"t":{"metadata":{"labels":{"a":"1"}},"spec":{"containers":[{"name":"c"}],"affinity":{}},"x":[1],"y":2}}"#
        );
    }

    #[test]
    fn a_text_that_is_no_json_value_gives_none() {
        for text in [
            "",
            "{",
            r#"{"a":}"#,
            "[1,",
            r#""open"#,
            "{} x",
            r#"{"a":1,}"#,
        ] {
            assert!(
                splice(text, &json!({}), &whole(), &[]).is_none(),
                "{text:?}"
            );
        }
    }
}
