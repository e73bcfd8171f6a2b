//! A pod's labels or annotations, every value a string: borrowed from the request's text
//! (unescaped only where a key or value has an escape), or from a tree. A pod's plan reads a
//! dozen of its keys; building them into a `serde_json` map cost a TPU pod's admission a
//! quarter of its time in wasm, every key and value a copy out of the module (issue 30).
use crate::json::Object;
use crate::json_text::{Cursor, Span};
use serde_json::Value;
use std::borrow::Cow;

#[derive(Debug, Default, PartialEq)]
pub struct StrMap<'a> {
    /// In the order written; of a repeated key, the last counts, as a JSON reader keeps it.
    entries: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

impl<'a> StrMap<'a> {
    /// A map read as a tree, whose values are known to be strings (`json::opt_string_map`).
    pub fn from_object(object: &'a Object) -> Self {
        let entries = object
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
            .collect();
        StrMap { entries }
    }

    /// The object of strings at `span` of `text`; `None` when it is not one.
    pub fn read(text: &'a str, span: Span) -> Option<Self> {
        let mut entries = Vec::with_capacity(16);
        Cursor::at(text, span.start).object(|c, key| {
            entries.push((key.unescaped()?, c.string_value()?.unescaped()?));
            Some(())
        })?;
        Some(StrMap { entries })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }

    /// The same map as a tree, for a test to compare.
    pub fn to_value(&self) -> Value {
        let mut map = Object::new();
        for (k, v) in &self.entries {
            map.insert(k.to_string(), Value::String(v.to_string()));
        }
        Value::Object(map)
    }
}

/// A value of an optional map (see [`StrMap::get`]).
pub fn get<'m>(map: Option<&'m StrMap>, key: &str) -> Option<&'m str> {
    map.and_then(|m| m.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_text_and_the_tree_give_the_same_map() {
        let text = r#"{"a": "1", "k\u0065y": "v\"w", "a": "2"}"#;
        let whole = Span {
            start: 0,
            end: text.len(),
        };
        let from_text = StrMap::read(text, whole).unwrap();
        assert!(StrMap::read(r#"{"a": 1}"#, whole).is_none());
        let tree: Value = serde_json::from_str(text).unwrap();
        let from_tree = StrMap::from_object(tree.as_object().unwrap());
        assert_eq!(from_text.get("a"), Some("2"));
        assert_eq!(from_text.get("key"), Some("v\"w"));
        assert_eq!(from_text.get("b"), None);
        assert_eq!(from_text.to_value(), from_tree.to_value());
        assert_eq!(from_tree.to_value(), json!({"a": "2", "key": "v\"w"}));
    }
}
