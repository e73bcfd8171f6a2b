//! What is at the end of a written path, compared with the tree: the edits that turn the
//! text's value into the tree's, in the order of the text.
use crate::json_text::{compact, Cursor, Span};
use serde_json::{Number, Value};

/// Bytes that take the place of `at` (an empty span for an insertion).
pub(super) struct Edit {
    pub(super) at: Span,
    pub(super) bytes: Vec<u8>,
}

fn written(value: &Value) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(128);
    compact::value(&mut bytes, value);
    bytes
}

/// `members` added last to the object at `span`, which has `written_members` of its own:
/// written before its closing brace, with a comma only between members.
pub(super) fn add_members<'v>(
    edits: &mut Vec<Edit>,
    span: Span,
    written_members: usize,
    members: impl Iterator<Item = (&'v String, &'v Value)>,
) -> Option<()> {
    let mut bytes = Vec::new();
    for (key, value) in members {
        if bytes.is_empty() {
            // Room for a member of a few keys, rather than grow a few times on the way.
            bytes.reserve(128);
        }
        if written_members > 0 || !bytes.is_empty() {
            bytes.push(b',');
        }
        compact::string(&mut bytes, key);
        bytes.push(b':');
        compact::value(&mut bytes, value);
    }
    if !bytes.is_empty() {
        let at = span.end.checked_sub(1)?;
        edits.push(Edit {
            at: Span { start: at, end: at },
            bytes,
        });
    }
    Some(())
}

/// `tree` written in place of `at`.
fn rewrite(edits: &mut Vec<Edit>, at: Span, tree: &Value) -> Option<Span> {
    edits.push(Edit {
        at,
        bytes: written(tree),
    });
    Some(at)
}

/// Walks the value that comes next, collecting, in the order of the text, the edits that turn
/// it into `tree`. Its span.
pub(super) fn diff(cursor: &mut Cursor, tree: &Value, edits: &mut Vec<Edit>) -> Option<Span> {
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
            let missing = map.iter().filter(|(k, _)| !found.contains(&k.as_str()));
            add_members(edits, span, written_members, missing)?;
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
                    compact::value(&mut bytes, item);
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
                    bytes: written(tree),
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
    use super::super::splice;
    use super::super::tests::whole;
    use super::*;
    use serde_json::json;

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
}
