//! JSON written by serde with its short pieces kept inside the module. Appending a slice to a
//! vector (`Vec::extend_from_slice`) is wasm's `memory.copy`, which wasmtime runs as a call
//! out of the module, and serde writes a value in many short pieces (a quote, a colon, a key, a
//! run of a string between escapes): these are pushed byte by byte. It took 9% of the
//! instructions of a 64-rjob JobSet CREATE and 6% of a 1 × 4 one (BENCHMARKS.md, issue 30).
//! Longer copies stay `memory.copy`: copying a tree's keys byte by byte, or word by word,
//! cost more than the call.
use serde::Serialize;
use std::io;

/// The longest piece pushed byte by byte; a longer one is copied whole.
const SHORT: usize = 16;

/// `value` written as JSON at the end of `out`, as `serde_json::to_writer` writes it.
pub fn to_writer(out: &mut Vec<u8>, value: &impl Serialize) -> serde_json::Result<()> {
    serde_json::to_writer(Pieces(out), value)
}

/// `value` written as JSON, as `serde_json::to_vec` writes it.
pub fn to_vec(value: &impl Serialize) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(128);
    to_writer(&mut out, value)?;
    Ok(out)
}

/// `value` written as a JSON string, as `serde_json::to_string` writes it.
pub fn to_string(value: &impl Serialize) -> serde_json::Result<String> {
    // serde_json writes valid UTF-8 (it only copies `str`s and ASCII around them).
    String::from_utf8(to_vec(value)?).map_err(|e| serde::ser::Error::custom(e.utf8_error()))
}

/// `piece` at the end of `out`: byte by byte when it is short and the room is there.
#[inline]
pub(super) fn push_piece(out: &mut Vec<u8>, piece: &[u8]) {
    let room = out.capacity().saturating_sub(out.len());
    if piece.len() <= SHORT && piece.len() <= room {
        // Never grows: the room is there.
        for &byte in piece {
            out.push(byte);
        }
    } else {
        out.extend_from_slice(piece);
    }
}

struct Pieces<'v>(&'v mut Vec<u8>);

impl io::Write for Pieces<'_> {
    fn write(&mut self, piece: &[u8]) -> io::Result<usize> {
        self.write_all(piece)?;
        Ok(piece.len())
    }

    #[inline]
    fn write_all(&mut self, piece: &[u8]) -> io::Result<()> {
        push_piece(self.0, piece);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Byte for byte what serde_json writes, on values with pieces on both sides of the
    /// limit: escapes, long and short strings, numbers, nesting, non-ASCII.
    #[test]
    fn it_writes_what_serde_json_writes() {
        let long = "x".repeat(SHORT + 1);
        let values = [
            json!(null),
            json!(""),
            json!("a\"b\\c\nd\u{1}é€𝄞"),
            json!({"multislice.kubewarden.io/facts": "{\"slice\":{\"total\":64,\"offset\":0}}"}),
            json!([1, -2, 3.5, true, false, null, {}, []]),
            json!({"k": [long.clone(), format!("{long}\"{long}")], long.clone(): {"a": [{"b": "c"}]}}),
            json!(u64::MAX),
        ];
        for value in values {
            assert_eq!(to_vec(&value).unwrap(), serde_json::to_vec(&value).unwrap());
            assert_eq!(
                to_string(&value).unwrap(),
                serde_json::to_string(&value).unwrap()
            );
            let mut out = b"[".to_vec();
            to_writer(&mut out, &value).unwrap();
            assert_eq!(
                out,
                [b"[".to_vec(), serde_json::to_vec(&value).unwrap()].concat()
            );
        }
    }
}
