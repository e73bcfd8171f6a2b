//! Merging the policy's env into a container, respecting what the user set (SPEC §4.2).
use crate::error::InputError;
use crate::json::Object;
use crate::views::container_env::{self, WantedVar};
use serde_json::{json, Value};

/// What to add to one container: the new entries (to go before the user's own, so that the
/// user's `$(VAR)` references to them expand) and the warnings for user values that disagree.
#[derive(Debug, Default, PartialEq)]
pub struct EnvPlan {
    pub prepend: Vec<Value>,
    pub warnings: Vec<String>,
}

/// Each wanted variable is judged on its own: one the container already sets, by `value` or
/// `valueFrom`, is left exactly as it is; one whose value resolves (see [`container_env`]) to
/// something else earns a warning. `lookup` answers `fieldRef` paths of the pod.
pub fn plan_env(
    container: &Object,
    path: &str,
    label: &str,
    wanted: &[WantedVar],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<EnvPlan, InputError> {
    let user = container_env::user_entries(container, path)?;
    let (kept, injected): (Vec<&WantedVar>, Vec<&WantedVar>) = wanted
        .iter()
        .partition(|var| user.iter().any(|e| e.name == var.name));
    let injected: Vec<WantedVar> = injected.into_iter().cloned().collect();
    let mut plan = EnvPlan {
        prepend: injected
            .iter()
            .map(|var| json!({"name": var.name, "value": var.value}))
            .collect(),
        warnings: Vec::new(),
    };
    if kept.is_empty() {
        return Ok(plan);
    }
    let resolved = container_env::resolve_all(&user, &injected, lookup);
    for var in kept {
        // The kubelet keeps the last entry of a name.
        let last = user.iter().rposition(|e| e.name == var.name);
        if let Some(Some(value)) = last.map(|i| &resolved[i]) {
            if *value != var.value {
                plan.warnings.push(format!(
                    "{label}: {} resolves to {value:?} but the policy computed {:?}; the container's value is kept",
                    var.name, var.value
                ));
            }
        }
    }
    Ok(plan)
}

/// Puts `entries` before the container's own env.
pub fn prepend_env(container: &mut Object, entries: Vec<Value>) {
    let env = container
        .entry("env".to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if !env.is_array() {
        *env = Value::Array(Vec::new());
    }
    if let Value::Array(list) = env {
        list.splice(0..0, entries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &'static str, value: &str) -> WantedVar {
        WantedVar {
            name,
            value: value.into(),
        }
    }

    #[test]
    fn keeps_user_values_and_warns_only_on_disagreeing_literals() {
        let c = json!({"name": "w", "env": [
            {"name": "A", "value": "1"},
            {"name": "B", "value": "9"},
            {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
        ]});
        let plan = plan_env(
            c.as_object().unwrap(),
            "spec.containers[0]",
            "container \"w\"",
            &[var("A", "1"), var("B", "2"), var("C", "3"), var("D", "4")],
            &|_| None,
        )
        .unwrap();
        assert_eq!(plan.prepend, vec![json!({"name": "D", "value": "4"})]);
        assert_eq!(
            plan.warnings,
            vec!["container \"w\": B resolves to \"9\" but the policy computed \"2\"; the container's value is kept"]
        );
    }

    #[test]
    fn a_malformed_env_entry_names_its_path() {
        let c = json!({"env": [{"name": "A"}, "oops"]});
        let err = plan_env(
            c.as_object().unwrap(),
            "spec.containers[1]",
            "c",
            &[var("A", "")],
            &|_| None,
        );
        assert_eq!(
            err.unwrap_err().to_string(),
            "spec.containers[1].env[1]: expected an object, found the string \"oops\""
        );
    }

    #[test]
    fn prepends_before_the_users_entries() {
        let mut c = json!({"env": [{"name": "U", "value": "$(X)"}]});
        prepend_env(
            c.as_object_mut().unwrap(),
            vec![json!({"name": "X", "value": "1"})],
        );
        assert_eq!(
            c,
            json!({"env": [{"name": "X", "value": "1"}, {"name": "U", "value": "$(X)"}]})
        );
    }
}
