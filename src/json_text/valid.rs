//! Values skipped and checked as JSON, as serde checks what it skips (issue 30). The cursor's
//! [`Cursor::skip`] trusts its text, which serde has read; the envelope read by the cursor
//! (`admission::envelope`) has no serde read behind it, so what it skips must be as valid as
//! serde's skip requires, and a value it is not sure of is `None`, left to serde.
use super::{Cursor, RawStr, Span};
use std::borrow::Cow;

/// How deep a checked value nests at most: deeper, it is left to serde, where the cursor's
/// recursion would grow the stack.
const MAX_DEPTH: u8 = 128;

impl Cursor<'_> {
    /// Skips the value that comes next, checked as serde checks a value it skips: its
    /// span; `None` where serde would refuse it or nests deeper than 128 (`MAX_DEPTH`).
    pub fn skip_valid(&mut self) -> Option<Span> {
        self.whitespace();
        let start = self.pos;
        self.valid_value(MAX_DEPTH)?;
        Some(self.span_from(start))
    }

    fn valid_value(&mut self, depth: u8) -> Option<()> {
        match self.next_byte()? {
            b'"' => {
                let (span, escaped) = self.string()?;
                valid_string(span.of(self.text)?, escaped).then_some(())
            }
            b'{' => {
                let depth = depth.checked_sub(1)?;
                self.object(|c, key| {
                    key.is_valid().then_some(())?;
                    c.valid_value(depth)
                })
                .map(drop)
            }
            b'[' => {
                let depth = depth.checked_sub(1)?;
                self.array(|c, _| c.valid_value(depth)).map(drop)
            }
            b't' => self.word("true"),
            b'f' => self.word("false"),
            b'n' => self.word("null"),
            _ => self.number(),
        }
    }

    /// A number as JSON writes it: a sign, no leading zero, a fraction and an exponent each
    /// with at least one digit.
    fn number(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        let mut at = self.pos;
        if bytes.get(at) == Some(&b'-') {
            at = at.checked_add(1)?;
        }
        match bytes.get(at)? {
            b'0' if bytes
                .get(at.checked_add(1)?)
                .is_some_and(u8::is_ascii_digit) =>
            {
                return None
            }
            b'0' => at = at.checked_add(1)?,
            b'1'..=b'9' => at = digits(bytes, at),
            _ => return None,
        }
        if bytes.get(at) == Some(&b'.') {
            at = some_digits(bytes, at.checked_add(1)?)?;
        }
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            at = at.checked_add(1)?;
            if matches!(bytes.get(at), Some(b'+' | b'-')) {
                at = at.checked_add(1)?;
            }
            at = some_digits(bytes, at)?;
        }
        self.pos = at;
        Some(())
    }
}

impl<'a> RawStr<'a> {
    /// The string as written, when that is what serde reads: it has no escape (and, as every
    /// string the cursor finds, no control character).
    pub fn plain(self) -> Option<&'a str> {
        (!self.escaped).then_some(self.raw)
    }

    /// Whether serde's skip accepts the string ([`valid_string`]).
    fn is_valid(self) -> bool {
        valid_string(self.raw, self.escaped)
    }

    /// The string as serde reads it; `None` where serde refuses it (an escaped one is
    /// unescaped by serde, which checks it).
    pub fn checked(self) -> Option<Cow<'a, str>> {
        match self.escaped {
            false => self.plain().map(Cow::Borrowed),
            true => self.unescaped(),
        }
    }
}

/// Past the digits from `at`.
fn digits(bytes: &[u8], at: usize) -> usize {
    let rest = bytes.get(at..).unwrap_or_default();
    at.saturating_add(rest.iter().take_while(|b| b.is_ascii_digit()).count())
}

/// Past the digits from `at`, of which there must be one.
fn some_digits(bytes: &[u8], at: usize) -> Option<usize> {
    let end = digits(bytes, at);
    (end > at).then_some(end)
}

/// Whether a string's text between its quotes, as [`Cursor::string`] found it (without a
/// control character), is one serde's skip accepts: each escape one JSON has (a `\\u` with four
/// hex digits, whatever code point they name, as serde's skip does not ask).
fn valid_string(raw: &str, escaped: bool) -> bool {
    if !escaped {
        return true;
    }
    let mut bytes = raw.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            continue;
        }
        match bytes.next() {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {}
            Some(b'u') => {
                let hex = bytes.by_ref().take(4).filter(u8::is_ascii_hexdigit).count();
                if hex != 4 {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::IgnoredAny;

    /// Whether the whole text is one value this skip accepts, and whether serde's does.
    fn both(text: &str) -> (bool, bool) {
        let mut cursor = Cursor::new(text);
        let ours = cursor.skip_valid().is_some() && cursor.at_end();
        (ours, serde_json::from_str::<IgnoredAny>(text).is_ok())
    }

    #[test]
    fn what_serde_skips_and_what_it_refuses() {
        let texts = [
            r#"{"a": [1, -0, 0.5, -1.5e+3, 2E-2, 1e9, true, false, null, "x"], "b": {}}"#,
            r#"["\"\\\/\b\f\n\r\t\u00e9\uD800\uZZZZ"]"#,
            r#"["\uD800"]"#,
            r#"["\u00"]"#,
            r#"["\x"]"#,
            "[\"tab\there\"]",
            "{\"k\u{1}\": 1}",
            r#"{"k\u0041": 1}"#,
            r#"{"k\q": 1}"#,
            "[01]",
            "[-]",
            "[-01]",
            "[1.]",
            "[.5]",
            "[1e]",
            "[1e+]",
            "[+1]",
            "[1x]",
            "[tru]",
            "[nulll]",
            "[1,]",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{1: 1}"#,
            "[] []",
            " \t\r\n[ ] \n",
            "\u{feff}[]",
            "",
        ];
        for text in texts {
            let (ours, serde) = both(text);
            assert_eq!(ours, serde, "{text}");
        }
    }

    #[test]
    fn deep_values_are_left_to_serde() {
        let nested = |n| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(both(&nested(128)).0);
        assert_eq!(both(&nested(129)), (false, true));
    }

    #[test]
    fn a_plain_string_has_no_escape_and_no_control_character() {
        let first = |text: &'static str| {
            let mut c = Cursor::new(text);
            c.string_value().and_then(RawStr::plain)
        };
        assert_eq!(first(r#""abc é""#), Some("abc é"));
        assert_eq!(first(r#""a\nb""#), None);
        assert_eq!(first("\"a\u{1f}b\""), None);
    }
}
