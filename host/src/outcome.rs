//! What a policy answers, whoever runs it: the module in wasmtime ([`crate::Policy`]) or the
//! policy's library compiled natively ([`crate::native::Native`]). Both read the same response
//! bytes into an [`Outcome`] here, and derive the patch as a Kubewarden host does.
use anyhow::{anyhow, Context, Result};
use json_patch::Patch;
use serde::Deserialize;
use serde_json::{json, Value};

/// policy-server's answer to an evaluation that ran past its deadline (policy-evaluator,
/// `src/runtimes/wapc/runtime.rs`), a rejection with code 500.
pub const DEADLINE_MESSAGE: &str =
    "Policy execution interrupted because it exceeded the allowed execution time";

/// Something that answers the policy's `validate` and `validate_settings`: the preview and
/// the tests take either runner.
pub trait Evaluator {
    /// Sends `{"request": …, "settings": …}` as kwctl does.
    fn validate(&self, request: &Value, settings: &Value) -> Result<Outcome>;
    fn validate_settings(&self, settings: &Value) -> Result<SettingsOutcome>;
}

/// The policy's answer to `validate`, with the JSON patch the host derives from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub accepted: bool,
    pub message: Option<String>,
    pub code: Option<u16>,
    pub warnings: Vec<String>,
    pub mutated_object: Option<Value>,
    /// `json_patch::diff(object, mutated_object)`, as Kubewarden's policy-evaluator computes it.
    pub patch: Option<Patch>,
}

impl Outcome {
    /// The policy's response bytes (the SDK's `ValidationResponse`), read as a host reads
    /// them; `object` is what a patch is diffed from.
    pub fn from_response(response: &[u8], object: Option<&Value>) -> Result<Outcome> {
        let wire: ResponseWire = serde_json::from_slice(response)
            .with_context(|| format!("bad response: {}", String::from_utf8_lossy(response)))?;
        let patch = wire
            .mutated_object
            .as_ref()
            .map(|m| diff(object.unwrap_or(&Value::Null), m));
        Ok(Outcome {
            accepted: wire.accepted,
            message: wire.message,
            code: wire.code,
            warnings: wire.warnings.unwrap_or_default(),
            mutated_object: wire.mutated_object,
            patch,
        })
    }

    /// policy-server's refusal of an evaluation that ran past its deadline.
    pub fn interrupted() -> Outcome {
        Outcome {
            accepted: false,
            message: Some(DEADLINE_MESSAGE.to_string()),
            code: Some(500),
            warnings: Vec::new(),
            mutated_object: None,
            patch: None,
        }
    }

    /// The patch as JSON (`[]` when there is none).
    pub fn patch_json(&self) -> Value {
        self.patch
            .as_ref()
            .map(|p| serde_json::to_value(p).unwrap_or(Value::Null))
            .unwrap_or_else(|| json!([]))
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SettingsOutcome {
    pub valid: bool,
    #[serde(default)]
    pub message: Option<String>,
}

/// The guest's response, as the SDK serializes it (snake_case field names).
#[derive(Deserialize)]
struct ResponseWire {
    accepted: bool,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    code: Option<u16>,
    #[serde(default)]
    mutated_object: Option<Value>,
    #[serde(default)]
    warnings: Option<Vec<String>>,
}

/// The patch a Kubewarden host derives from a mutation (policy-evaluator's own call).
pub fn diff(object: &Value, mutated: &Value) -> Patch {
    json_patch::diff(object, mutated)
}

/// Applies a host-computed patch to an object, as the API server does.
pub fn apply(object: &Value, patch: &Patch) -> Result<Value> {
    let mut out = object.clone();
    json_patch::patch(&mut out, patch).map_err(|e| anyhow!("patch does not apply: {e}"))?;
    Ok(out)
}
