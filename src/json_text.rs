//! The request's own JSON text, walked once without building a tree: where each member's value
//! is, so that a view parses only the parts it reads and `mutate::splice` rewrites only the
//! parts that changed (issue 30).
//!
//! The texts come from the envelope's `RawValue`s, which serde has already checked as JSON, so
//! this walker checks structure only. Nothing here panics or reads out of bounds on any input:
//! a text that is not what it expects gives `None`.
use std::borrow::Cow;

/// A value's place in a text, in bytes: `text[start..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn of(self, text: &str) -> Option<&str> {
        text.get(self.start..self.end)
    }

    pub fn is_null(self, text: &str) -> bool {
        self.of(text) == Some("null")
    }
}

/// A string as written (without its quotes), and whether it has an escape: the walk found out
/// while skipping it, so most strings are compared and borrowed as they are.
#[derive(Debug, Clone, Copy)]
pub struct RawStr<'a> {
    pub raw: &'a str,
    escaped: bool,
}

impl<'a> RawStr<'a> {
    /// The string unescaped; borrowed when it has no escape.
    pub fn unescaped(self) -> Option<Cow<'a, str>> {
        if !self.escaped {
            return Some(self.raw.into());
        }
        serde_json::from_str::<String>(&format!("\"{}\"", self.raw))
            .ok()
            .map(Into::into)
    }

    /// Whether the string is `wanted`.
    pub fn is(self, wanted: &str) -> bool {
        if self.escaped {
            self.unescaped().is_some_and(|k| k == wanted)
        } else {
            self.raw == wanted
        }
    }
}

/// A position in a text, moving forward only.
#[derive(Clone)]
pub struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Self {
        Cursor { text, pos: 0 }
    }

    /// A cursor at byte `pos` of `text`, as a [`Span`] gives it.
    pub fn at(text: &'a str, pos: usize) -> Self {
        Cursor { text, pos }
    }

    pub fn text(&self) -> &'a str {
        self.text
    }

    /// Runs `read` on the value that comes next; with the value's span.
    pub fn spanned<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<(T, Span)> {
        self.whitespace();
        let start = self.pos;
        let value = read(self)?;
        Some((value, self.span_from(start)))
    }

    /// The first byte of the next value: `{`, `[`, `"`, or that of a number or literal.
    pub fn next_byte(&mut self) -> Option<u8> {
        self.whitespace();
        self.peek()
    }

    /// Whether nothing but whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.whitespace();
        self.pos == self.text.len()
    }

    /// Walks the object that comes next: `member` is called with each key as written and the
    /// cursor before its value, which it must consume (with [`Cursor::skip`], or by walking
    /// it). Returns the object's span.
    pub fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, RawStr<'a>) -> Option<()>,
    ) -> Option<Span> {
        let start = self.open(b'{')?;
        if self.close(b'}') {
            return Some(self.span_from(start));
        }
        loop {
            self.whitespace();
            let (span, escaped) = self.string()?;
            let key = RawStr {
                raw: span.of(self.text)?,
                escaped,
            };
            self.eat(b':')?;
            member(self, key)?;
            if self.close(b'}') {
                return Some(self.span_from(start));
            }
            self.eat(b',')?;
        }
    }

    /// Walks the array that comes next, calling `element` with each index; see
    /// [`Cursor::object`].
    pub fn array(
        &mut self,
        mut element: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<Span> {
        let start = self.open(b'[')?;
        if self.close(b']') {
            return Some(self.span_from(start));
        }
        let mut index = 0usize;
        loop {
            element(self, index)?;
            index = index.checked_add(1)?;
            if self.close(b']') {
                return Some(self.span_from(start));
            }
            self.eat(b',')?;
        }
    }

    /// The string that comes next; `None` for any other value.
    pub fn string_value(&mut self) -> Option<RawStr<'a>> {
        self.whitespace();
        let (span, escaped) = self.string()?;
        Some(RawStr {
            raw: span.of(self.text)?,
            escaped,
        })
    }

    /// The value that comes next, parsed by serde as it reads past it: one pass, where a skip
    /// and a parse of the span were two. `None` where serde refuses it.
    pub fn parse<T: serde::de::DeserializeOwned>(&mut self) -> Option<T> {
        self.whitespace();
        let rest = self.text.get(self.pos..)?;
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<T>();
        let value = values.next()?.ok()?;
        self.pos = self.pos.checked_add(values.byte_offset())?;
        Some(value)
    }

    /// Skips the value that comes next; its span.
    pub fn skip(&mut self) -> Option<Span> {
        self.whitespace();
        let start = self.pos;
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            b'{' | b'[' => self.nested()?,
            _ => {
                let rest = self.text.as_bytes().get(start..)?;
                let len = rest
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
                    .unwrap_or(rest.len());
                if len == 0 {
                    return None;
                }
                self.pos = start.checked_add(len)?;
            }
        }
        Some(self.span_from(start))
    }

    fn span_from(&self, start: usize) -> Span {
        Span {
            start,
            end: self.pos,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.whitespace();
        (self.peek()? == byte).then(|| self.pos += 1)
    }

    /// Consumes an opening bracket; where it was.
    fn open(&mut self, byte: u8) -> Option<usize> {
        self.whitespace();
        let start = self.pos;
        self.eat(byte)?;
        Some(start)
    }

    /// Consumes the closing bracket when it comes next.
    fn close(&mut self, byte: u8) -> bool {
        self.whitespace();
        let closes = self.peek() == Some(byte);
        if closes {
            self.pos += 1;
        }
        closes
    }

    /// A string; the span of what is between the quotes, and whether it has an escape.
    /// The cursor is on the opening quote.
    fn string(&mut self) -> Option<(Span, bool)> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.pos + 1;
        let bytes = self.text.as_bytes();
        let mut escaped = false;
        self.pos = start;
        loop {
            self.pos = quote_or_backslash(bytes, self.pos)?;
            match bytes.get(self.pos)? {
                b'"' => {
                    let span = self.span_from(start);
                    self.pos += 1;
                    return Some((span, escaped));
                }
                // The escaped byte is never the quote that ends the string.
                _ => {
                    escaped = true;
                    self.pos = self.pos.checked_add(2)?;
                }
            }
        }
    }

    /// An object or array, skipped to its closing bracket.
    fn nested(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match self.peek()? {
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'{' | b'[' => depth = depth.checked_add(1)?,
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        self.pos += 1;
                        return Some(());
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
    }
}

/// The first `"` or `\` at or after `from`, eight bytes at a time: strings are most of a
/// Kubernetes object, and wasm has no faster way to look for a byte.
fn quote_or_backslash(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at.checked_add(8)?) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        // A byte is zero in `quote` or `backslash` where the word has that byte; the lowest
        // flagged byte is always a true one.
        let found = ((quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash))
            & HIGH;
        if found != 0 {
            return at.checked_add((found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let rest = bytes.get(at..)?;
    rest.iter()
        .position(|b| matches!(b, b'"' | b'\\'))
        .and_then(|i| at.checked_add(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole text as one value, skipped: its span, when nothing but whitespace follows.
    fn whole(text: &str) -> Option<Span> {
        let mut cursor = Cursor::new(text);
        let span = cursor.skip()?;
        cursor.at_end().then_some(span)
    }

    /// Every member, depth first, as `path = value`.
    fn walk(cursor: &mut Cursor, path: &str, out: &mut Vec<String>) -> Option<()> {
        match cursor.next_byte()? {
            b'{' => {
                cursor.object(|c, key| walk(c, &format!("{path}.{}", key.unescaped()?), out))?;
            }
            b'[' => {
                cursor.array(|c, i| walk(c, &format!("{path}[{i}]"), out))?;
            }
            _ => {
                let span = cursor.skip()?;
                out.push(format!("{path} = {}", span.of(cursor.text())?));
            }
        }
        Some(())
    }

    #[test]
    fn every_member_and_element_is_found_with_its_span() {
        let text = r#" { "a" : [1, {"b": "}\"]"}, [ ]], "k\u0065y": "x\\y", "n": null, "e": {} } "#;
        let mut found = Vec::new();
        walk(&mut Cursor::new(text), "", &mut found).unwrap();
        assert_eq!(
            found,
            [
                ".a[0] = 1",
                r#".a[1].b = "}\"]""#,
                r#".key = "x\\y""#,
                ".n = null"
            ]
        );
        let span = whole(text).unwrap();
        assert_eq!(span.of(text), Some(text.trim()));
    }

    #[test]
    fn a_parse_reads_one_value_and_stops_after_it() {
        let parse_each = |text| {
            let mut values = Vec::new();
            Cursor::new(text).object(|c, _| Some(values.push(c.parse::<serde_json::Value>()?)))?;
            Some(serde_json::Value::Array(values))
        };
        let text = r#"{"a": 12, "b": [true, "x"], "c": null}"#;
        assert_eq!(
            parse_each(text),
            Some(serde_json::json!([12, [true, "x"], null]))
        );
        for broken in [r#"{"a": tru}"#, r#"{"a": "\q"}"#, r#"{"a": 1x}"#] {
            assert_eq!(parse_each(broken), None, "{broken}");
        }
    }

    #[test]
    fn the_quote_search_finds_the_first_in_any_position() {
        for len in 0..20 {
            for at in 0..len {
                for byte in [b'"', b'\\'] {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = byte;
                    if at + 1 < len {
                        bytes[at + 1] = b'"';
                    }
                    assert_eq!(quote_or_backslash(&bytes, 0), Some(at), "{len} {at}");
                }
            }
            assert_eq!(quote_or_backslash(&vec![b'\x7f'; len], 0), None);
        }
    }

    #[test]
    fn broken_texts_give_none_and_never_panic() {
        // Skipping checks brackets and quotes only: the texts are JSON that serde has read.
        for text in ["", "{", "[1,", r#""open"#, "{} x", r#"{"a\"#, "]", "}"] {
            assert!(whole(text).is_none(), "{text:?}");
        }
        for text in [r#"{"a":}"#, "{,}", r#"{"a" 1}"#, "[1 2]", r#"{"a":1,}"#] {
            assert!(
                walk(&mut Cursor::new(text), "", &mut Vec::new()).is_none(),
                "{text:?}"
            );
        }
    }
}
