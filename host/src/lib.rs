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
pub mod server;
pub mod webhook;

pub use host::{Instance, Outcome, Policy, SettingsOutcome};

use std::path::PathBuf;

/// The workspace root (where `policy.wasm` and `test_data/` live): the nearest folder with
/// `policy-metadata.yml`, from where cargo runs us (or the current folder) upwards. Found at
/// run time, not compile time: clones that share one target dir share compiled tests too.
pub fn workspace_root() -> PathBuf {
    let start = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    start
        .ancestors()
        .find(|dir| dir.join("policy-metadata.yml").is_file())
        .map(PathBuf::from)
        .unwrap_or(start)
}

/// `policy.wasm` as `make policy.wasm` leaves it, unless `POLICY_WASM` names another.
pub fn default_wasm_path() -> PathBuf {
    std::env::var_os("POLICY_WASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("policy.wasm"))
}
