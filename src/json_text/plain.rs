//! Plain values read into a tree without serde (issue 30). The lean read gives serde each member
//! it keeps, and most of them are names, labels and small counts: setting up a deserializer for
//! each cost more than reading it. What is read here is only what serde certainly reads the
//! same way; anything else is left to serde, which also gives its errors.
use super::Cursor;
use serde_json::{Map, Number, Value};

/// How deep a plain value nests at most: far under serde's limit of 128, so serde would refuse
/// nothing read here for its depth.
const MAX_DEPTH: u8 = 16;

/// The key by which serde reads an object as the JSON text of its value (serde_json's
/// `raw_value`, which the policy turns on for its envelope): an object with it is left to
/// serde.
const RAW_VALUE_KEY: &str = "$serde_json::private::RawValue";

/// Most digits of a count read here: any 19 digits fit in a `u64`, as serde reads them.
const MAX_DIGITS: usize = 19;

/// `text`, one JSON value, as serde reads it: read here when it is plain, else by serde, which
/// gives its error.
pub fn value_of(text: &str) -> Result<Value, serde_json::Error> {
    let mut cursor = Cursor::new(text);
    match cursor.plain(MAX_DEPTH).filter(|_| cursor.at_end()) {
        Some(value) => Ok(value),
        None => serde_json::from_str(text),
    }
}

impl Cursor<'_> {
    /// The value that comes next, as serde reads it; `None` where serde refuses it. Strings
    /// without an escape, counts, literals, and objects and arrays of them are read here; a
    /// value with anything else in it is read again by serde ([`Cursor::parse`]).
    pub fn value(&mut self) -> Option<Value> {
        let start = self.pos;
        if let Some(value) = self.plain(MAX_DEPTH) {
            return Some(value);
        }
        self.pos = start;
        self.parse()
    }

    fn plain(&mut self, depth: u8) -> Option<Value> {
        match self.next_byte()? {
            b'"' => self.plain_string().map(|s| Value::String(s.to_owned())),
            b'{' => {
                let depth = depth.checked_sub(1)?;
                let mut map = Map::new();
                self.object(|c, key| {
                    let key = key.plain().filter(|k| *k != RAW_VALUE_KEY)?.to_owned();
                    map.insert(key, c.plain(depth)?);
                    Some(())
                })?;
                Some(Value::Object(map))
            }
            b'[' => {
                let depth = depth.checked_sub(1)?;
                let mut items = Vec::new();
                self.array(|c, _| {
                    items.push(c.plain(depth)?);
                    Some(())
                })?;
                Some(Value::Array(items))
            }
            b't' => self.word("true").map(|()| Value::Bool(true)),
            b'f' => self.word("false").map(|()| Value::Bool(false)),
            b'n' => self.word("null").map(|()| Value::Null),
            b'0'..=b'9' => self.count(),
            _ => None,
        }
    }

    /// A whole number without a sign, fraction or exponent, as serde's `u64`.
    fn count(&mut self) -> Option<Value> {
        let bytes = self.text.as_bytes().get(self.pos..)?;
        let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
        let leading_zero = digits > 1 && bytes.first() == Some(&b'0');
        let goes_on = matches!(bytes.get(digits), Some(b'.' | b'e' | b'E'));
        if digits > MAX_DIGITS || leading_zero || goes_on {
            return None;
        }
        let n = bytes.get(..digits)?.iter().try_fold(0u64, |n, &b| {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        })?;
        self.pos = self.pos.checked_add(digits)?;
        Some(Value::Number(Number::from(n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each text read whole, by this reader (with serde where it gives up) and by serde.
    fn both(text: &str) -> (Option<Value>, Option<Value>) {
        let mut cursor = Cursor::new(text);
        let ours = cursor.value().filter(|_| cursor.at_end());
        (ours, serde_json::from_str(text).ok())
    }

    #[test]
    fn every_value_reads_as_serde_reads_it() {
        let deep = |n| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let texts = [
            r#"{"a": "b", "c": [1, 0, 18446744073709551615, true, false, null], "a": {}}"#,
            r#"{"k\u0065y": "v", "x": "a\"b", "y": "\ud83d\ude00"}"#,
            r#"[-1, 1.5, 1e3, 1E3, 18446744073709551616, 99999999999999999999, 0]"#,
            "[\"control\u{1}\", \"tab\there\"]",
            "{\"ke\u{7}y\": 1}",
            r#"[01, 1]"#,
            r#"[1] "#,
            r#"  "é€😀"  "#,
            r#"[nul]"#,
            r#"[tru, 1]"#,
            r#"{"a": 1,}"#,
            r#"{"a" 1}"#,
            r#"{"n": {"$serde_json::private::RawValue": "2"}}"#,
            r#"{"n": {"$serde_json::private::RawValue": "x"}}"#,
            r#"{"n": {"a": 1, "$serde_json::private::RawValue": "2"}}"#,
            "",
        ];
        let nested = [15, 16, 17, 127, 128, 129].map(deep);
        for text in texts
            .iter()
            .copied()
            .chain(nested.iter().map(String::as_str))
        {
            let (ours, serde) = both(text);
            assert_eq!(ours, serde, "{text}");
            // A whole text: the same value, or serde's own error.
            let whole = value_of(text).map_err(|e| e.to_string());
            let serde_whole = serde_json::from_str::<Value>(text).map_err(|e| e.to_string());
            assert_eq!(whole, serde_whole, "{text}");
        }
    }

    #[test]
    fn plain_values_are_read_here_and_the_rest_by_serde() {
        let plain = |text: &str| Cursor::new(text).plain(MAX_DEPTH);
        assert_eq!(
            plain(r#"{"a": ["b", 7, null, {"c": true}]}"#),
            Some(serde_json::json!({"a": ["b", 7, null, {"c": true}]}))
        );
        for text in [r#""a\nb""#, "-1", "1.0", "2e1", "01", r#"{"\u0061": 1}"#] {
            assert_eq!(plain(text), None, "{text}");
        }
        let nested = |n| plain(&format!("{}{}", "[".repeat(n), "]".repeat(n)));
        assert!(nested(16).is_some());
        assert_eq!(nested(17), None);
    }
}
