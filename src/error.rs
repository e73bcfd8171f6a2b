//! Typed errors for bad input. Each carries the JSON path of the field it is about, so the
//! rejection tells the user where to look (SPEC §6: bad input is a 400, never a trap).
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputError {
    Malformed(String),
    NotARequest(String),
    Missing {
        path: String,
    },
    WrongType {
        path: String,
        expected: &'static str,
        found: String,
    },
    OutOfRange {
        path: String,
        value: String,
        expected: &'static str,
    },
    Invalid {
        path: String,
        reason: String,
    },
    Overflow {
        path: String,
        limit: u32,
    },
}

impl InputError {
    pub fn missing(path: impl Into<String>) -> Self {
        InputError::Missing { path: path.into() }
    }

    pub fn invalid(path: impl Into<String>, reason: impl Into<String>) -> Self {
        InputError::Invalid {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// What is wrong, without the path: a rule that reports the error as a violation puts the
    /// two apart.
    pub fn problem(&self) -> String {
        match self {
            InputError::Malformed(e) => format!("the request cannot be read as JSON: {e}"),
            InputError::NotARequest(e) => format!(
                "the payload is not a validation request {{\"request\": <AdmissionRequest>, \"settings\": {{…}}}}: {e}"
            ),
            InputError::Missing { .. } => "is required".to_string(),
            InputError::WrongType {
                expected, found, ..
            } => format!("expected {expected}, found {found}"),
            InputError::OutOfRange {
                value, expected, ..
            } => format!("{value} is out of range, {expected}"),
            InputError::Invalid { reason, .. } => reason.clone(),
            InputError::Overflow { limit, .. } => {
                format!("the total over its group is larger than {limit}")
            }
        }
    }

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

/// `<path>: <problem>`, or the problem alone when the error is about no field.
impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path() {
            Some(path) => write!(f, "{path}: {}", self.problem()),
            None => f.write_str(&self.problem()),
        }
    }
}

impl std::error::Error for InputError {}

/// Adds two counts, or reports the field whose total overflowed. `u32` on purpose: Kubernetes
/// counts are int32, and wasm's `usize` is 32 bits, so nothing here may rely on a wider type.
pub fn add_at(a: u32, b: u32, path: &str) -> Result<u32, InputError> {
    a.checked_add(b).ok_or_else(|| overflow(path))
}

pub fn mul_at(a: u32, b: u32, path: &str) -> Result<u32, InputError> {
    a.checked_mul(b).ok_or_else(|| overflow(path))
}

/// A count (of containers, of pods) as `u32`, or the field whose count is past `u32::MAX`.
pub fn count_at(n: impl TryInto<u32>, path: &str) -> Result<u32, InputError> {
    n.try_into().map_err(|_| overflow(path))
}

fn overflow(path: &str) -> InputError {
    InputError::Overflow {
        path: path.to_string(),
        limit: u32::MAX,
    }
}
