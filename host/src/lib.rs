//! A Kubewarden-like waPC host for jobset-multislice-policy: it runs the built `.wasm` the way
//! kwctl and policy-server do (wapc + wasmtime-provider), and simulates the JobSet and Job
//! controllers, so tests and the preview command see what a cluster would.
pub mod controller;
pub mod env;
pub mod fixtures;
pub mod host;
pub mod invariants;
pub mod preview;
pub mod request;

pub use host::{Outcome, Policy, SettingsOutcome};

use std::path::PathBuf;

/// The workspace root (where `policy.wasm` and `test_data/` live).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// `policy.wasm` as `make policy.wasm` leaves it, unless `POLICY_WASM` names another.
pub fn default_wasm_path() -> PathBuf {
    std::env::var_os("POLICY_WASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("policy.wasm"))
}
