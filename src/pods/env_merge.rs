//! Merging the policy's env into a container, respecting what the user set (docs/contributing/spec.md §4.2): which
//! wanted variables to add, and the warnings for user values that disagree. `mutate::pod_patch`
//! writes the additions.
use crate::views::container_env::{self, UserEntry, WantedVar};
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
    user: &[UserEntry],
    label: &str,
    wanted: &[WantedVar],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> EnvPlan {
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
        return plan;
    }
    let resolved = container_env::resolve_all(user, &injected, lookup);
    for var in kept {
        // The kubelet keeps the last entry of a name.
        let last = user.iter().rposition(|e| e.name == var.name);
        if let Some(Some(value)) = last.map(|i| &resolved[i]) {
            if *value != var.value {
                plan.warnings.push(format!(
                    "{label}: {} keeps {value:?}, not the {:?} the policy computed",
                    var.name, var.value
                ));
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::container_env::{env_entries, user_entries};

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
        let entries = env_entries(c.as_object().unwrap(), "spec.containers[0]");
        let plan = plan_env(
            &user_entries(&entries).unwrap(),
            "container \"w\"",
            &[var("A", "1"), var("B", "2"), var("C", "3"), var("D", "4")],
            &|_| None,
        );
        assert_eq!(plan.prepend, vec![json!({"name": "D", "value": "4"})]);
        assert_eq!(
            plan.warnings,
            vec!["container \"w\": B keeps \"9\", not the \"2\" the policy computed"]
        );
    }
}
