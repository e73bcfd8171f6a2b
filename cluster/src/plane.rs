//! The control plane's state, shared by every component file: its folder, certificates,
//! kubeconfig and client, the processes it supervises, the policy's host (host.rs keeps its
//! state here) and the reviews the host logged. Each component (kubernetes.rs, jobset.rs,
//! webhook.rs, kueue/install.rs) takes it as an argument, and controlplane.rs starts them in
//! order.
use crate::host::Host;
use crate::kube_api::Cluster;
use crate::kube_proxy::KubeProxy;
use crate::pki::Pki;
use crate::policies::{Deployment, Installed, Kubectl, Overlay};
use crate::procs::{free_port, Process, Supervision};
use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct ControlPlane {
    pub dir: PathBuf,
    pub pki: Pki,
    pub cluster: Cluster,
    pub kubeconfig: PathBuf,
    /// The API server's port on 127.0.0.1 (the kubeconfig names it).
    pub(crate) api_port: u16,
    /// The client URL of the etcd the API server keeps its objects in (its own, or shared).
    pub etcd_url: String,
    /// The webhook whose verdicts a namespace of the deployment sees: the validating policy's
    /// of the pair, or the single policy's.
    pub webhook_name: String,
    /// One JSON line per review the policy's host answered (`policy` names which one), written
    /// by the kube-proxy shim.
    pub reviews: PathBuf,
    /// The settings of the policy that gives the verdicts.
    pub settings: Value,
    pub deployment: Deployment,
    /// Every policy installed, in order.
    pub installed: Vec<Installed>,
    processes: Vec<Process>,
    /// The kubelet of policy-server's pods, when our policies are installed.
    pub(crate) host: Option<Host>,
    /// The stand-in for kube-proxy, from the API server's start.
    pub(crate) proxy: Option<KubeProxy>,
    /// kubectl, once Kubewarden is installed.
    pub(crate) kubectl: Option<Kubectl>,
    /// The module every policy runs (`module:` of every kustomization applied).
    pub(crate) module: PathBuf,
    /// Every kustomization applied, to apply again with another module.
    pub(crate) overlays: Vec<Overlay>,
    started: Instant,
    lifetime: Duration,
    keep: bool,
}

impl ControlPlane {
    /// A folder, certificates, a kubeconfig and a client for an API server not yet started.
    pub(crate) async fn new(lifetime: Duration) -> Result<ControlPlane> {
        let dir = std::env::temp_dir().join(format!(
            "jobset-multislice-cluster-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis()
        ));
        std::fs::create_dir_all(dir.join("logs"))?;
        eprintln!("control plane in {}", dir.display());
        let pki = Pki::create(&dir.join("pki"))?;
        let api_port = free_port()?;
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_yaml(&pki, api_port))?;
        let cluster = Cluster::connect(&kubeconfig).await?;
        Ok(ControlPlane {
            reviews: dir.join("reviews.jsonl"),
            dir,
            pki,
            cluster,
            kubeconfig,
            api_port,
            etcd_url: String::new(),
            webhook_name: String::new(),
            settings: json!({}),
            deployment: Deployment::Pair,
            installed: Vec::new(),
            processes: Vec::new(),
            host: None,
            proxy: None,
            kubectl: None,
            module: PathBuf::new(),
            overlays: Vec::new(),
            started: Instant::now(),
            lifetime,
            // CLUSTER_KEEP_LOGS=1 keeps them after a run that passed too.
            keep: std::env::var_os("CLUSTER_KEEP_LOGS").is_some(),
        })
    }

    /// Where every process logs.
    pub fn logs(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// How long this control plane has left before its processes' lifetimes run out.
    pub fn remaining(&self) -> Duration {
        self.lifetime.saturating_sub(self.started.elapsed())
    }

    /// Starts a process beside the control plane, logging to `logs/<name>.log`, stopped with it.
    pub(crate) fn spawn(
        &mut self,
        name: &str,
        binary: &Path,
        args: &[String],
        env: &[(&str, String)],
    ) -> Result<()> {
        let logs = self.logs();
        let supervision = Supervision {
            logs: &logs,
            lifetime: self.remaining(),
        };
        let process = Process::spawn(name, binary, args, env, &supervision)?;
        self.processes.push(process);
        Ok(())
    }

    pub(crate) fn proxy(&self) -> Result<&KubeProxy> {
        self.proxy
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the kube-proxy shim is not running"))
    }

    /// Stops the process started as `name` (SIGTERM, then reaped), which then no longer counts
    /// for [`Self::check_alive`].
    pub(crate) fn stop(&mut self, name: &str) -> Result<()> {
        let at = self
            .processes
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| anyhow::anyhow!("no process {name} runs here"))?;
        drop(self.processes.remove(at));
        Ok(())
    }

    /// A kubeconfig of this API server for `user`, with every certificate and key embedded
    /// (`certificate-authority-data`, `client-certificate-data`, `client-key-data`) rather than
    /// named by path: what a kubeconfig in a Secret must be, since the reader (Kueue's
    /// MultiKueue) has none of these files, and refuses a CA path outright.
    pub fn embedded_kubeconfig(&self, user: &str, cert: &Path, key: &Path) -> Result<String> {
        use base64::Engine as _;
        let data = |path: &Path| -> Result<String> {
            Ok(base64::engine::general_purpose::STANDARD.encode(std::fs::read(path)?))
        };
        Ok(kubeconfig_text(
            self.api_port,
            &format!("certificate-authority-data: {}", data(&self.pki.ca_cert())?),
            user,
            &format!("client-certificate-data: {}", data(cert)?),
            &format!("client-key-data: {}", data(key)?),
        ))
    }

    /// A kubeconfig of this API server for `user`, authenticated by a bearer `token` (a
    /// ServiceAccount's, from the TokenRequest API).
    pub(crate) fn token_kubeconfig(&self, user: &str, token: &str) -> String {
        let ca = format!("certificate-authority: {}", self.pki.ca_cert().display());
        kubeconfig_text(self.api_port, &ca, user, &format!("token: {token}"), "")
    }

    /// Keep the folder with the logs after the run (when a test failed).
    pub fn keep_logs(&mut self) {
        self.keep = true;
    }

    /// Fails with the log's tail when a process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        for p in &mut self.processes {
            if let Some(status) = p.exited() {
                bail!("{} exited ({status}):\n{}", p.name, p.tail(30));
            }
        }
        Ok(())
    }

    /// Waits until a dry-run CREATE of each probe passes: a component's webhooks answer once
    /// its manager has started.
    pub(crate) async fn wait_for_webhooks(
        &mut self,
        component: &str,
        probes: &[Value],
    ) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        for probe in probes {
            loop {
                self.check_alive()?;
                match self.cluster.create(probe, true).await {
                    Ok(created) if created.status < 300 => break,
                    Ok(created) if Instant::now() > deadline => {
                        bail!(
                            "{component}'s webhooks not ready within 120 s: {}",
                            created.body
                        )
                    }
                    Err(e) if Instant::now() > deadline => return Err(e),
                    _ => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
        }
        Ok(())
    }

    /// The reviews our webhook answered, in order. A line the webhook is still writing (no
    /// newline yet) is left for the next read.
    pub fn reviews(&self) -> Result<Vec<Value>> {
        let text = std::fs::read_to_string(&self.reviews).unwrap_or_default();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete
            .lines()
            .map(|l| serde_json::from_str(l).map_err(Into::into))
            .collect()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.host = None;
        self.proxy = None;
        while let Some(p) = self.processes.pop() {
            drop(p);
        }
        if self.keep {
            eprintln!("logs kept in {}", self.logs().display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn kubeconfig_yaml(pki: &Pki, port: u16) -> String {
    kubeconfig_text(
        port,
        &format!("certificate-authority: {}", pki.ca_cert().display()),
        "admin",
        &format!("client-certificate: {}", pki.admin_cert().display()),
        &format!("client-key: {}", pki.admin_key().display()),
    )
}

/// A kubeconfig of the API server on 127.0.0.1:`port`, each credential line (`key: value`)
/// as given.
fn kubeconfig_text(port: u16, ca: &str, user: &str, cert: &str, key: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:{port}\n    {ca}\nusers:\n- name: {user}\n  user:\n    {cert}\n    {key}\ncontexts:\n- name: local\n  context:\n    cluster: local\n    user: {user}\ncurrent-context: local\n",
    )
}
