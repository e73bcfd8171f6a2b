//! Typed errors for bad input. Each carries the JSON path of the field it is about, so the
//! rejection tells the user where to look (SPEC §6: bad input is a 400, never a trap).
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InputError {
    #[error("the request cannot be read as JSON: {0}")]
    Malformed(String),
    #[error("the payload is not a validation request {{\"request\": <AdmissionRequest>, \"settings\": {{…}}}}: {0}")]
    NotARequest(String),
    #[error("{path}: is required")]
    Missing { path: String },
    #[error("{path}: expected {expected}, found {found}")]
    WrongType {
        path: String,
        expected: &'static str,
        found: String,
    },
    #[error("{path}: {value} is out of range, {expected}")]
    OutOfRange {
        path: String,
        value: String,
        expected: &'static str,
    },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("{path}: the total over its group is larger than {limit}")]
    Overflow { path: String, limit: u32 },
}

impl InputError {
    /// The path and the problem apart, for a rule to report it as a violation.
    pub fn path_and_problem(&self) -> (String, String) {
        let text = self.to_string();
        match self.path() {
            Some(path) => {
                let problem = text.strip_prefix(&format!("{path}: ")).unwrap_or(&text);
                (path.to_string(), problem.to_string())
            }
            None => (String::new(), text),
        }
    }

    /// The JSON path the error is about, if any.
    pub fn path(&self) -> Option<&str> {
        match self {
            InputError::Malformed(_) | InputError::NotARequest(_) => None,
            InputError::Missing { path }
            | InputError::WrongType { path, .. }
            | InputError::OutOfRange { path, .. }
            | InputError::Invalid { path, .. }
            | InputError::Overflow { path, .. } => Some(path),
        }
    }
}

/// Adds two counts, or reports the field whose total overflowed. `u32` on purpose: Kubernetes
/// counts are int32, and wasm's `usize` is 32 bits, so nothing here may rely on a wider type.
pub fn checked_add(a: u32, b: u32, path: &str) -> Result<u32, InputError> {
    a.checked_add(b).ok_or_else(|| InputError::Overflow {
        path: path.to_string(),
        limit: u32::MAX,
    })
}

pub fn checked_mul(a: u32, b: u32, path: &str) -> Result<u32, InputError> {
    a.checked_mul(b).ok_or_else(|| InputError::Overflow {
        path: path.to_string(),
        limit: u32::MAX,
    })
}
