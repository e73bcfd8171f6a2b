//! Path-aware, read-only access to raw JSON. The policy edits objects as JSON so that no field it
//! does not know is lost (SPEC §4.5); these helpers turn a wrong shape into an [`InputError`] that
//! names the field instead of a panic.
use crate::error::InputError;
use serde_json::{Map, Value};

pub type Object = Map<String, Value>;

/// An optional field as read: absent, present, or of the wrong shape (an error naming it).
pub type OptField<T> = Result<Option<T>, InputError>;

pub fn type_name(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.len() <= 40 => format!("the string {s:?}"),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// `v`, at `path`, is not `expected`.
pub fn wrong(path: &str, expected: &'static str, v: &Value) -> InputError {
    InputError::WrongType {
        path: path.to_string(),
        expected,
        found: type_name(v),
    }
}

pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

pub fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// A field of an object; `null` counts as absent, as the API server treats it.
pub fn field<'a>(obj: &'a Object, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

pub fn as_object<'a>(v: &'a Value, path: &str) -> Result<&'a Object, InputError> {
    v.as_object().ok_or_else(|| wrong(path, "an object", v))
}

/// `obj[key]` as `cast` reads it; a value `cast` does not take is an error that names it.
fn opt_as<'a, T>(
    obj: &'a Object,
    key: &str,
    path: &str,
    expected: &'static str,
    cast: fn(&'a Value) -> Option<T>,
) -> OptField<T> {
    field(obj, key)
        .map(|v| cast(v).ok_or_else(|| wrong(&join(path, key), expected, v)))
        .transpose()
}

pub fn opt_object<'a>(obj: &'a Object, key: &str, path: &str) -> OptField<&'a Object> {
    opt_as(obj, key, path, "an object", Value::as_object)
}

/// `obj[key]`, an object that must be there.
pub fn required<'a>(obj: &'a Object, key: &str, path: &str) -> Result<&'a Object, InputError> {
    opt_object(obj, key, path)?.ok_or_else(|| InputError::missing(join(path, key)))
}

pub fn opt_array<'a>(obj: &'a Object, key: &str, path: &str) -> OptField<&'a Vec<Value>> {
    opt_as(obj, key, path, "a list", Value::as_array)
}

pub fn opt_str<'a>(obj: &'a Object, key: &str, path: &str) -> OptField<&'a str> {
    opt_as(obj, key, path, "a string", Value::as_str)
}

pub fn opt_bool(obj: &Object, key: &str, path: &str) -> OptField<bool> {
    opt_as(obj, key, path, "a boolean", Value::as_bool)
}

/// A Kubernetes int32 count (replicas, parallelism, indexes): an integer in 0..=i32::MAX.
pub fn opt_count(obj: &Object, key: &str, path: &str) -> OptField<u32> {
    let Some(v) = field(obj, key) else {
        return Ok(None);
    };
    let Value::Number(n) = v else {
        return Err(wrong(&join(path, key), "a whole number", v));
    };
    let out_of_range = || InputError::OutOfRange {
        path: join(path, key),
        value: n.to_string(),
        expected: "it must be a whole number from 0 to 2147483647",
    };
    if let Some(i) = n.as_i64() {
        let count = i32::try_from(i).ok().and_then(|i| u32::try_from(i).ok());
        return count.map(Some).ok_or_else(out_of_range);
    }
    if n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
        return Err(out_of_range());
    }
    Err(wrong(&join(path, key), "a whole number", v))
}

/// A string-to-string map (labels, annotations, nodeSelector).
pub fn opt_string_map<'a>(obj: &'a Object, key: &str, path: &str) -> OptField<&'a Object> {
    let Some(map) = opt_object(obj, key, path)? else {
        return Ok(None);
    };
    match map.iter().find(|(_, v)| !v.is_string()) {
        None => Ok(Some(map)),
        Some((k, v)) => Err(wrong(&format!("{}[{k:?}]", join(path, key)), "a string", v)),
    }
}

/// A value from a string map known to hold only strings (see [`opt_string_map`]).
pub fn map_str<'a>(map: Option<&'a Object>, key: &str) -> Option<&'a str> {
    map.and_then(|m| m.get(key)).and_then(Value::as_str)
}

/// Parses a count written into a label or annotation (`"4"`), as the controllers write them.
pub fn parse_count(s: &str, path: &str) -> Result<u32, InputError> {
    let valid = !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit());
    let parsed = valid.then(|| s.parse::<u32>().ok()).flatten();
    parsed.filter(|n| *n <= i32::MAX as u32).ok_or_else(|| {
        InputError::invalid(
            path,
            format!("{s:?} is not a whole number from 0 to 2147483647"),
        )
    })
}
