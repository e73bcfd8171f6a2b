//! The mutated object written as the request's own bytes, with only what changed replaced
//! (issue 30). Serialising the whole tree cost a TPU pod's admission a seventh of its time
//! natively, and more in wasm, where every string written is a copy out of the module; and a
//! pod's tree may now hold only the parts its view read.
use crate::json_text::{Cursor, Span};
use serde_json::{Number, Value};

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

/// Bytes that take the place of `at` (an empty span for an insertion).
struct Edit {
    at: Span,
    bytes: Vec<u8>,
}

fn written(value: &impl serde::Serialize) -> Option<Vec<u8>> {
    serde_json::to_vec(value).ok()
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
            let mut bytes = Vec::new();
            for path in paths {
                let Some(step) = path.first() else { continue };
                if found.contains(&step.as_str()) {
                    continue;
                }
                found.push(step);
                let Some(value) = map.get(step) else { continue };
                if written_members > 0 || !bytes.is_empty() {
                    bytes.push(b',');
                }
                bytes.extend(written(step)?);
                bytes.push(b':');
                bytes.extend(written(value)?);
            }
            if !bytes.is_empty() {
                let at = span.end.checked_sub(1)?;
                edits.push(Edit {
                    at: Span { start: at, end: at },
                    bytes,
                });
            }
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

/// `tree` written in place of `at`.
fn rewrite(edits: &mut Vec<Edit>, at: Span, tree: &Value) -> Option<Span> {
    edits.push(Edit {
        at,
        bytes: written(tree)?,
    });
    Some(at)
}

/// Walks the value that comes next, collecting, in the order of the text, the edits that turn
/// it into `tree`. Its span.
fn diff(cursor: &mut Cursor, tree: &Value, edits: &mut Vec<Edit>) -> Option<Span> {
    let text = cursor.text();
    match (tree, cursor.next_byte()?) {
        (Value::Object(map), b'{') => {
            // The tree's keys the text has; a repeated key is walked each time.
            let mut found: Vec<&str> = Vec::new();
            let mut written_members = 0usize;
            let span = cursor.object(|c, key| {
                written_members += 1;
                match map.get_key_value(key.unescaped()?.as_ref()) {
                    Some((key, value)) => {
                        if !found.contains(&key.as_str()) {
                            found.push(key);
                        }
                        diff(c, value, edits).map(drop)
                    }
                    None => c.skip().map(drop),
                }
            })?;
            if found.len() < map.len() {
                let mut bytes = Vec::new();
                for (key, value) in map.iter().filter(|(k, _)| !found.contains(&k.as_str())) {
                    if written_members > 0 || !bytes.is_empty() {
                        bytes.push(b',');
                    }
                    bytes.extend(written(key)?);
                    bytes.push(b':');
                    bytes.extend(written(value)?);
                }
                // Before the closing brace.
                let at = span.end.checked_sub(1)?;
                edits.push(Edit {
                    at: Span { start: at, end: at },
                    bytes,
                });
            }
            Some(span)
        }
        (Value::Array(items), b'[') => {
            // The elements first, counted by a skim: only an array of the same length is
            // compared element by element.
            let mut elements = Vec::new();
            let mut skim = cursor.clone();
            let span = skim.array(|c, _| {
                elements.push(c.skip()?);
                Some(())
            })?;
            *cursor = skim;
            let Some(added) = items.len().checked_sub(elements.len()) else {
                return rewrite(edits, span, tree);
            };
            // Elements put first (env entries, docs/spec.md §4.2): when the rest are the text's
            // own, only the new ones are written, after `[`.
            let mark = edits.len();
            for (at, item) in elements.iter().zip(items.get(added..)?) {
                diff(&mut Cursor::at(text, at.start), item, edits)?;
            }
            if added > 0 {
                if edits.len() > mark {
                    edits.truncate(mark);
                    return rewrite(edits, span, tree);
                }
                let mut bytes = Vec::new();
                for item in items.get(..added)? {
                    if !bytes.is_empty() {
                        bytes.push(b',');
                    }
                    bytes.extend(written(item)?);
                }
                if !elements.is_empty() {
                    bytes.push(b',');
                }
                let after_bracket = span.start.checked_add(1)?;
                edits.insert(
                    mark,
                    Edit {
                        at: Span {
                            start: after_bracket,
                            end: after_bracket,
                        },
                        bytes,
                    },
                );
            }
            Some(span)
        }
        _ => {
            let span = cursor.skip()?;
            if !scalar_is(text, span, tree) {
                edits.push(Edit {
                    at: span,
                    bytes: written(tree)?,
                });
            }
            Some(span)
        }
    }
}

/// Whether the scalar written at `span` is `scalar`.
fn scalar_is(text: &str, span: Span, scalar: &Value) -> bool {
    let Some(written) = span.of(text) else {
        return false;
    };
    match scalar {
        Value::Null => written == "null",
        Value::Bool(b) => written == if *b { "true" } else { "false" },
        Value::Number(n) => serde_json::from_str::<Number>(written).is_ok_and(|w| w == *n),
        Value::String(s) => match written.strip_prefix('"').and_then(|w| w.strip_suffix('"')) {
            Some(raw) if !raw.contains('\\') => raw == s,
            Some(_) => serde_json::from_str::<String>(written).is_ok_and(|w| w == *s),
            None => false,
        },
        Value::Array(_) | Value::Object(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The root: the whole tree is compared.
    fn whole() -> Written {
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

    fn spliced(text: &str, tree: Value) -> String {
        let out = String::from_utf8(splice(text, &tree, &whole(), &[]).unwrap()).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), tree, "{out}");
        out
    }

    #[test]
    fn an_unchanged_tree_is_the_text_itself() {
        let text = r#" {"b": [1, 2.50, "x\u00e9"], "a": {"k": null, "t": true}} "#;
        let tree: Value = serde_json::from_str(text).unwrap();
        assert_eq!(spliced(text, tree), text.trim());
    }

    #[test]
    fn added_members_go_last_and_changed_values_are_rewritten() {
        let text = r#"{"metadata": {"labels": {"a": "1"}}, "spec": {"containers": [{"name": "c", "env": null}]}}"#;
        let mut tree: Value = serde_json::from_str(text).unwrap();
        tree["metadata"]["labels"]["b"] = json!("2");
        tree["metadata"]["annotations"] = json!({"x": "y"});
        tree["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
        assert_eq!(
            spliced(text, tree),
            r#"{"metadata": {"labels": {"a": "1","b":"2"},"annotations":{"x":"y"}}, "spec": {"containers": [{"name": "c", "env": [{"name":"A","value":"1"}]}]}}"#
        );
    }

    #[test]
    fn entries_put_first_are_inserted_and_an_empty_object_gets_no_comma() {
        let text = r#"{"env":[ {"name": "U"} ],"e":[],"m":{}}"#;
        let tree = json!({"env": [{"name": "A"}, {"name": "U"}], "e": [1], "m": {"k": "v"}});
        assert_eq!(
            spliced(text, tree),
            r#"{"env":[{"name":"A"}, {"name": "U"} ],"e":[1],"m":{"k":"v"}}"#
        );
    }

    #[test]
    fn an_array_changed_otherwise_is_written_anew() {
        let text = r#"{"appended":[ 1 ],"shorter":[1, 2],"changed":[1, 2]}"#;
        let tree = json!({"appended": [1, 2], "shorter": [1], "changed": [0, 1, 3]});
        assert_eq!(
            spliced(text, tree),
            r#"{"appended":[1,2],"shorter":[1],"changed":[0,1,3]}"#
        );
    }

    #[test]
    fn members_the_tree_lacks_are_kept_and_a_repeated_key_is_written_each_time() {
        let text = r#"{"kind":"Pod","a":{"x":1},"a":{"x":2}}"#;
        let out = String::from_utf8(splice(text, &json!({"a": {"x": 3}}), &whole(), &[]).unwrap())
            .unwrap();
        assert_eq!(out, r#"{"kind":"Pod","a":{"x":3},"a":{"x":3}}"#);
    }

    #[test]
    fn escaped_keys_and_strings_compare_by_their_meaning() {
        let text = r#"{"k\u0065y":"v\"1"}"#;
        let tree: Value = serde_json::from_str(text).unwrap();
        assert_eq!(spliced(text, tree), text);
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
