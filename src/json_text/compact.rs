//! JSON written by hand, byte for byte as `serde_json::to_writer` writes it: the splice's added
//! members and the facts annotation. serde writes a string in a piece per run between escapes
//! and a piece per escape, each through `io::Write`, and a facts annotation written into an
//! annotation is mostly escaped quotes: these two took a tenth of a 64-rjob JobSet CREATE
//! (BENCHMARKS.md, issue 30).
use super::short_copies::push_piece;
use super::string_stop;
use serde_json::Value;

/// `s` as a JSON string, with serde_json's escapes: `\"`, `\\`, the five short ones for
/// control characters, and `\u00XX` (lowercase) for the other control characters. The runs
/// between escapes are found eight bytes at a time, as the cursor finds them.
pub fn string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len().saturating_add(2));
    out.push(b'"');
    let mut run_start = 0;
    while let Some(stop) = string_stop(bytes, run_start) {
        let (Some(run), Some(&byte)) = (bytes.get(run_start..stop), bytes.get(stop)) else {
            break;
        };
        push_piece(out, run);
        match byte {
            b'"' => push_piece(out, b"\\\""),
            b'\\' => push_piece(out, b"\\\\"),
            b'\x08' => push_piece(out, b"\\b"),
            b'\t' => push_piece(out, b"\\t"),
            b'\n' => push_piece(out, b"\\n"),
            b'\x0c' => push_piece(out, b"\\f"),
            b'\r' => push_piece(out, b"\\r"),
            _ => push_piece(
                out,
                &[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 0xf)],
                ],
            ),
        }
        run_start = stop.saturating_add(1);
    }
    push_piece(out, bytes.get(run_start..).unwrap_or_default());
    out.push(b'"');
}

/// `n` in decimal.
pub fn unsigned(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut first = digits.len();
    loop {
        first -= 1;
        digits[first] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    push_piece(out, &digits[first..]);
}

/// `value` as JSON, compact, members in the map's order: as `serde_json::to_writer` writes it.
pub fn value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => push_piece(out, b"null"),
        Value::Bool(true) => push_piece(out, b"true"),
        Value::Bool(false) => push_piece(out, b"false"),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => unsigned(out, u),
            (None, Some(i)) => {
                out.push(b'-');
                unsigned(out, i.unsigned_abs());
            }
            // A float: serde's own formatting (ryu), which a `Vec` never fails to take.
            (None, None) => {
                let _ = serde_json::to_writer(&mut *out, n);
            }
        },
        Value::String(s) => string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                self::value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut members = Members::open(out);
            for (key, item) in map {
                self::value(members.member(key), item);
            }
            members.close();
        }
    }
}

/// An object being written: `{`, then `"key":` before each member's value, commas between.
pub struct Members<'o> {
    out: &'o mut Vec<u8>,
    first: bool,
}

impl<'o> Members<'o> {
    pub fn open(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Members { out, first: true }
    }

    /// Writes `"key":`; the value is to be written next, into what this returns.
    pub fn member(&mut self, key: &str) -> &mut Vec<u8> {
        self.comma();
        string(self.out, key);
        self.out.push(b':');
        self.out
    }

    /// [`Members::member`] for a key of the policy's own that needs no escape (letters only):
    /// written as it is, without looking for what to escape.
    pub fn plain_member(&mut self, key: &'static str) -> &mut Vec<u8> {
        self.comma();
        self.out.push(b'"');
        push_piece(self.out, key.as_bytes());
        push_piece(self.out, b"\":");
        self.out
    }

    /// A comma before every member but the first.
    fn comma(&mut self) {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
    }

    pub fn close(self) {
        self.out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn written(v: &Value) -> Vec<u8> {
        let mut out = b"x".to_vec();
        value(&mut out, v);
        out
    }

    /// Byte for byte what serde_json writes: every byte below 0x80 alone and between runs of
    /// both sides of the short-piece limit, non-ASCII, every kind of number, nesting.
    #[test]
    fn it_writes_what_serde_json_writes() {
        let long = "y".repeat(40);
        let mut values = vec![
            json!(null),
            json!(true),
            json!(false),
            json!(""),
            json!("a\"b\\c\nd\u{1}é€𝄞\u{7f}"),
            json!({"multislice.kubewarden.io/facts": "{\"slice\":{\"total\":64,\"offset\":0}}"}),
            json!([
                0,
                1,
                -1,
                3.5,
                -0.0,
                1e300,
                u64::MAX,
                i64::MIN,
                i64::MAX,
                {},
                [],
                [[]]
            ]),
            json!({"k": [long.clone(), format!("{long}\"{long}")], long.clone(): {"a": [{"b": "c"}]}, "": 1}),
        ];
        for byte in 0u8..0x80 {
            let c = char::from(byte);
            values.push(json!(format!("{c}")));
            values.push(json!(format!("ab{c}{long}{c}{c}z")));
            values.push(json!({format!("k{c}"): format!("{c}é")}));
        }
        for v in values {
            assert_eq!(
                written(&v),
                [b"x".to_vec(), serde_json::to_vec(&v).unwrap()].concat(),
                "{v}"
            );
        }
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 99, 100, 4_294_967_295, u64::MAX] {
            let mut out = Vec::new();
            unsigned(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }
}
