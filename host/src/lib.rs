//! A Kubewarden-like host for jobset-multislice-policy, in four parts:
//! - the runners, which answer as kwctl and policy-server do ([`outcome`]): [`runner`] runs
//!   the built `.wasm` through wapc + wasmtime-provider, with policy-server's evaluation
//!   deadline; [`native`] runs the policy's library compiled natively (the preview's, which then
//!   builds no wasmtime);
//! - the controller simulation ([`controller`], and [`env`] for what the kubelet makes of a
//!   container's env): what the API server and the JobSet and Job controllers do, so tests and
//!   the preview command see the pods a cluster would;
//! - the judges ([`judges`]): which changes a patch may make, independent of the policy;
//! - the webhook, both sides of its connection: [`webhook_server`] serves the policy to a real
//!   kube-apiserver; [`policy_server_client`] starts Kubewarden's policy-server and calls it;
//!   [`review`] is the AdmissionReview response they exchange.
//!
//! Around them: the AdmissionRequests ([`request`]), the fixtures ([`fixtures`]), the examples'
//! kustomizations rendered ([`kustomization`]), the commands of docs/operations.md
//! ([`operations_page`]) and the preview ([`preview`]); and the host
//! capabilities the policy's host calls reach ([`capabilities`]: the allow-list and the
//! Kubernetes backend; [`session`]: kwctl's recorded sessions).
//!
//! The `wasm` feature (on by default) brings the wasm runner and what needs it (the webhook
//! server, `evaluate`, `wasi-run`); `make preview` builds without it.
pub mod capabilities;
pub mod controller;
pub mod env;
pub mod fixtures;
#[cfg(all(test, feature = "wasm"))]
mod guest_calls;
pub mod judges;
pub mod kustomization;
pub mod native;
pub mod operations_page;
pub mod outcome;
pub mod policy_server_client;
pub mod preview;
pub mod request;
pub mod review;
#[cfg(feature = "wasm")]
pub mod runner;
pub mod session;
#[cfg(feature = "wasm")]
pub mod webhook_server;

pub use native::Native;
pub use outcome::{Evaluator, Outcome, SettingsOutcome};
#[cfg(feature = "wasm")]
pub use runner::{Instance, Policy};

use std::path::{Path, PathBuf};

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

/// Every file under `dir` (relative to the workspace root), its folders' too, sorted, as
/// paths relative to the workspace root.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(workspace_root().join(&dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = dir.join(entry.file_name());
            if workspace_root().join(&path).is_dir() {
                dirs.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `policy.wasm` as `make policy.wasm` leaves it, unless `POLICY_WASM` names another.
pub fn default_wasm_path() -> PathBuf {
    std::env::var_os("POLICY_WASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("policy.wasm"))
}
