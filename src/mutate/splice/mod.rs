//! The mutated object written as the request's own bytes, with only what changed replaced
//! (issue 30). Serialising the whole tree cost a TPU pod's admission a seventh of its time
//! natively, and more in wasm, where every string written is a copy out of the module; and a
//! pod's tree may now hold only the parts its view read. This file walks down the paths
//! written; [`compare`] compares what is at the end of one with the tree.
mod compare;

use crate::json_text::{Cursor, Span};
use compare::{add_members, diff, Edit};
use serde_json::Value;

/// Where a mutation wrote: the steps from the object's root (keys, and list indexes written
/// as numbers) to each value it edited.
pub type Written = Vec<Vec<String>>;

/// `tree` written as `text` with only what differs under `written` replaced: members the tree
/// has and the text lacks are added last in their object, values that differ are written anew,
/// and the rest is the text's own bytes, skipped unread. Members of the text that the tree
/// lacks are kept: the tree may hold only the parts the policy read, and the policy's
/// mutations only add (docs/spec.md §4.5). One walk over the text; `None` when it is not one
/// JSON value. `roots` are members of the root already found (their key and where their value
/// is): when every path starts at one of them, the walk starts there, and the rest of the
/// object, read once already, is not read again.
pub fn splice(
    text: &str,
    tree: &Value,
    written: &Written,
    roots: &[(&str, Span)],
) -> Option<Vec<u8>> {
    let mut edits = Vec::new();
    let paths: Vec<&[String]> = written.iter().map(Vec::as_slice).collect();
    let span = match from_roots(text, tree, &paths, roots, &mut edits) {
        Some(span) => span,
        None => {
            edits.clear();
            let mut cursor = Cursor::new(text);
            let span = walk(&mut cursor, tree, &paths, &mut edits)?;
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

/// The edits under `roots`, walked from where they are; `None` when a path starts elsewhere.
/// The whole text's span.
fn from_roots(
    text: &str,
    tree: &Value,
    paths: &[&[String]],
    roots: &[(&str, Span)],
    edits: &mut Vec<Edit>,
) -> Option<Span> {
    let starts_at_a_root =
        |p: &&[String]| p.first().is_some_and(|s| roots.iter().any(|(k, _)| k == s));
    if paths.is_empty() || !paths.iter().all(starts_at_a_root) {
        return None;
    }
    let mut roots = roots.to_vec();
    roots.sort_by_key(|(_, span)| span.start);
    for (key, span) in roots {
        let below = rest_after(paths, |step| step == key);
        if below.is_empty() {
            continue;
        }
        walk(
            &mut Cursor::at(text, span.start),
            tree.get(key)?,
            &below,
            edits,
        )?;
    }
    let start = text.len() - text.trim_start().len();
    Some(Span {
        start,
        end: text.trim_end().len(),
    })
}

/// Walks the value that comes next down `paths` (what is left of each written path from here):
/// the value at the end of a path is compared whole ([`diff`]), and whatever no path leads
/// into is skipped. Its span.
fn walk(
    cursor: &mut Cursor,
    tree: &Value,
    paths: &[&[String]],
    edits: &mut Vec<Edit>,
) -> Option<Span> {
    if paths.iter().any(|p| p.is_empty()) {
        return diff(cursor, tree, edits);
    }
    match (tree, cursor.next_byte()?) {
        (Value::Object(map), b'{') => {
            let mut found: Vec<&str> = Vec::new();
            let mut written_members = 0usize;
            let span = cursor.object(|c, key| {
                written_members += 1;
                let below = rest_after(paths, |step| key.is(step));
                if below.is_empty() {
                    return c.skip().map(drop);
                }
                let Some((name, value)) = map.get_key_value(key.unescaped()?.as_ref()) else {
                    return c.skip().map(drop);
                };
                if !found.contains(&name.as_str()) {
                    found.push(name);
                }
                walk(c, value, &below, edits).map(drop)
            })?;
            // A path through a member the text lacks: the tree's member is added whole.
            let mut missing = Vec::new();
            for path in paths {
                let Some(step) = path.first() else { continue };
                if found.contains(&step.as_str()) {
                    continue;
                }
                found.push(step);
                if let Some(member) = map.get_key_value(step) {
                    missing.push(member);
                }
            }
            add_members(edits, span, written_members, missing.into_iter())?;
            Some(span)
        }
        (Value::Array(items), b'[') => {
            // The paths by the index they go through, read once: a JobSet of thousands of
            // replicated jobs has a path through each.
            let mut by_index: Vec<(usize, &[String])> = paths
                .iter()
                .filter_map(|p| {
                    let (first, rest) = p.split_first()?;
                    Some((first.parse().ok()?, rest))
                })
                .collect();
            by_index.sort_by_key(|(i, _)| *i);
            let mut next = 0;
            cursor.array(|c, i| {
                let from = next;
                while by_index.get(next).is_some_and(|(j, _)| *j <= i) {
                    next += 1;
                }
                let below: Vec<&[String]> = by_index
                    .get(from..next)?
                    .iter()
                    .filter(|(j, _)| *j == i)
                    .map(|(_, rest)| *rest)
                    .collect();
                match items.get(i) {
                    Some(item) if !below.is_empty() => walk(c, item, &below, edits).map(drop),
                    _ => c.skip().map(drop),
                }
            })
        }
        // The mutation made a value of another kind here (an object where there was `null`).
        _ => diff(cursor, tree, edits),
    }
}

/// What is left of the paths whose next step `matches`.
fn rest_after<'p>(paths: &[&'p [String]], matches: impl Fn(&str) -> bool) -> Vec<&'p [String]> {
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

    fn path(steps: &[&str]) -> Vec<String> {
        steps.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_the_written_paths_are_read_and_a_missing_member_on_one_is_added() {
        let text = r#"{"kind":"Pod","metadata":{"labels":{"a":"1"}},"spec":{"containers":[{"name":"c"},{"name":"d","env":[]}]}}"#;
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
                "metadata",
                Span {
                    start: metadata,
                    end: spec - 8,
                },
            ),
            (
                "spec",
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
            r#"{"kind":"Pod","metadata":{"labels":{"a":"1","b":"2"},"annotations":{"x":"y"}},"spec":{"containers":[{"name":"c","env":[{"name":"A"}]},{"name":"d","env":[{"name":"B"}]}]}}"#
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
