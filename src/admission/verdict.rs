//! The decision for one request, and how it becomes the host's `ValidationResponse`.
use crate::error::InputError;
use crate::json_text::short_copies;
use crate::mutate::splice::{self, Root, Written};
use crate::violation::{self, Violation};
use kubewarden_policy_sdk::response::ValidationResponse;
use serde_json::Value;

/// The decision for one request, before it is serialized for the host.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    pub accepted: bool,
    pub message: Option<String>,
    pub code: Option<u16>,
    /// The mutated object as JSON: the request's own bytes with the policy's additions
    /// spliced in ([`splice`]).
    pub mutated_json: Option<Vec<u8>>,
    pub warnings: Vec<String>,
}

impl Verdict {
    pub fn accept() -> Self {
        Verdict {
            accepted: true,
            ..Verdict::default()
        }
    }

    pub(super) fn reject(message: String, code: u16) -> Self {
        Verdict {
            accepted: false,
            message: Some(message),
            code: Some(code),
            ..Verdict::default()
        }
    }

    /// Accepted, with the mutated object as JSON (if any) and the warnings.
    pub(super) fn with(mutated_json: Option<Vec<u8>>, warnings: Vec<String>) -> Self {
        Verdict {
            accepted: true,
            mutated_json,
            warnings,
            ..Verdict::default()
        }
    }

    /// Accepted, mutated from `text` (the request's object) to `tree`, which may hold only the
    /// parts the policy read, and which the mutation edited under `written`; `roots` are
    /// values of the text already found, where the splice can start ([`splice::splice`]).
    pub(super) fn mutated(
        text: &str,
        roots: &[Root],
        tree: &Value,
        written: &Written,
        warnings: Vec<String>,
    ) -> Result<Self, InputError> {
        let json = splice::splice(text, tree, written, roots).ok_or_else(|| {
            InputError::Malformed("the object could not be read again to write the mutation".into())
        })?;
        Ok(Verdict::with(Some(json), warnings))
    }

    /// The mutated object, parsed (for tests and tools; the response carries the bytes).
    pub fn mutated_object(&self) -> Option<Value> {
        let json = self.mutated_json.as_ref()?;
        Some(serde_json::from_slice(json).unwrap_or(Value::Null))
    }

    /// The SDK's response, with the mutated object parsed. [`Verdict::write_response`] gives
    /// the same JSON without parsing it.
    pub fn to_response(self) -> ValidationResponse {
        ValidationResponse {
            mutated_object: self.mutated_object(),
            accepted: self.accepted,
            message: self.message,
            code: self.code,
            audit_annotations: None,
            warnings: (!self.warnings.is_empty()).then_some(self.warnings),
        }
    }

    /// The response as the SDK writes it, field for field; a mutated object goes in as the
    /// bytes it already is, never parsed or serialised again.
    pub fn write_response(self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        let Some(json) = &self.mutated_json else {
            return short_copies::to_writer(out, &self.to_response());
        };
        // One allocation for the answer: the object is most of it.
        let warnings_len = self
            .warnings
            .iter()
            .map(|w| w.len().saturating_add(8))
            .fold(0usize, usize::saturating_add);
        out.reserve(json.len().saturating_add(warnings_len).saturating_add(160));
        out.extend_from_slice(br#"{"accepted":"#);
        short_copies::to_writer(out, &self.accepted)?;
        out.extend_from_slice(br#","message":"#);
        short_copies::to_writer(out, &self.message)?;
        out.extend_from_slice(br#","code":"#);
        short_copies::to_writer(out, &self.code)?;
        out.extend_from_slice(br#","mutated_object":"#);
        out.extend_from_slice(json);
        out.extend_from_slice(br#","audit_annotations":null,"warnings":"#);
        let warnings = (!self.warnings.is_empty()).then_some(&self.warnings);
        short_copies::to_writer(out, &warnings)?;
        out.push(b'}');
        Ok(())
    }
}

impl From<InputError> for Verdict {
    fn from(e: InputError) -> Self {
        Verdict::reject(e.to_string(), 400)
    }
}

/// A rejection listing the violations, keeping the warnings found beside them.
pub(super) fn rejection(violations: &[Violation], warnings: Vec<String>) -> Verdict {
    Verdict {
        warnings,
        ..Verdict::reject(violation::message(violations), 400)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_answer_written_around_the_bytes_is_the_sdks() {
        for warnings in [vec![], vec!["a \"quoted\" warning".to_string()]] {
            let verdict = || {
                Verdict::with(
                    Some(br#"{"kind": "Pod", "n": [1]}"#.to_vec()),
                    warnings.clone(),
                )
            };
            let mut written = Vec::new();
            verdict().write_response(&mut written).unwrap();
            let by_sdk = serde_json::to_value(verdict().to_response()).unwrap();
            assert_eq!(serde_json::from_slice::<Value>(&written).unwrap(), by_sdk);
            assert_eq!(by_sdk["mutated_object"], json!({"kind": "Pod", "n": [1]}));
        }
    }
}
