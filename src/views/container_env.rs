//! What a container's own `env` entries will resolve to, as far as admission can tell (SPEC §4.2):
//! literals with `$(VAR)` expanded from earlier variables, as the kubelet does, and `fieldRef`s to
//! labels and annotations whose values the caller knows. Anything else (a Secret, a resource, a
//! `$(VAR)` that only `envFrom` or a Service could define) is unknown, and an unknown value is
//! never called a contradiction. Pod admission, the env merge and the CREATE warnings share it.
use crate::error::InputError;
use crate::json::{self, field, Object};
use serde_json::Value;
use std::collections::BTreeMap;

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

/// One entry of a container's `env`, read once when the view is built. The CREATE warnings read
/// `name` and `valueFrom.fieldRef.fieldPath` where they are strings, even on an entry that is
/// otherwise malformed; the env merge needs the whole entry (`checked`), or what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvEntry<'a> {
    pub name: Option<&'a str>,
    pub field_path: Option<&'a str>,
    pub checked: Result<UserEntry<'a>, InputError>,
}

/// The container's `env`, in order. A value that is not a list is an error; each malformed
/// entry keeps its own.
pub fn env_entries<'a>(container: &'a Object, path: &str) -> Result<Vec<EnvEntry<'a>>, InputError> {
    let existing = json::opt_array(container, "env", path)?.map_or(&[][..], Vec::as_slice);
    Ok(existing
        .iter()
        .enumerate()
        .map(|(i, entry)| EnvEntry {
            name: entry.get("name").and_then(Value::as_str),
            field_path: entry.get("valueFrom").and_then(field_ref),
            checked: checked_entry(entry, &json::index(&json::join(path, "env"), i)),
        })
        .collect())
}

fn field_ref(from: &Value) -> Option<&str> {
    from.get("fieldRef")?.get("fieldPath")?.as_str()
}

fn checked_entry<'a>(entry: &'a Value, path: &str) -> Result<UserEntry<'a>, InputError> {
    let e = json::as_object(entry, path)?;
    let name = json::opt_str(e, "name", path)?.unwrap_or("");
    let source = match field(e, "valueFrom") {
        None => Source::Literal(json::opt_str(e, "value", path)?.unwrap_or("")),
        Some(from) => field_ref(from).map_or(Source::Other, Source::FieldRef),
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
    let inner = field_path.strip_prefix("metadata.")?.strip_suffix("']")?;
    let (map, key) = inner.split_once("['")?;
    let map = ["labels", "annotations"].into_iter().find(|m| *m == map)?;
    Some((map, key))
}

/// The resolved value of every entry of `entries`, in order: `None` where admission cannot
/// know it. `injected` are the variables the policy puts before them, which the user's
/// entries may reference; `lookup` answers a `fieldRef` path, or `None`. Each path is looked up
/// once, and the resolved text is held to [`expansion_budget`]: the kubelet would double a value
/// with each `B=$(A)$(A)`, and thousands of entries may read one large annotation, so without it
/// a request of a few hundred kilobytes could take the module's whole time.
fn resolve_all(
    entries: &[UserEntry],
    injected: &[&WantedVar],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Vec<Option<String>> {
    let mut fields: BTreeMap<&str, Option<String>> = BTreeMap::new();
    for entry in entries {
        if let Source::FieldRef(path) = entry.source {
            fields.entry(path).or_insert_with(|| lookup(path));
        }
    }
    let mut budget = expansion_budget(entries, injected, &fields);
    // Later definitions of a name replace earlier ones, as the kubelet reads them in order.
    let mut defined: BTreeMap<&str, Option<String>> = injected
        .iter()
        .map(|v| (v.name, Some(v.value.clone())))
        .collect();
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let value = match entry.source {
            _ if budget == 0 => None,
            Source::Literal(text) => expand(text, &defined, budget),
            Source::FieldRef(path) => fields
                .get(path)
                .and_then(Option::as_deref)
                .filter(|v| v.len() <= budget)
                .map(str::to_string),
            Source::Other => None,
        };
        let value = value.filter(|v| v.len() <= budget);
        budget -= value.as_ref().map_or(0, String::len);
        defined.insert(entry.name, value.clone());
        out.push(value);
    }
    out
}

/// A variable the policy wants that the container sets itself, to something else.
pub struct Disagreement<'w> {
    pub var: &'w WantedVar,
    /// The user's last entry of it, the one the kubelet keeps.
    pub entry: usize,
    pub value: String,
}

/// The `wanted` variables that `entries` set and whose last entry resolves to another value, in
/// `wanted`'s order: the pod's env warnings and the CREATE warnings. The wanted variables the
/// entries do not set go before them, where the entries' `$(VAR)` references reach them.
pub fn disagreements<'w>(
    entries: &[UserEntry],
    wanted: &'w [WantedVar],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Vec<Disagreement<'w>> {
    let (kept, injected): (Vec<&WantedVar>, Vec<&WantedVar>) = wanted
        .iter()
        .partition(|var| entries.iter().any(|e| e.name == var.name));
    if kept.is_empty() {
        return Vec::new();
    }
    let resolved = resolve_all(entries, &injected, lookup);
    kept.into_iter()
        .filter_map(|var| {
            let entry = entries.iter().rposition(|e| e.name == var.name)?;
            let value = resolved[entry].as_ref().filter(|v| **v != var.value)?;
            Some(Disagreement {
                var,
                entry,
                value: value.clone(),
            })
        })
        .collect()
}

/// What the container's own last `name` entry resolves to: `None` when it sets none,
/// `Some(None)` when admission cannot know the value (a Secret, a reference to `envFrom`).
pub fn own_value(
    entries: &[UserEntry],
    name: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Option<Option<String>> {
    let last = entries.iter().rposition(|e| e.name == name)?;
    Some(resolve_all(&entries[..=last], &[], lookup).pop().flatten())
}

/// How much resolved text one container's env may come to: twice the text it was given
/// (literals, the policy's values, and each field it reads, once), and 4 KiB more for what
/// references repeat. Only warnings depend on a resolved value, and an unknown one earns none.
fn expansion_budget(
    entries: &[UserEntry],
    injected: &[&WantedVar],
    fields: &BTreeMap<&str, Option<String>>,
) -> usize {
    let given = entries
        .iter()
        .map(|e| match e.source {
            Source::Literal(text) => text.len(),
            Source::FieldRef(_) | Source::Other => 0,
        })
        .chain(injected.iter().map(|v| v.value.len()))
        .chain(fields.values().flatten().map(String::len))
        .fold(0usize, usize::saturating_add);
    given.saturating_mul(2).saturating_add(4096)
}

/// Kubernetes' expansion: `$$` is `$`, `$(NAME)` is NAME's value when defined earlier. A
/// reference to a name not defined earlier in `env` may come from `envFrom` or a Service's
/// variables, so the result is unknown; so is one to an unknown value, and one longer than
/// `limit`. The test host's own expander (`multislice_host::env`) plays the kubelet on the final
/// pod and judges the policy, so the two share no code on purpose.
fn expand(text: &str, defined: &BTreeMap<&str, Option<String>>, limit: usize) -> Option<String> {
    let mut out = String::with_capacity(text.len().min(limit));
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some((name, tail)) = after.strip_prefix('(').and_then(|i| i.split_once(')')) {
            let value = defined.get(name)?.as_deref()?;
            if out.len().saturating_add(value.len()) > limit {
                return None;
            }
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
    use serde_json::json;

    /// What each entry of a container with this `env` resolves to.
    fn resolve(
        env: Value,
        injected: &[&WantedVar],
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<Option<String>>, InputError> {
        let c = json!({ "env": env });
        let entries = env_entries(c.as_object().unwrap(), "spec.containers[0]");
        Ok(resolve_all(&user_entries(&entries)?, injected, lookup))
    }

    fn lengths(values: &[Option<String>]) -> Vec<Option<usize>> {
        values.iter().map(|v| v.as_ref().map(String::len)).collect()
    }

    #[test]
    fn expands_earlier_literals_fieldrefs_and_injected_variables() {
        let env = json!([
            {"name": "JOBSET_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['jobset.sigs.k8s.io/jobset-name']"}}},
            {"name": "ADDR", "value": "$(JOBSET_NAME)-w-$(MEGASCALE_SLICE_ID)-0.$(JOBSET_NAME)"},
            {"name": "COST", "value": "$$(ADDR) $5"},
            {"name": "LATER", "value": "$(NOT_YET)"},
            {"name": "NOT_YET", "value": "x"},
            {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "USES_SECRET", "value": "a-$(SECRET)"},
            {"name": "UNCLOSED", "value": "$(ADDR"}
        ]);
        let injected = [&WantedVar::new("MEGASCALE_SLICE_ID", "3")];
        let lookup = |p: &str| {
            (metadata_key(p) == Some(("annotations", "jobset.sigs.k8s.io/jobset-name")))
                .then(|| "js".to_string())
        };
        assert_eq!(
            resolve(env, &injected, &lookup).unwrap(),
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
    fn a_doubling_chain_is_unknown_past_the_budget() {
        // B1=$(B0)$(B0), B2=$(B1)$(B1), …: B40 would be 2^40 bytes long.
        let mut env = vec![json!({"name": "B0", "value": "x"})];
        for i in 1..=40 {
            env.push(json!({"name": format!("B{i}"), "value": format!("$(B{0})$(B{0})", i - 1)}));
        }
        let lengths = lengths(&resolve(json!(env), &[], &|_| None).unwrap());
        // The budget is 4096 and twice the literals' 1 + 10 * 10 + 30 * 12 = 461 bytes: 5018.
        // B0..B11 spend 4095 of it, and B12 (4096 bytes) would pass it.
        let known: Vec<Option<usize>> = (0..=11).map(|i| Some(1 << i)).collect();
        assert_eq!(lengths[..=11], known[..]);
        assert!(lengths[12..].iter().all(Option::is_none), "{lengths:?}");
    }

    #[test]
    fn a_large_field_is_known_once_and_its_copies_are_held_to_the_budget() {
        // One 10 KiB annotation, read by three entries and referenced by a fourth: the field
        // counts once towards the budget (2 * (10240 + 4) + 4096 = 24584), so the first two
        // reads are known and the third would pass what is left.
        let env = json!([
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['big']"}}},
            {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['big']"}}},
            {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['big']"}}},
            {"name": "D", "value": "$(A)"}
        ]);
        let looked_up = std::cell::Cell::new(0);
        let lookup = |p: &str| {
            looked_up.set(looked_up.get() + 1);
            (metadata_key(p) == Some(("annotations", "big"))).then(|| "v".repeat(10_240))
        };
        assert_eq!(
            lengths(&resolve(env, &[], &lookup).unwrap()),
            vec![Some(10_240), Some(10_240), None, None]
        );
        assert_eq!(looked_up.get(), 1);
    }

    #[test]
    fn a_malformed_entry_names_its_path() {
        assert_eq!(
            resolve(json!([{"name": "A"}, "oops"]), &[], &|_| None)
                .unwrap_err()
                .to_string(),
            "spec.containers[0].env[1]: expected an object, found the string \"oops\""
        );
    }
}
