//! make bench-server's floors (issue 30): per case, the [`floor`] module holding the policy's
//! own answer, annotated so that policy-server loads it and served beside the policy. The
//! policy's throughput over its floor's is then what the policy itself costs the server.
use crate::floor;
use crate::workloads::payload;
use anyhow::{bail, Context, Result};
use multislice_host::policy_server_client;
use multislice_host::{workspace_root, Instance, Policy};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// policy-server's id of case `i`'s floor.
pub fn id(i: usize) -> String {
    format!("floor-{i}")
}

/// Builds the floors in one folder, from policy.wasm's answers.
pub struct Floors {
    /// policy.wasm, the module annotated-policy.wasm is made of (`make annotated-policy.wasm`),
    /// so the answer held is the one the server's policy gives; the server checks it does.
    policy: Instance,
    kwctl: PathBuf,
    metadata: PathBuf,
    dir: PathBuf,
}

impl Floors {
    pub fn new(dir: &Path) -> Result<Floors> {
        let root = workspace_root();
        Ok(Floors {
            policy: Policy::load(&root.join("policy.wasm"))?.instance()?,
            kwctl: policy_server_client::kwctl()?,
            metadata: root.join("bench/floor/metadata.yml"),
            dir: dir.to_path_buf(),
        })
    }

    /// Case `i`'s floor, annotated: the policy's answer to `request` with settings `{}`, as
    /// the server sends it.
    pub fn annotated(&self, i: usize, request: &Value) -> Result<PathBuf> {
        let answer = self.policy.call("validate", &payload(request))?;
        let module = self.dir.join(format!("floor-{i}.wasm"));
        std::fs::write(&module, floor::module(&answer)?)?;
        let annotated = self.dir.join(format!("annotated-floor-{i}.wasm"));
        // kwctl annotate asks the module its protocol_version, which a floor answers.
        let out = Command::new(&self.kwctl)
            .arg("annotate")
            .arg("-m")
            .arg(&self.metadata)
            .arg("-o")
            .arg(&annotated)
            .arg(&module)
            .output()
            .context("cannot run kwctl")?;
        if !out.status.success() {
            bail!(
                "kwctl annotate of {} failed:\n{}{}",
                module.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(annotated)
    }
}
