//! The decision for one request, and how it becomes the host's `ValidationResponse`.
use crate::error::InputError;
use crate::violation::{self, Violation};
use kubewarden_policy_sdk::response::ValidationResponse;
use serde_json::Value;

/// The decision for one request, before it is serialized for the host.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    pub accepted: bool,
    pub message: Option<String>,
    pub code: Option<u16>,
    pub mutated_object: Option<Value>,
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

    /// Accepted, with the object to patch to (if any) and the warnings.
    pub(super) fn with(mutated_object: Option<Value>, warnings: Vec<String>) -> Self {
        Verdict {
            accepted: true,
            mutated_object,
            warnings,
            ..Verdict::default()
        }
    }

    pub fn to_response(self) -> ValidationResponse {
        ValidationResponse {
            accepted: self.accepted,
            message: self.message,
            code: self.code,
            mutated_object: self.mutated_object,
            audit_annotations: None,
            warnings: (!self.warnings.is_empty()).then_some(self.warnings),
        }
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
