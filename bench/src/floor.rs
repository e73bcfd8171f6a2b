//! The floor (issue 30): a module that holds the policy's answer to one request and gives it
//! back without reading the request. No module can give that answer faster in the same host:
//! what it costs is the host's own work, the call, and copying the answer out.
//!
//! It is written in the text format and assembled here, one per case, from the answer the
//! policy gave before timing starts. It tells the waPC operations apart by the length of
//! their names alone (`validate` 8, `protocol_version` 16, `validate_settings` 17), so it
//! never calls `__guest_request`: the host never even copies the request into it.
use anyhow::{anyhow, Result};
use std::fmt::Write;

const WASM_PAGE: usize = 65536;
/// Where the answers start in linear memory.
const DATA_START: usize = 1024;

/// A waPC module answering `validate` with `response`.
pub fn module(response: &[u8]) -> Result<Vec<u8>> {
    let settings = br#"{"valid":true}"#;
    let version = br#""v1""#;
    let settings_at = DATA_START;
    let version_at = settings_at + settings.len();
    let response_at = version_at + version.len();
    let end = response_at
        .checked_add(response.len())
        .ok_or_else(|| anyhow!("the answer is too large"))?;
    let pages = end.div_ceil(WASM_PAGE);
    let text = format!(
        r#"(module
  (import "wapc" "__guest_response" (func $respond (param i32 i32)))
  (memory (export "memory") {pages})
  (data (i32.const {settings_at}) "{settings}")
  (data (i32.const {version_at}) "{version}")
  (data (i32.const {response_at}) "{answer}")
  (func (export "__guest_call") (param $operation_len i32) (param $payload_len i32) (result i32)
    (if (i32.eq (local.get $operation_len) (i32.const 17))
      (then (call $respond (i32.const {settings_at}) (i32.const {settings_len})) (return (i32.const 1))))
    (if (i32.eq (local.get $operation_len) (i32.const 16))
      (then (call $respond (i32.const {version_at}) (i32.const {version_len})) (return (i32.const 1))))
    (call $respond (i32.const {response_at}) (i32.const {response_len}))
    (i32.const 1)))
"#,
        settings = escaped(settings),
        version = escaped(version),
        answer = escaped(response),
        settings_len = settings.len(),
        version_len = version.len(),
        response_len = response.len(),
    );
    wat::parse_str(&text).map_err(|e| anyhow!("the floor module does not assemble: {e}"))
}

/// Every byte as a `\hh` escape, which the text format takes in a data string.
fn escaped(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for b in bytes {
        let _ = write!(out, "\\{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use multislice_host::Policy;

    #[test]
    fn answers_validate_with_the_held_response_and_the_other_operations_as_a_policy() {
        let answer = br#"{"accepted":true,"mutated_object":{"a":"\u00e9"}}"#;
        let floor = Policy::from_bytes(&module(answer).unwrap()).unwrap();
        assert_eq!(floor.call("validate", b"anything").unwrap(), answer);
        assert_eq!(
            floor.call("validate_settings", b"{}").unwrap(),
            br#"{"valid":true}"#
        );
        assert_eq!(floor.call("protocol_version", b"").unwrap(), br#""v1""#);
    }
}
