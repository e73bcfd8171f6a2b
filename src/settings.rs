//! Policy settings (SPEC §8): defaults, parsing with messages that name the key, and validation.
use crate::accelerators::{self, Accelerator};
use crate::k8s_syntax::check_qualified_name;
use crate::spelling;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JaxEnv {
    /// Only JobSets annotated `multislice.kubewarden.io/jax-distributed: "true"`.
    Annotated,
    Always,
    Never,
}

/// Which half of the work this deployment of the module does (SPEC §5 "Roles"). Mutating webhooks
/// run before JobSet's and Kueue's, validating ones after every mutating webhook: the recommended
/// pair mutates in one policy and judges the stored object in the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// One mutating policy that also judges: the default.
    Both,
    /// Only the mutations; refuses only malformed requests.
    Mutate,
    /// Only the verdicts and warnings, on JobSets and opted-in Jobs; never a mutation.
    Validate,
}

impl Role {
    pub fn mutates(self) -> bool {
        self != Role::Validate
    }

    pub fn validates(self) -> bool {
        self != Role::Mutate
    }
}

/// Whether JobSet CREATE looks up the JobSet's Kueue queue (SPEC §8 `queueCheck`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueCheck {
    Off,
    /// Accept, with a warning, a JobSet that no flavour of its queue fits.
    Warn,
    /// Refuse it.
    Refuse,
}

/// The settings, one row each (SPEC §8): the field and its type, the key users write, its
/// default, and the reader of a value, called with the field, the key, the value and the list
/// of problems. The struct, its `Default`, [`KEYS`] and the parser's dispatch are all made from
/// this one list, in its order (the README's table's).
macro_rules! settings {
    ($($(#[$doc:meta])* $field:ident: $ty:ty = $key:literal, $default:expr, $read:expr;)*) => {
        #[derive(Debug, Clone, PartialEq)]
        pub struct Settings {
            $($(#[$doc])* pub $field: $ty,)*
        }

        impl Default for Settings {
            fn default() -> Self {
                Settings { $($field: $default,)* }
            }
        }

        /// Every settings key, as users write it.
        pub const KEYS: &[&str] = &[$($key,)*];

        impl Settings {
            /// Reads `value` into the setting `key`; false when `key` is no setting.
            fn read_key(&mut self, key: &str, value: &Value, errors: &mut Vec<String>) -> bool {
                match key {
                    $($key => ($read)(&mut self.$field, key, value, errors),)*
                    _ => return false,
                }
                true
            }
        }
    };
}

settings! {
    multislice_env: bool = "multisliceEnv", true, read;
    tpu_worker_env: bool = "tpuWorkerEnv", false, read;
    jax_env: JaxEnv = "jaxEnv", JaxEnv::Annotated, choice(&JAX_ENV_CHOICES);
    jax_coordinator_port: u16 = "jaxCoordinatorPort", 6666, read_port;
    tpu_resource: String = "tpuResource", "google.com/tpu".into(), read;
    accelerator_label: String =
        "acceleratorLabel", "cloud.google.com/gke-tpu-accelerator".into(), read;
    topology_label: String = "topologyLabel", "cloud.google.com/gke-tpu-topology".into(), read;
    require_tpu_node_selectors: bool = "requireTpuNodeSelectors", true, read;
    require_exclusive_topology: bool = "requireExclusiveTopology", true, read;
    /// Label keys whose domain is one multi-host slice (X1; K1–K3 read them as slice-level): the
    /// node pool, and GKE dynamic slicing's slice.
    exclusive_topology_keys: Vec<String> = "exclusiveTopologyKeys",
        vec!["cloud.google.com/gke-nodepool".into(), "cloud.google.com/gke-tpu-slice".into()], read;
    /// Added to, or overriding, the built-in accelerator table (SPEC §7).
    accelerators: accelerators::Overrides = "accelerators", BTreeMap::new(), read_accelerators;
    reject_unknown_accelerators: bool = "rejectUnknownAccelerators", false, read;
    role: Role = "role", Role::Both, choice(&ROLE_CHOICES);
    /// Narrow queued TPU JobSets to the slice shapes that fit them (SPEC §4.7).
    narrow_queued_jobsets: bool = "narrowQueuedJobSets", true, read;
    /// Look up the queue of a queued TPU JobSet at CREATE (context-aware; off by default).
    queue_check: QueueCheck = "queueCheck", QueueCheck::Off, read_queue_check;
    /// The users that MultiKueue managers' kubeconfigs authenticate as in this cluster (SPEC §5).
    multi_kueue_users: Vec<String> = "multiKueueUsers", Vec::new(), read;
}

impl Settings {
    /// Parses settings, collecting every problem, each naming its key.
    pub fn from_json(value: &Value) -> Result<Settings, Vec<String>> {
        let mut s = Settings::default();
        let mut errors = Vec::new();
        let map = match value {
            Value::Null => return Ok(s),
            Value::Object(m) => m,
            other => {
                return Err(vec![format!(
                    "settings must be an object, found {}",
                    crate::json::type_name(other)
                )])
            }
        };
        for (key, value) in map {
            if !s.read_key(key, value, &mut errors) {
                errors.push(unknown_key_message(key));
            }
        }
        s.check_values(&mut errors);
        errors.is_empty().then_some(s).ok_or(errors)
    }

    fn check_values(&self, errors: &mut Vec<String>) {
        for (key, value) in [
            ("tpuResource", &self.tpu_resource),
            ("acceleratorLabel", &self.accelerator_label),
            ("topologyLabel", &self.topology_label),
        ] {
            if let Err(why) = check_qualified_name(value) {
                errors.push(format!("{key}: {value:?} is not a valid key: {why}"));
            }
        }
        if self.exclusive_topology_keys.is_empty() {
            errors.push("exclusiveTopologyKeys: must name at least one label key, for example [\"cloud.google.com/gke-nodepool\"]".into());
        }
        for (i, key) in self.exclusive_topology_keys.iter().enumerate() {
            if let Err(why) = check_qualified_name(key) {
                errors.push(format!(
                    "exclusiveTopologyKeys[{i}]: {key:?} is not a valid label key: {why}"
                ));
            }
        }
        for (name, entry) in &self.accelerators {
            for problem in entry.problems() {
                errors.push(format!("accelerators[{name:?}].{problem}"));
            }
        }
    }
}

fn read<T: DeserializeOwned>(slot: &mut T, key: &str, v: &Value, errors: &mut Vec<String>) {
    match T::deserialize(v) {
        Ok(parsed) => *slot = parsed,
        Err(e) => errors.push(format!("{key}: {e}")),
    }
}

/// Each entry on its own, so that a message names the accelerator it is about.
fn read_accelerators(
    slot: &mut BTreeMap<String, Accelerator>,
    key: &str,
    v: &Value,
    errors: &mut Vec<String>,
) {
    let Value::Object(entries) = v else {
        errors.push(format!(
            "{key}: expected a map of accelerator name to entry, found {}",
            crate::json::type_name(v)
        ));
        return;
    };
    for (name, entry) in entries {
        match Accelerator::deserialize(entry) {
            Ok(mut row) => {
                row.name = name.clone().into();
                slot.insert(name.clone(), row);
            }
            Err(e) => errors.push(format!("{key}[{name:?}]: {e}")),
        }
    }
}

/// The reader of a setting that is one of `choices`, by name.
fn choice<T: Copy>(
    choices: &'static [(&'static str, T)],
) -> impl Fn(&mut T, &str, &Value, &mut Vec<String>) {
    move |slot, key, v, errors| match choices.iter().find(|(name, _)| v.as_str() == Some(name)) {
        Some((_, value)) => *slot = *value,
        None => {
            let names: Vec<String> = choices.iter().map(|(n, _)| format!("{n:?}")).collect();
            errors.push(format!(
                "{key}: expected one of {}, found {}",
                names.join(", "),
                crate::json::type_name(v)
            ))
        }
    }
}

const JAX_ENV_CHOICES: [(&str, JaxEnv); 3] = [
    ("annotated", JaxEnv::Annotated),
    ("always", JaxEnv::Always),
    ("never", JaxEnv::Never),
];

const ROLE_CHOICES: [(&str, Role); 3] = [
    ("both", Role::Both),
    ("mutate", Role::Mutate),
    ("validate", Role::Validate),
];

const QUEUE_CHECK_CHOICES: [(&str, QueueCheck); 3] = [
    ("off", QueueCheck::Off),
    ("warn", QueueCheck::Warn),
    ("refuse", QueueCheck::Refuse),
];

/// `queueCheck`: a YAML 1.1 reader makes `false` of an unquoted `off`, which means `off`; the
/// `true` of an unquoted `on` or `yes` names no choice.
fn read_queue_check(slot: &mut QueueCheck, key: &str, v: &Value, errors: &mut Vec<String>) {
    match v {
        Value::Bool(false) => *slot = QueueCheck::Off,
        Value::Bool(true) => errors.push(format!(
            "{key}: expected one of \"off\", \"warn\", \"refuse\", found the boolean true: write a quoted \"warn\" or \"refuse\" (a YAML 1.1 reader makes true of an unquoted on or yes)"
        )),
        _ => choice(&QUEUE_CHECK_CHOICES)(slot, key, v, errors),
    }
}

fn read_port(slot: &mut u16, key: &str, v: &Value, errors: &mut Vec<String>) {
    match v.as_i64() {
        Some(p) if (1..=65535).contains(&p) => *slot = p as u16,
        Some(p) => errors.push(format!("{key}: {p} is not a port; use 1 to 65535")),
        None => errors.push(format!(
            "{key}: expected a port number from 1 to 65535, found {}",
            crate::json::type_name(v)
        )),
    }
}

/// An unknown key, with the setting it most likely meant ([`spelling::nearest`], compared in
/// lower case: `jaxenv` meant `jaxEnv`).
fn unknown_key_message(key: &str) -> String {
    let lowered: Vec<String> = KEYS.iter().map(|k| k.to_ascii_lowercase()).collect();
    let near = spelling::nearest(
        &key.to_ascii_lowercase(),
        lowered.iter().map(String::as_str),
    );
    match near.and_then(|near| KEYS.iter().find(|k| k.eq_ignore_ascii_case(near))) {
        Some(meant) => format!("unknown setting {key:?}; did you mean {meant:?}?"),
        None => format!("unknown setting {key:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[test]
    fn empty_object_gives_every_default() {
        assert_eq!(Settings::from_json(&json!({})), Ok(Settings::default()));
    }

    #[rstest]
    #[case::typo(json!({"tpuWorkerEnvs": true}), "unknown setting \"tpuWorkerEnvs\"; did you mean \"tpuWorkerEnv\"?")]
    #[case::case(json!({"jaxenv": "always"}), "unknown setting \"jaxenv\"; did you mean \"jaxEnv\"?")]
    #[case::wrong_type(json!({"multisliceEnv": "yes"}), "multisliceEnv: invalid type: string \"yes\", expected a boolean")]
    #[case::bad_role(json!({"role": "mutating"}), "role: expected one of \"both\", \"mutate\", \"validate\", found the string \"mutating\"")]
    #[case::role_typo(json!({"rol": "validate"}), "unknown setting \"rol\"; did you mean \"role\"?")]
    #[case::no_setting_within_two_edits(json!({"jaxPort": 6666}), "unknown setting \"jaxPort\"")]
    #[case::bad_enum(json!({"jaxEnv": "sometimes"}), "jaxEnv: expected one of \"annotated\", \"always\", \"never\", found the string \"sometimes\"")]
    #[case::port_zero(json!({"jaxCoordinatorPort": 0}), "jaxCoordinatorPort: 0 is not a port; use 1 to 65535")]
    #[case::port_high(json!({"jaxCoordinatorPort": 70000}), "jaxCoordinatorPort: 70000 is not a port; use 1 to 65535")]
    #[case::port_string(json!({"jaxCoordinatorPort": "6666"}), "jaxCoordinatorPort: expected a port number from 1 to 65535, found the string \"6666\"")]
    #[case::empty_keys(json!({"exclusiveTopologyKeys": []}), "exclusiveTopologyKeys: must name at least one label key, for example [\"cloud.google.com/gke-nodepool\"]")]
    #[case::bad_label(json!({"exclusiveTopologyKeys": ["Bad_Prefix/pool"]}), "exclusiveTopologyKeys[0]: \"Bad_Prefix/pool\" is not a valid label key: the prefix must be a lowercase DNS subdomain")]
    #[case::bad_accel_label(json!({"acceleratorLabel": "tpu/-x"}), "acceleratorLabel: \"tpu/-x\" is not a valid key: the name part must start and end with a letter or digit")]
    #[case::not_object(json!([1]), "settings must be an object, found a list")]
    #[case::queue_check_on(json!({"queueCheck": true}), "queueCheck: expected one of \"off\", \"warn\", \"refuse\", found the boolean true: write a quoted \"warn\" or \"refuse\" (a YAML 1.1 reader makes true of an unquoted on or yes)")]
    fn rejects_with_a_message_naming_the_key(#[case] input: Value, #[case] message: &str) {
        assert_eq!(Settings::from_json(&input), Err(vec![message.to_string()]));
    }

    #[test]
    fn reports_every_problem_at_once() {
        let errors = Settings::from_json(&json!({"bogus": 1, "tpuWorkerEnv": 3})).unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
    }

    #[test]
    fn reads_every_key() {
        let s = Settings::from_json(&json!({
            "multisliceEnv": false, "tpuWorkerEnv": true, "jaxEnv": "never",
            "jaxCoordinatorPort": 1234, "tpuResource": "example.com/tpu",
            "acceleratorLabel": "example.com/acc", "topologyLabel": "example.com/topo",
            "requireTpuNodeSelectors": false, "requireExclusiveTopology": false,
            "exclusiveTopologyKeys": ["example.com/pool", "kubernetes.io/hostname"],
            "rejectUnknownAccelerators": true, "role": "validate",
            "narrowQueuedJobSets": false, "queueCheck": false, "multiKueueUsers": ["mk"]
        }))
        .unwrap();
        assert!(!s.multislice_env && s.tpu_worker_env && s.jax_env == JaxEnv::Never);
        assert_eq!(s.jax_coordinator_port, 1234);
        assert_eq!(s.tpu_resource, "example.com/tpu");
        assert_eq!(s.accelerator_label, "example.com/acc");
        assert_eq!(s.topology_label, "example.com/topo");
        assert!(!s.require_tpu_node_selectors && !s.require_exclusive_topology);
        assert_eq!(s.exclusive_topology_keys.len(), 2);
        assert!(s.reject_unknown_accelerators);
        assert_eq!(s.role, Role::Validate);
        assert!(!s.narrow_queued_jobsets);
        assert_eq!(s.multi_kueue_users, ["mk"]);
    }
}
