//! The request's own JSON text, walked once without building a tree: where each member's value
//! is, so that a view parses only the parts it reads and `mutate::splice` rewrites only the
//! parts that changed (issue 30).
//!
//! Most texts have been checked as JSON already, by serde or by [`Cursor::skip_valid`] in the
//! envelope read by the cursor, so [`Cursor::skip`] checks structure only (and, as every
//! string it finds, no control character in a string). What reads a text no one has checked
//! reads it with `skip_valid` and [`Cursor::value`]. Nothing here panics or reads out of
//! bounds on any input: a text that is not what it expects gives `None`.
use std::borrow::Cow;

/// A value's place in a text, in bytes: `text[start..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    #[inline]
    pub fn of(self, text: &str) -> Option<&str> {
        text.get(self.start..self.end)
    }

    pub fn is_null(self, text: &str) -> bool {
        self.of(text) == Some("null")
    }
}

/// A value of a text already found, and the path to it: `mutate::splice` starts a walk down a
/// path through it there.
pub type Root<'r> = (&'r [PathStep<'r>], Span);

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

/// A position in a text, moving forward only. The small steps are marked `#[inline]`: at
/// `opt-level = "s"` they stayed calls, and inlining them made every walk 2–6% faster in wasm.
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

    /// How far the cursor has read, in bytes.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Runs `read` on the text from the value that comes next on (so that what it finds is
    /// placed in the value's own text), which gives back how long the value is; with the
    /// value's text.
    pub fn apart<T>(
        &mut self,
        read: impl FnOnce(&'a str) -> Option<(T, usize)>,
    ) -> Option<(T, &'a str)> {
        self.whitespace();
        let rest = self.text.get(self.pos..)?;
        let (value, len) = read(rest)?;
        let text = rest.get(..len)?;
        self.pos = self.pos.checked_add(len)?;
        Some((value, text))
    }

    /// Runs `read` on the value that comes next; with the value's span.
    pub fn spanned<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<(T, Span)> {
        self.whitespace();
        let start = self.pos;
        let value = read(self)?;
        Some((value, self.span_from(start)))
    }

    /// The first byte of the next value: `{`, `[`, `"`, or that of a number or literal.
    #[inline]
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

    /// The string that comes next, as written, when that is what serde reads
    /// ([`RawStr::plain`]); `None` for any other value.
    #[inline]
    pub fn plain_string(&mut self) -> Option<&'a str> {
        self.string_value().and_then(RawStr::plain)
    }

    /// The value that comes next, parsed by serde as it reads past it: one pass, where a skip
    /// and a parse of the span were two. `None` where serde refuses it.
    pub fn parse<T: serde::Deserialize<'a>>(&mut self) -> Option<T> {
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

    #[inline]
    fn span_from(&self, start: usize) -> Span {
        Span {
            start,
            end: self.pos,
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    #[inline]
    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.pos += 1;
        }
    }

    /// Consumes `word` (a literal: `true`, `false`, `null`) when it comes next.
    #[inline]
    fn word(&mut self, word: &str) -> Option<()> {
        let end = self.pos.checked_add(word.len())?;
        (self.text.get(self.pos..end)? == word).then(|| self.pos = end)
    }

    #[inline]
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
    #[inline]
    fn close(&mut self, byte: u8) -> bool {
        self.whitespace();
        let closes = self.peek() == Some(byte);
        if closes {
            self.pos += 1;
        }
        closes
    }

    /// A string; the span of what is between the quotes, and whether it has an escape.
    /// The cursor is on the opening quote. `None` for one with a control character.
    fn string(&mut self) -> Option<(Span, bool)> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.pos + 1;
        let bytes = self.text.as_bytes();
        let mut escaped = false;
        self.pos = start;
        loop {
            self.pos = string_stop(bytes, self.pos)?;
            match bytes.get(self.pos)? {
                b'"' => {
                    let span = self.span_from(start);
                    self.pos += 1;
                    return Some((span, escaped));
                }
                // The escaped byte is never the quote that ends the string.
                b'\\' => {
                    escaped = true;
                    self.pos = self.pos.checked_add(2)?;
                }
                // Not JSON, so never in a text serde has read.
                _ => return None,
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

/// The first `"`, `\\` or control character at or after `from`, eight bytes at a time:
/// strings are most of a Kubernetes object, and wasm has no faster way to look for a byte.
/// Inlined into both its callers: as a call, the cursor's walk over every string was 8% slower
/// (a TPU pod's admission).
#[inline(always)]
fn string_stop(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at.checked_add(8)?) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        // A byte is zero in `quote` or `backslash` where the word has that byte, and below
        // 0x20 in `word` where it is a control character; the lowest flagged byte is always a
        // true one.
        let found = ((quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (word.wrapping_sub(ONES * 0x20) & !word))
            & HIGH;
        if found != 0 {
            return at.checked_add((found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let rest = bytes.get(at..)?;
    rest.iter()
        .position(|&b| matches!(b, b'"' | b'\\') || b < 0x20)
        .and_then(|i| at.checked_add(i))
}

pub mod compact;
mod path;
pub mod plain;
pub use path::{Path, PathStep};
pub mod short_copies;
#[cfg(test)]
mod tests;
mod valid;
