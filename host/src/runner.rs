//! The runner: loads the policy into wasmtime through waPC and calls it as kwctl and
//! policy-server do.
use anyhow::{anyhow, Context, Result};
use json_patch::Patch;
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::Path;
use wapc::WapcHost;
use wasmtime_provider::{WasmtimeEngineProviderBuilder, WasmtimeEngineProviderPre};

/// A compiled policy module; each call gets a fresh instance, as a new policy-server worker would.
pub struct Policy {
    pre: WasmtimeEngineProviderPre,
}

/// One instantiated policy module.
pub struct Instance {
    host: WapcHost,
}

impl Instance {
    pub fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>> {
        self.host
            .call(operation, payload)
            .map_err(|e| anyhow!("the policy failed in {operation}: {e}"))
    }
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

/// The guest's host calls. The policy only logs (`kubewarden`/`tracing`/`log`); anything else
/// is refused, as a host without cluster context would.
fn host_callback(
    _id: u64,
    binding: &str,
    namespace: &str,
    operation: &str,
    _payload: &[u8],
) -> std::result::Result<Vec<u8>, Box<dyn std::error::Error + Send + Sync>> {
    match (binding, namespace, operation) {
        ("kubewarden", "tracing", "log") => Ok(Vec::new()),
        _ => Err(format!("host call {binding}/{namespace}/{operation} is not supported").into()),
    }
}

impl Policy {
    pub fn load(path: &Path) -> Result<Policy> {
        let bytes = std::fs::read(path).with_context(|| {
            format!(
                "cannot read {}; build it first with `make policy.wasm`",
                path.display()
            )
        })?;
        Policy::from_bytes(&bytes)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Policy> {
        Policy::with_engine(bytes, None)
    }

    /// Compiles the module with a given engine (for measuring memory), else a default one.
    pub fn with_engine(bytes: &[u8], engine: Option<wasmtime::Engine>) -> Result<Policy> {
        let mut builder = WasmtimeEngineProviderBuilder::new().module_bytes(bytes);
        if let Some(engine) = engine {
            builder = builder.engine(engine);
        }
        let pre = builder
            .build_pre()
            .map_err(|e| anyhow!("cannot compile the policy module: {e}"))?;
        Ok(Policy { pre })
    }

    /// A live instance, reused across calls as a policy-server worker reuses its own.
    pub fn instance(&self) -> Result<Instance> {
        let engine = self
            .pre
            .rehydrate(None)
            .map_err(|e| anyhow!("cannot instantiate the policy: {e}"))?;
        let host = WapcHost::new(Box::new(engine), Some(Box::new(host_callback)))
            .map_err(|e| anyhow!("cannot start the waPC host: {e}"))?;
        Ok(Instance { host })
    }

    /// Calls a waPC function on a fresh instance.
    pub fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>> {
        self.instance()?.call(operation, payload)
    }

    pub fn protocol_version(&self) -> Result<Value> {
        Ok(serde_json::from_slice(
            &self.call("protocol_version", b"")?,
        )?)
    }

    pub fn validate_settings(&self, settings: &Value) -> Result<SettingsOutcome> {
        let out = self.call("validate_settings", &serde_json::to_vec(settings)?)?;
        Ok(serde_json::from_slice(&out)?)
    }

    /// Sends `{"request": …, "settings": …}` as kwctl does.
    pub fn validate(&self, request: &Value, settings: &Value) -> Result<Outcome> {
        let payload = serde_json::to_vec(&json!({"request": request, "settings": settings}))?;
        self.validate_raw(&payload, request.get("object"))
    }

    /// Sends a payload as is (for bad-input tests); `object` is what a patch is diffed from.
    pub fn validate_raw(&self, payload: &[u8], object: Option<&Value>) -> Result<Outcome> {
        let out = self.call("validate", payload)?;
        let wire: ResponseWire = serde_json::from_slice(&out)
            .with_context(|| format!("bad response: {}", String::from_utf8_lossy(&out)))?;
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
