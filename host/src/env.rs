//! Resolving a container's env the way the kubelet does: literals with `$(VAR)` expansion of
//! earlier variables, and `fieldRef`s to the pod's own metadata.
use anyhow::{bail, Result};
use serde_json::Value;

/// Expands `$(NAME)` for variables defined earlier; `$$` escapes; unknown references stay.
///
/// The policy has an expander of its own (`views/container_env.rs`), on purpose: this one
/// plays the kubelet on the final pod, where every value is known, and the test host stays
/// independent of the policy so that it can judge it. The policy's predicts, at admission,
/// what the kubelet will make of values it may not know yet, and calls those unknown.
fn expand(text: &str, defined: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match defined.iter().rev().find(|(n, _)| n == name) {
                        Some((_, v)) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn field_ref(pod: &Value, path: &str) -> Result<String> {
    let meta = |k: &str| {
        pod.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
    };
    let from_map = |map: &str, key: &str| {
        pod.pointer(&format!("/metadata/{map}"))
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_default()
    };
    if let Some(key) = path
        .strip_prefix("metadata.annotations['")
        .and_then(|s| s.strip_suffix("']"))
    {
        return Ok(from_map("annotations", key));
    }
    if let Some(key) = path
        .strip_prefix("metadata.labels['")
        .and_then(|s| s.strip_suffix("']"))
    {
        return Ok(from_map("labels", key));
    }
    match path {
        "metadata.name" => Ok(meta("name")
            .or(meta("generateName"))
            .unwrap_or("")
            .to_string()),
        "metadata.namespace" => Ok(meta("namespace").unwrap_or("").to_string()),
        other => bail!("fieldRef {other} is not resolved by this harness"),
    }
}

/// The resolved env of `container` in `pod`, in order; a later duplicate wins, as in the kubelet.
pub fn resolve(pod: &Value, container: &Value) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for entry in container
        .get("env")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
    {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let value = if let Some(path) = entry
            .pointer("/valueFrom/fieldRef/fieldPath")
            .and_then(Value::as_str)
        {
            field_ref(pod, path)?
        } else if entry.get("valueFrom").is_some() {
            "<from a ConfigMap, Secret or resource>".to_string()
        } else {
            expand(
                entry.get("value").and_then(Value::as_str).unwrap_or(""),
                &out,
            )
        };
        out.retain(|(n, _)| *n != name);
        out.push((name, value));
    }
    Ok(out)
}

/// One variable of a resolved env.
pub fn get<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expands_only_earlier_variables() {
        let pod = json!({"metadata": {"annotations": {"a": "7"}}});
        let c = json!({"env": [
            {"name": "LATE_REF", "value": "x-$(B)"},
            {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['a']"}}},
            {"name": "C", "value": "y-$(B)-$$(B)"}
        ]});
        let env = resolve(&pod, &c).unwrap();
        assert_eq!(get(&env, "LATE_REF"), Some("x-$(B)"));
        assert_eq!(get(&env, "B"), Some("7"));
        assert_eq!(get(&env, "C"), Some("y-7-$(B)"));
    }
}
