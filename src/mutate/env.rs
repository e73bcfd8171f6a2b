//! Merging the policy's env into a container, respecting what the user set (SPEC §4.2).
use crate::error::InputError;
use crate::json::{self, field, Object};
use serde_json::{json, Value};

/// A variable the policy wants in a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedVar {
    pub name: &'static str,
    pub value: String,
}

/// What to add to one container: the new entries (to go before the user's own, so that the
/// user's `$(VAR)` references to them expand) and the warnings for user values that disagree.
#[derive(Debug, Default, PartialEq)]
pub struct EnvPlan {
    pub prepend: Vec<Value>,
    pub warnings: Vec<String>,
}

/// Each wanted variable is judged on its own: one the container already sets, by `value` or
/// `valueFrom`, is left exactly as it is; a literal that disagrees earns a warning.
pub fn plan_env(
    container: &Object,
    path: &str,
    label: &str,
    wanted: &[WantedVar],
) -> Result<EnvPlan, InputError> {
    let existing = json::opt_array(container, "env", path)?.map_or(&[][..], Vec::as_slice);
    let env_path = json::join(path, "env");
    let mut user_vars: Vec<(&str, Option<&str>)> = Vec::with_capacity(existing.len());
    for (i, entry) in existing.iter().enumerate() {
        let e_path = json::index(&env_path, i);
        let e = json::as_object(entry, &e_path)?;
        let name = json::opt_str(e, "name", &e_path)?.unwrap_or("");
        // No `value` and no `valueFrom` means the empty string.
        let literal = match field(e, "valueFrom") {
            Some(_) => None,
            None => Some(json::opt_str(e, "value", &e_path)?.unwrap_or("")),
        };
        user_vars.push((name, literal));
    }
    let mut plan = EnvPlan::default();
    for var in wanted {
        match user_vars.iter().find(|(name, _)| *name == var.name) {
            None => plan.prepend.push(json!({"name": var.name, "value": var.value})),
            Some((_, Some(literal))) if *literal != var.value => plan.warnings.push(format!(
                "{label}: {} is set to {literal:?} but the policy computed {:?}; the container's value is kept",
                var.name, var.value
            )),
            Some(_) => {}
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
        )
        .unwrap();
        assert_eq!(plan.prepend, vec![json!({"name": "D", "value": "4"})]);
        assert_eq!(
            plan.warnings,
            vec!["container \"w\": B is set to \"9\" but the policy computed \"2\"; the container's value is kept"]
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
