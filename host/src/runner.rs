//! The runner: loads the policy into wasmtime through waPC and calls it as kwctl and
//! policy-server do.
use crate::capabilities::Capabilities;
use crate::outcome::Evaluator;
use anyhow::{anyhow, Context, Result};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use wapc::WapcHost;
use wasmtime_provider::{EpochDeadlines, WasmtimeEngineProviderBuilder, WasmtimeEngineProviderPre};

// The runner's answers, read as any host reads them; the tests and tools name them here.
pub use crate::outcome::{apply, diff, Outcome, SettingsOutcome, DEADLINE_MESSAGE};

/// How wasmtime-provider reports an interrupted guest call; policy-evaluator looks for it too.
const INTERRUPTED: &str = "guest code interrupted, execution deadline exceeded";
/// policy-server's `--policy-timeout` default, in seconds.
pub const POLICY_TIMEOUT_SECONDS: u64 = 2;
/// Ticks for the waPC start-up code when the deadline is [`Deadline::Expired`]: no ticker
/// runs then, so it is never reached.
const NO_TICKER_INIT: u64 = 1 << 32;

/// How long one evaluation may run, in policy-server's terms. policy-server turns on wasmtime's
/// epoch interruption, ticks the engine's epoch once a second, and gives every waPC call
/// (start-up and each function call) the timeout in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// `--disable-timeout-protection`: no deadline, and no epoch checks in the code.
    Off,
    /// `--policy-timeout <seconds>`: a call is interrupted after that many ticks of a clock
    /// that ticks once a second.
    Seconds(u64),
    /// Already past when a call starts, so every function call is interrupted at its first
    /// epoch check (start-up is not): a deadline hit without a clock, for tests.
    Expired,
}

impl Default for Deadline {
    /// policy-server's default.
    fn default() -> Self {
        Deadline::Seconds(POLICY_TIMEOUT_SECONDS)
    }
}

impl Deadline {
    fn epochs(self) -> Option<EpochDeadlines> {
        match self {
            Deadline::Off => None,
            Deadline::Seconds(s) => Some(EpochDeadlines {
                wapc_init: s,
                wapc_func: s,
            }),
            Deadline::Expired => Some(EpochDeadlines {
                wapc_init: NO_TICKER_INIT,
                wapc_func: 0,
            }),
        }
    }
}

/// A compiled policy module. Like policy-server (since v1.10: "a new WebAssembly environment
/// is created and used to perform the operation. The environment is then discarded once the
/// evaluation is over."), its calls each get a fresh instance; [`Policy::instance`] gives one
/// to reuse instead, as a worker of policy-server before v1.10 did, and as the bench does.
/// Its host calls reach its [`Capabilities`] (none unless given with
/// [`Policy::with_capabilities`]).
#[derive(Clone)]
pub struct Policy {
    pre: WasmtimeEngineProviderPre,
    epochs: Option<EpochDeadlines>,
    capabilities: Arc<Capabilities>,
}

/// One instantiated policy module, reused across calls. A call that traps or runs past its
/// deadline leaves the instance's memory as it was when it stopped, so the instance is
/// replaced by a fresh one before the error (or the refusal) is returned, as
/// policy-evaluator resets its waPC host.
pub struct Instance {
    pre: WasmtimeEngineProviderPre,
    epochs: Option<EpochDeadlines>,
    capabilities: Arc<Capabilities>,
    host: RefCell<WapcHost>,
}

impl Instance {
    fn new(policy: &Policy) -> Result<Instance> {
        Ok(Instance {
            pre: policy.pre.clone(),
            epochs: policy.epochs,
            capabilities: policy.capabilities.clone(),
            host: RefCell::new(wapc_host(
                &policy.pre,
                policy.epochs,
                policy.capabilities.clone(),
            )?),
        })
    }

    /// The waPC host's id, new with each replacement (for tests).
    pub fn id(&self) -> u64 {
        self.host.borrow().id()
    }

    /// Calls a waPC function; after a trap or a deadline hit the instance is replaced.
    pub fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>> {
        let result = self.host.borrow().call(operation, payload);
        result.or_else(|e| {
            *self.host.borrow_mut() = wapc_host(&self.pre, self.epochs, self.capabilities.clone())?;
            Err(anyhow!("the policy failed in {operation}: {e}"))
        })
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
    /// A deadline hit is policy-server's refusal, not an error.
    pub fn validate_raw(&self, payload: &[u8], object: Option<&Value>) -> Result<Outcome> {
        let out = match self.call("validate", payload) {
            Ok(out) => out,
            Err(e) if format!("{e}").contains(INTERRUPTED) => return Ok(Outcome::interrupted()),
            Err(e) => return Err(e),
        };
        Outcome::from_response(&out, object)
    }
}

/// A new waPC host on a new instance of the module, its host calls answered by
/// `capabilities` (the guest reads an `Err` as the host's error text).
fn wapc_host(
    pre: &WasmtimeEngineProviderPre,
    epochs: Option<EpochDeadlines>,
    capabilities: Arc<Capabilities>,
) -> Result<WapcHost> {
    let engine = pre
        .rehydrate(epochs)
        .map_err(|e| anyhow!("cannot instantiate the policy: {e}"))?;
    let callback =
        move |_id: u64, binding: &str, namespace: &str, operation: &str, payload: &[u8]| {
            capabilities
                .host_call(binding, namespace, operation, payload)
                .map_err(Into::into)
        };
    WapcHost::new(Box::new(engine), Some(Box::new(callback)))
        .map_err(|e| anyhow!("cannot start the waPC host: {e}"))
}

impl Policy {
    /// Loads a module, with policy-server's default deadline.
    pub fn load(path: &Path) -> Result<Policy> {
        let bytes = std::fs::read(path).with_context(|| {
            format!(
                "cannot read {}; build it first with `make policy.wasm`",
                path.display()
            )
        })?;
        Policy::from_bytes(&bytes)
    }

    /// Compiles a module, with policy-server's default deadline.
    pub fn from_bytes(bytes: &[u8]) -> Result<Policy> {
        Policy::with_deadline(bytes, Deadline::default())
    }

    /// Compiles a module whose calls run under `deadline`.
    pub fn with_deadline(bytes: &[u8], deadline: Deadline) -> Result<Policy> {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(deadline != Deadline::Off);
        let engine =
            wasmtime::Engine::new(&config).map_err(|e| anyhow!("cannot start wasmtime: {e}"))?;
        if let Deadline::Seconds(_) = deadline {
            tick_every_second(&engine);
        }
        Policy::build(bytes, engine, deadline.epochs())
    }

    /// Compiles the module with a given engine (for measuring memory), without a deadline.
    pub fn with_engine(bytes: &[u8], engine: wasmtime::Engine) -> Result<Policy> {
        Policy::build(bytes, engine, None)
    }

    fn build(
        bytes: &[u8],
        engine: wasmtime::Engine,
        epochs: Option<EpochDeadlines>,
    ) -> Result<Policy> {
        let pre = WasmtimeEngineProviderBuilder::new()
            .module_bytes(bytes)
            .engine(engine)
            .build_pre()
            .map_err(|e| anyhow!("cannot compile the policy module: {e}"))?;
        Ok(Policy {
            pre,
            epochs,
            capabilities: Arc::new(Capabilities::none()),
        })
    }

    /// The same compiled module (shared, not compiled again) whose calls reach
    /// `capabilities`: a session or a cluster behind an allow-list, as kwctl's
    /// `--allow-context-aware` and policy-server's `spec.contextAwareResources` give one.
    pub fn with_capabilities(&self, capabilities: Capabilities) -> Policy {
        Policy {
            capabilities: Arc::new(capabilities),
            ..self.clone()
        }
    }

    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// An instance to reuse across calls (see [`Instance`]).
    pub fn instance(&self) -> Result<Instance> {
        Instance::new(self)
    }

    /// Calls a waPC function on a fresh instance.
    pub fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>> {
        self.instance()?.call(operation, payload)
    }

    pub fn protocol_version(&self) -> Result<Value> {
        self.instance()?.protocol_version()
    }

    pub fn validate_settings(&self, settings: &Value) -> Result<SettingsOutcome> {
        self.instance()?.validate_settings(settings)
    }

    /// [`Instance::validate`] on a fresh instance.
    pub fn validate(&self, request: &Value, settings: &Value) -> Result<Outcome> {
        self.instance()?.validate(request, settings)
    }

    /// [`Instance::validate_raw`] on a fresh instance.
    pub fn validate_raw(&self, payload: &[u8], object: Option<&Value>) -> Result<Outcome> {
        self.instance()?.validate_raw(payload, object)
    }
}

/// policy-server's clock: the engine's epoch goes up once a second, for as long as the engine
/// lives.
fn tick_every_second(engine: &wasmtime::Engine) {
    let weak = engine.weak();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        match weak.upgrade() {
            Some(engine) => engine.increment_epoch(),
            None => return,
        }
    });
}

impl Evaluator for Policy {
    fn validate(&self, request: &Value, settings: &Value) -> Result<Outcome> {
        Policy::validate(self, request, settings)
    }

    fn validate_settings(&self, settings: &Value) -> Result<SettingsOutcome> {
        Policy::validate_settings(self, settings)
    }
}
