//! The decision for one request, and how it becomes the host's `ValidationResponse`, with every
//! response's warnings bounded in this one place (SPEC §4.2).
use crate::error::InputError;
use crate::violation::{self, Violation};
use kubewarden_policy_sdk::response::ValidationResponse;
use serde_json::Value;

/// At most this many warnings per response; past it, the first `MAX_WARNINGS - 1` and one that
/// says how many more there are.
pub const MAX_WARNINGS: usize = 10;
/// At most this many characters per warning: what the API server keeps of each once the
/// warnings of a response total 4 KiB. The policy's own wording keeps to Kubernetes' 120;
/// names and keys of any length are cut here.
pub const MAX_WARNING_CHARS: usize = 256;

/// The warnings as a response carries them, each cut at a character boundary with "…", so
/// that its path, which comes first, is kept.
fn bounded(mut warnings: Vec<String>) -> Vec<String> {
    if warnings.len() > MAX_WARNINGS {
        let more = warnings.len() - (MAX_WARNINGS - 1);
        warnings.truncate(MAX_WARNINGS - 1);
        warnings.push(format!("… and {more} more like these"));
    }
    for w in &mut warnings {
        if let Some((end, _)) = w.char_indices().nth(MAX_WARNING_CHARS - 1) {
            if w[end..].chars().nth(1).is_some() {
                w.truncate(end);
                w.push('…');
            }
        }
    }
    warnings
}

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
        Verdict::with(None, Vec::new())
    }

    pub(super) fn reject(message: String, code: u16) -> Self {
        Verdict {
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
            warnings: bounded(warnings),
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
        warnings: bounded(warnings),
        ..Verdict::reject(violation::message(violations), 400)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn many(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("w{i}")).collect()
    }

    #[test]
    fn ten_warnings_are_all_kept_and_more_are_summed_up() {
        assert_eq!(bounded(many(10)), many(10));
        let want = [many(9), vec!["… and 16 more like these".into()]].concat();
        assert_eq!(bounded(many(25)), want);
    }

    #[test]
    fn a_long_warning_is_cut_at_a_character_boundary() {
        let exact = "é".repeat(MAX_WARNING_CHARS);
        assert_eq!(bounded(vec![exact.clone()]), [exact]);
        let long = format!("path: {}", "é".repeat(300));
        let cut = &bounded(vec![long])[0];
        assert_eq!(cut.chars().count(), MAX_WARNING_CHARS);
        assert!(cut.starts_with("path: é") && cut.ends_with("é…"), "{cut}");
    }
}
