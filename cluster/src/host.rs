//! The policy's host on the control plane: one process that serves every installed policy,
//! fed the `policies.yml` that policy-server reads (one entry per policy: `module`, `settings`,
//! `allowedToMutate`, `contextAwareResources`), on a fixed port of 127.0.0.1 that the webhook
//! configurations name. The process is the project's `policy-host` (src/bin/policy-host.rs).
//!
//! The control plane gives a test three calls over it (webhook.rs): `kill_host`, `start_host`
//! and `swap_module`.
use crate::procs::{free_port, Process, Supervision};
use anyhow::{anyhow, bail, Context, Result};
use multislice_host::policy_server_client::http;
use multislice_host::Policy;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the host may take to compile its modules and answer its readiness probe.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// The digest of a policies file that the host's readiness probe names, so that a test knows
/// which file the host serves.
pub fn policies_digest(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(sha1_smol::Sha1::from(bytes).digest().to_string())
}

/// Where the host finds what the control plane gives it.
pub(crate) struct Surroundings {
    /// The folder of its policies file.
    pub(crate) dir: PathBuf,
    pub(crate) logs: PathBuf,
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) reviews: PathBuf,
    pub(crate) kubeconfig: PathBuf,
    /// When every process of the control plane stops.
    pub(crate) until: Instant,
}

/// The host's state: its file, its ports, the policies it serves, and its process.
pub(crate) struct Host {
    binary: PathBuf,
    around: Surroundings,
    file: PathBuf,
    pub(crate) port: u16,
    readiness_port: u16,
    /// The `policies.yml` entries, by id.
    entries: BTreeMap<String, Value>,
    /// The module every policy runs, compiled here too, to check settings before the host does.
    pub(crate) module: (PathBuf, Arc<Policy>),
    /// The settings that override each manifest's (`role` kept).
    pub(crate) overriding: Option<Value>,
    process: Option<Process>,
}

impl Host {
    pub(crate) fn new(around: Surroundings, overriding: Option<Value>) -> Result<Host> {
        let path = multislice_host::default_wasm_path();
        let policy = Policy::load(&path)?;
        Ok(Host {
            binary: sibling_binary("policy-host")?,
            file: around.dir.join("policies.yml"),
            around,
            port: free_port()?,
            readiness_port: free_port()?,
            entries: BTreeMap::new(),
            module: (path, Arc::new(policy)),
            overriding,
            process: None,
        })
    }

    /// The URL of policy `id`, which the webhook configurations name.
    pub(crate) fn url(&self, id: &str) -> String {
        format!("https://127.0.0.1:{}/validate/{id}", self.port)
    }

    /// Adds (or replaces) a policy; served from the next start or reload.
    pub(crate) fn set(
        &mut self,
        id: &str,
        settings: &Value,
        mutating: bool,
        context_aware: &Value,
    ) -> Result<()> {
        let outcome = self.module.1.validate_settings(settings)?;
        if !outcome.valid {
            bail!(
                "the policy refuses the settings of {id}: {:?}",
                outcome.message
            );
        }
        let mut entry = json!({
            "module": format!("file://{}", self.module.0.display()),
            "settings": settings,
            "allowedToMutate": mutating,
        });
        if !context_aware.is_null() {
            entry["contextAwareResources"] = context_aware.clone();
        }
        self.entries.insert(id.to_string(), entry);
        Ok(())
    }

    fn write_file(&self) -> Result<String> {
        std::fs::write(&self.file, serde_yaml::to_string(&self.entries)?)?;
        policies_digest(&self.file)
    }

    fn ready_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.readiness_port))
    }

    /// Whether its process runs.
    pub(crate) fn running(&mut self) -> bool {
        self.process.as_mut().is_some_and(|p| p.exited().is_none())
    }

    /// Starts the process (none may be running) and waits until it serves the file.
    pub(crate) fn start(&mut self) -> Result<()> {
        if self.running() {
            bail!("the host is running already");
        }
        let digest = self.write_file()?;
        let around = &self.around;
        let lifetime = around.until.saturating_duration_since(Instant::now());
        let args: Vec<String> = [
            "--policies",
            &self.file.display().to_string(),
            "--port",
            &self.port.to_string(),
            "--readiness-probe-port",
            &self.readiness_port.to_string(),
            "--cert-file",
            &around.cert.display().to_string(),
            "--key-file",
            &around.key.display().to_string(),
            "--review-log",
            &around.reviews.display().to_string(),
            "--lifetime",
            &lifetime.as_secs().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let supervision = Supervision {
            logs: &around.logs,
            lifetime: lifetime + Duration::from_secs(5),
        };
        let env = [("KUBECONFIG", around.kubeconfig.display().to_string())];
        self.process = Some(Process::spawn(
            "policy-host",
            &self.binary,
            &args,
            &env,
            &supervision,
        )?);
        self.wait_serving(&digest)
    }

    /// Waits until the readiness probe names `digest`; fails at once if the process exits.
    fn wait_serving(&mut self, digest: &str) -> Result<()> {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Some(p) = self.process.as_mut() {
                if let Some(status) = p.exited() {
                    bail!("policy-host exited ({status}):\n{}", p.tail(20));
                }
            }
            if let Ok((200, body)) = http(self.ready_addr(), "GET", "/readiness", b"") {
                let served: Value = serde_json::from_slice(&body).unwrap_or_default();
                if served["policies"] == digest {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                let tail = self
                    .process
                    .as_ref()
                    .map(|p| p.tail(20))
                    .unwrap_or_default();
                bail!("policy-host did not serve its policies within {READY_WITHIN:?}:\n{tail}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILLs its process.
    pub(crate) fn kill(&mut self) -> Result<()> {
        self.process
            .as_mut()
            .ok_or_else(|| anyhow!("the host is not running"))?
            .kill_hard()
    }

    /// Every policy on `module` from the next reload.
    pub(crate) fn set_module(&mut self, module: &Path) -> Result<()> {
        self.module = (module.to_path_buf(), Arc::new(Policy::load(module)?));
        let url = format!("file://{}", module.display());
        for entry in self.entries.values_mut() {
            entry["module"] = json!(url);
        }
        Ok(())
    }

    /// Serves the entries as they are now, without a gap: the file is written again and the
    /// process told to read it (SIGHUP).
    pub(crate) fn reload(&mut self) -> Result<()> {
        let digest = self.write_file()?;
        let pid = self
            .process
            .as_ref()
            .ok_or_else(|| anyhow!("the host is not running"))?
            .component_pid()?;
        let status = std::process::Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()?;
        if !status.success() {
            bail!("cannot signal policy-host ({pid})");
        }
        self.wait_serving(&digest)
    }
}

/// A binary built beside the running one (cargo puts a package's binaries and its test
/// binaries' parent folder together: `target/debug/`).
fn sibling_binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "{name} is not built beside {} (cargo build --workspace --bins)",
        exe.display()
    )
}
