//! A Kubewarden-like waPC host for jobset-multislice-policy, in four parts:
//! - the runner ([`runner`]): runs the built `.wasm` the way kwctl and policy-server do (wapc +
//!   wasmtime-provider), with policy-server's evaluation deadline;
//! - the controller simulation ([`controller`], and [`env`] for what the kubelet makes of a
//!   container's env): what the API server and the JobSet and Job controllers do, so tests and
//!   the preview command see the pods a cluster would;
//! - the judges ([`judges`]): which changes a patch may make, independent of the policy;
//! - the webhook, both sides of its connection: [`webhook_server`] serves the policy to a real
//!   kube-apiserver; [`policy_server_client`] starts Kubewarden's policy-server and calls it;
//!   [`review`] is the AdmissionReview response they exchange.
//!
//! Around them: the AdmissionRequests ([`request`]), the fixtures ([`fixtures`]) and the
//! preview ([`preview`]); and the host capabilities the policy's host calls reach
//! ([`capabilities`]: the allow-list and the Kubernetes backend; [`session`]: kwctl's recorded
//! sessions).
pub mod capabilities;
pub mod controller;
pub mod env;
pub mod fixtures;
#[cfg(test)]
mod guest_calls;
pub mod judges;
pub mod policy_server_client;
pub mod preview;
pub mod request;
pub mod review;
pub mod runner;
pub mod session;
pub mod webhook_server;

pub use runner::{Instance, Outcome, Policy, SettingsOutcome};

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
