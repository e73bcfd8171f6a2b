//! What a container's own `env` entries will resolve to, as far as admission can tell
//! (docs/spec.md §4.2): literals with `$(VAR)` expanded from earlier variables, as the kubelet does,
//! and `fieldRef`s to labels and annotations whose values the caller knows. Anything else
//! (a Secret, a resource, a `$(VAR)` that only `envFrom` or a Service could define) is
//! unknown, and an unknown value is never called a contradiction.
//!
//! It only reads, so pod admission, the env merge and the CREATE warnings all use it.
use crate::error::InputError;
use crate::json::{self, field};
use crate::paths::{Lazy, PathLike};
use serde_json::Value;

/// A variable the policy wants in a container, with the value it computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedVar {
    pub name: &'static str,
    pub value: String,
}

impl WantedVar {
    pub fn new(name: &'static str, value: impl ToString) -> WantedVar {
        WantedVar {
            name,
            value: value.to_string(),
        }
    }
}

/// Where a user's env entry takes its value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    /// `value` (absent means the empty string).
    Literal(&'a str),
    /// `valueFrom.fieldRef.fieldPath`.
    FieldRef(&'a str),
    /// Any other `valueFrom`.
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserEntry<'a> {
    pub name: &'a str,
    pub source: Source<'a>,
}

/// One entry of a container's `env`, read once when the view is built. The CREATE warnings
/// read the name and the `fieldRef` as written, even on an entry that is otherwise malformed;
/// the env merge needs the whole entry, and reports what is wrong with it when it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvEntry<'a> {
    /// `name`, where it is a string.
    pub name: Option<&'a str>,
    /// `valueFrom.fieldRef.fieldPath`, where it is a string.
    pub field_path: Option<&'a str>,
    /// The entry as the kubelet reads it, or what is wrong with it (naming its path).
    pub checked: Result<UserEntry<'a>, InputError>,
}

/// The container's `env` (found with [`json::fields`]), in order. A value that is not a list
/// is an error; each malformed entry keeps its own.
pub fn env_entries<'a>(
    env: Option<&'a Value>,
    path: impl PathLike,
) -> Result<Vec<EnvEntry<'a>>, InputError> {
    let existing = json::array_of(env, "env", path)?.map_or(&[][..], Vec::as_slice);
    Ok(existing
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let field_path = entry
                .get("valueFrom")
                .and_then(|from| from.get("fieldRef"))
                .and_then(|r| r.get("fieldPath"))
                .and_then(Value::as_str);
            EnvEntry {
                name: entry.get("name").and_then(Value::as_str),
                field_path,
                // Built only if this entry is malformed.
                checked: checked_entry(
                    entry,
                    Lazy(move || json::index(&json::join(&path.render(), "env"), i)),
                ),
            }
        })
        .collect())
}

fn checked_entry<'a>(entry: &'a Value, path: impl PathLike) -> Result<UserEntry<'a>, InputError> {
    let e = json::as_object(entry, path)?;
    let name = json::opt_str(e, "name", path)?.unwrap_or("");
    let source = match field(e, "valueFrom") {
        None => Source::Literal(json::opt_str(e, "value", path)?.unwrap_or("")),
        Some(from) => from
            .get("fieldRef")
            .and_then(|r| r.get("fieldPath"))
            .and_then(|p| p.as_str())
            .map_or(Source::Other, Source::FieldRef),
    };
    Ok(UserEntry { name, source })
}

/// The entries as the kubelet reads them; the first malformed one is the error.
pub fn user_entries<'a>(
    entries: &Result<Vec<EnvEntry<'a>>, InputError>,
) -> Result<Vec<UserEntry<'a>>, InputError> {
    entries
        .as_ref()
        .map_err(Clone::clone)?
        .iter()
        .map(|e| e.checked.clone())
        .collect()
}

/// The label or annotation a `fieldRef` path reads: `("labels" | "annotations", key)`.
pub fn metadata_key(field_path: &str) -> Option<(&'static str, &str)> {
    for map in ["labels", "annotations"] {
        let prefix = if map == "labels" {
            "metadata.labels['"
        } else {
            "metadata.annotations['"
        };
        if let Some(key) = field_path
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix("']"))
        {
            return Some((map, key));
        }
    }
    None
}

/// The resolved value of every entry of `entries`, in order: `None` where admission cannot
/// know it. `injected` are the variables the policy puts before them, which the user's
/// entries may reference; `lookup` answers a `fieldRef` path, or `None`.
pub fn resolve_all(
    entries: &[UserEntry],
    injected: &[WantedVar],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Vec<Option<String>> {
    // Later definitions of a name win, so the search runs backwards.
    let mut defined: Vec<(&str, Option<String>)> = injected
        .iter()
        .map(|v| (v.name, Some(v.value.clone())))
        .collect();
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let value = match entry.source {
            Source::Literal(text) => expand(text, &defined),
            Source::FieldRef(path) => lookup(path),
            Source::Other => None,
        };
        defined.push((entry.name, value.clone()));
        out.push(value);
    }
    out
}

/// Kubernetes' expansion: `$$` is `$`, `$(NAME)` is NAME's value when defined earlier. A
/// reference to a name not defined earlier in `env` may come from `envFrom` or a Service's
/// variables, so the result is unknown; so is one to an unknown value.
///
/// The test host has an expander of its own (`multislice_host::env`), on purpose: it plays
/// the kubelet on the final pod, where every value is known and an unknown reference stays
/// as written, and it must judge the policy without sharing its code. This one predicts, at
/// admission, what the kubelet will make of values it may not know yet.
fn expand(text: &str, defined: &[(&str, Option<String>)]) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some((name, tail)) = after.strip_prefix('(').and_then(|inner| {
            inner
                .find(')')
                .map(|end| (&inner[..end], &inner[end + 1..]))
        }) {
            let value = defined.iter().rev().find(|(n, _)| *n == name)?.1.as_ref()?;
            out.push_str(value);
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Object;
    use serde_json::json;

    fn entries(env: serde_json::Value) -> (Object, String) {
        let c = json!({ "env": env });
        (c.as_object().unwrap().clone(), "spec.containers[0]".into())
    }

    #[test]
    fn expands_earlier_literals_fieldrefs_and_injected_variables() {
        let (c, path) = entries(json!([
            {"name": "JOBSET_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['jobset.sigs.k8s.io/jobset-name']"}}},
            {"name": "ADDR", "value": "$(JOBSET_NAME)-w-$(MEGASCALE_SLICE_ID)-0.$(JOBSET_NAME)"},
            {"name": "COST", "value": "$$(ADDR) $5"},
            {"name": "LATER", "value": "$(NOT_YET)"},
            {"name": "NOT_YET", "value": "x"},
            {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "USES_SECRET", "value": "a-$(SECRET)"},
            {"name": "UNCLOSED", "value": "$(ADDR"}
        ]));
        let injected = [WantedVar {
            name: "MEGASCALE_SLICE_ID",
            value: "3".into(),
        }];
        let lookup = |p: &str| {
            (metadata_key(p) == Some(("annotations", "jobset.sigs.k8s.io/jobset-name")))
                .then(|| "js".to_string())
        };
        let got = resolve_all(
            &user_entries(&env_entries(field(&c, "env"), &path)).unwrap(),
            &injected,
            &lookup,
        );
        assert_eq!(
            got,
            vec![
                Some("js".into()),
                Some("js-w-3-0.js".into()),
                Some("$(ADDR) $5".into()),
                None,
                Some("x".into()),
                None,
                None,
                Some("$(ADDR".into()),
            ]
        );
    }

    #[test]
    fn a_malformed_entry_names_its_path() {
        let (c, path) = entries(json!([{"name": "A"}, "oops"]));
        assert_eq!(
            user_entries(&env_entries(field(&c, "env"), &path))
                .unwrap_err()
                .to_string(),
            "spec.containers[0].env[1]: expected an object, found the string \"oops\""
        );
    }
}
