//! The policy's library compiled natively, answering as the module does in a Kubewarden host:
//! the same `validate` and `validate_settings` code, its response read as the runner reads the
//! module's ([`Outcome::from_response`]), and its Kubernetes reads answered by the same
//! [`Capabilities`] with the same texts. `make preview` runs this, so that a preview builds no
//! wasmtime; `tests/wasm/native_agrees.rs` holds it to the module's answers on every fixture.
use crate::capabilities::Capabilities;
use crate::outcome::{Evaluator, Outcome, SettingsOutcome};
use anyhow::Result;
use jobset_multislice_policy::admission::{self, queue_lookup};
use serde_json::{json, Value};

/// The policy, natively. Its host calls reach its [`Capabilities`] (none unless given with
/// [`Native::with_capabilities`], as [`crate::Policy`]).
#[derive(Debug, Clone, Default)]
pub struct Native {
    capabilities: Capabilities,
}

impl Native {
    /// No Kubernetes kind granted: kwctl without `--allow-context-aware`.
    pub fn new() -> Native {
        Native::default()
    }

    pub fn with_capabilities(capabilities: Capabilities) -> Native {
        Native { capabilities }
    }

    /// The response bytes for a `validate` payload, as the module's `validate` returns them.
    pub fn response(&self, payload: &[u8]) -> Result<Vec<u8>> {
        let verdict = admission::evaluate_with(payload, self);
        Ok(serde_json::to_vec(&verdict.to_response())?)
    }

    /// Sends a payload as is; `object` is what a patch is diffed from.
    pub fn validate_raw(&self, payload: &[u8], object: Option<&Value>) -> Result<Outcome> {
        Outcome::from_response(&self.response(payload)?, object)
    }
}

impl Evaluator for Native {
    fn validate(&self, request: &Value, settings: &Value) -> Result<Outcome> {
        let payload = serde_json::to_vec(&json!({"request": request, "settings": settings}))?;
        self.validate_raw(&payload, request.get("object"))
    }

    fn validate_settings(&self, settings: &Value) -> Result<SettingsOutcome> {
        let response = admission::evaluate_settings(&serde_json::to_vec(settings)?);
        Ok(serde_json::from_value(serde_json::to_value(response)?)?)
    }
}

/// The module's `get_resource` host call, made directly: the SDK's request serialized as the
/// SDK sends it, and the host's refusal passed on as the text the module reads.
impl queue_lookup::ClusterReader for Native {
    fn get(&self, request: &queue_lookup::GetResourceRequest) -> Result<Value, String> {
        let payload = serde_json::to_vec(request).map_err(|e| e.to_string())?;
        let answer =
            self.capabilities
                .host_call("kubewarden", "kubernetes", "get_resource", &payload)?;
        serde_json::from_slice(&answer).map_err(|e| e.to_string())
    }
}
