//! A real control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler and the JobSet controller with its webhooks, all built from their Go modules
//! (`make cluster-deps`), and the policies as URL webhooks served by the host crate
//! (policies.rs). Nothing listens beyond loopback; every process has a hard lifetime; the logs
//! stay when asked to.
use crate::kube_api::Cluster;
use crate::pki::Pki;
pub use crate::policies::KUBEWARDEN_NAMESPACE;
use crate::policies::{Deployment, Installed, Manifest, Served};
use crate::procs::{free_port, Process, Supervision};
use anyhow::{anyhow, bail, Context, Result};
use multislice_host::webhook_server::{WebhookConfig, WebhookPolicy, WebhookServer};
use multislice_host::{workspace_root, Policy};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The Go-built components, as `cluster/deps.sh` reports them.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub paths: BTreeMap<String, PathBuf>,
}

impl Binaries {
    /// Runs `cluster/deps.sh` (it builds only what its cache lacks) and reads its report.
    pub fn build() -> Result<Binaries> {
        let script = workspace_root().join("cluster/deps.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("cannot run cluster/deps.sh")?;
        if !out.status.success() {
            bail!("cluster/deps.sh failed");
        }
        let paths = String::from_utf8(out.stdout)?
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), PathBuf::from(v)))
            .collect();
        Ok(Binaries { paths })
    }

    pub fn get(&self, name: &str) -> Result<&Path> {
        self.paths
            .get(name)
            .map(PathBuf::as_path)
            .ok_or_else(|| anyhow!("{name} was not built by cluster/deps.sh"))
    }
}

/// Where a Go module of ours (`cluster/deps/<component>`) finds `module` in the module cache,
/// for its CRDs and manifests.
pub fn module_dir(component: &str, module: &str) -> Result<PathBuf> {
    let out = std::process::Command::new("go")
        .args(["list", "-m", "-f", "{{.Dir}}", module])
        .current_dir(workspace_root().join("cluster/deps").join(component))
        .output()
        .context("cannot run go")?;
    if !out.status.success() {
        bail!(
            "go list -m {module}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

pub struct Options {
    /// Every policy's settings, each manifest's `role` kept (the manifests' own `spec.settings`
    /// when `None`).
    pub settings: Option<Value>,
    /// Every process is killed after this, whatever happens to the test.
    pub lifetime: Duration,
    /// Whether to install our policies at all; which ones, `CLUSTER_DEPLOYMENT` says
    /// (policies.rs).
    pub webhook: bool,
    /// Whether to start Kueue (built with `CLUSTER_KUEUE=1 make cluster-deps`).
    pub kueue: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            settings: None,
            lifetime: Duration::from_secs(40 * 60),
            webhook: true,
            kueue: false,
        }
    }
}

pub struct ControlPlane {
    pub dir: PathBuf,
    pub pki: Pki,
    pub cluster: Cluster,
    /// The webhook whose verdicts a namespace of the deployment sees: the validating policy's
    /// of the pair, or the single policy's.
    pub webhook_name: String,
    /// One JSON line per review our webhook answered (`policy` names which one).
    pub reviews: PathBuf,
    /// The settings of the policy that gives the verdicts.
    pub settings: Value,
    pub deployment: Deployment,
    /// Every policy installed, in order.
    pub installed: Vec<Installed>,
    processes: Vec<Process>,
    pub(crate) served: Option<Served>,
    started: Instant,
    lifetime: Duration,
    keep: bool,
    /// What Kueue needs outside the project, removed after the processes stop.
    pub(crate) fixed_files: Option<crate::kueue::FixedFiles>,
}

impl ControlPlane {
    pub async fn start(binaries: &Binaries, options: Options) -> Result<ControlPlane> {
        let dir = std::env::temp_dir().join(format!(
            "jobset-multislice-cluster-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis()
        ));
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        eprintln!("control plane in {}", dir.display());
        let pki = Pki::create(&dir.join("pki"))?;
        let lifetime = options.lifetime;
        let mut processes = Vec::new();

        let (etcd_port, peer_port, api_port) = (free_port()?, free_port()?, free_port()?);
        processes.push(Process::spawn(
            "etcd",
            binaries.get("etcd")?,
            &args(&[
                "--name=default",
                &format!("--data-dir={}", dir.join("etcd").display()),
                &format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
                &format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
                &format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
                &format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
                &format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
                "--unsafe-no-fsync",
                "--log-level=warn",
            ]),
            &[],
            &Supervision {
                logs: &logs,
                lifetime,
            },
        )?);

        processes.push(Process::spawn(
            "kube-apiserver",
            binaries.get("kube-apiserver")?,
            &apiserver_args(&pki, etcd_port, api_port),
            &[],
            &Supervision {
                logs: &logs,
                lifetime,
            },
        )?);
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_yaml(&pki, api_port))?;
        let cluster = Cluster::connect(&kubeconfig).await?;
        let mut plane = ControlPlane {
            dir: dir.clone(),
            pki,
            cluster,
            webhook_name: String::new(),
            reviews: dir.join("reviews.jsonl"),
            settings: json!({}),
            deployment: Deployment::Pair,
            installed: Vec::new(),
            processes,
            served: None,
            started: Instant::now(),
            lifetime,
            // CLUSTER_KEEP_LOGS=1 keeps them after a run that passed too.
            keep: std::env::var_os("CLUSTER_KEEP_LOGS").is_some(),
            fixed_files: None,
        };
        plane.wait_ready().await?;

        // What the fixtures name, and what JobSet reads before its webhooks run.
        for (name, value) in [("low", 100), ("medium", 1000), ("high", 10000)] {
            plane
                .cluster
                .apply(&json!({
                    "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": name}, "value": value,
                }))
                .await?;
        }
        plane
            .cluster
            .apply(&json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": KUBEWARDEN_NAMESPACE}}))
            .await?;

        let jobset_dir = module_dir("jobset", "sigs.k8s.io/jobset")?;
        for crd in crd_files(&jobset_dir.join("config/components/crd/bases"))? {
            plane.cluster.apply_yaml_file(&crd).await?;
        }
        plane
            .cluster
            .wait_crd_established("jobsets.jobset.x-k8s.io")
            .await?;

        let kubeconfig_arg = format!("--kubeconfig={}", kubeconfig.display());
        let controller_manager = Process::spawn(
            "kube-controller-manager",
            binaries.get("kube-controller-manager")?,
            &args(&[
                &kubeconfig_arg,
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                &format!("--secure-port={}", free_port()?),
                // No node-lifecycle controller: the fake nodes have no kubelet to heartbeat.
                "--controllers=job-controller,garbage-collector-controller,namespace-controller,ttl-after-finished-controller",
                &format!("--root-ca-file={}", plane.pki.ca_cert().display()),
            ]),
            &[],
            &Supervision {
                logs: &logs,
                lifetime,
            },
        )?;
        plane.processes.push(controller_manager);
        let scheduler = Process::spawn(
            "kube-scheduler",
            binaries.get("kube-scheduler")?,
            &args(&[
                &kubeconfig_arg,
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                &format!("--secure-port={}", free_port()?),
            ]),
            &[],
            &Supervision {
                logs: &logs,
                lifetime,
            },
        )?;
        plane.processes.push(scheduler);

        if options.webhook {
            plane
                .install_policies(options.settings, Deployment::from_env()?)
                .await?;
        }
        plane
            .start_jobset(binaries, &jobset_dir, &kubeconfig, &logs)
            .await?;
        if options.kueue {
            plane
                .start_kueue(binaries.get("kueue-manager")?, &kubeconfig, &logs)
                .await?;
        }
        Ok(plane)
    }

    /// How long this control plane has left before its processes' lifetimes run out.
    pub fn remaining(&self) -> Duration {
        self.lifetime.saturating_sub(self.started.elapsed())
    }

    /// A process started beside the control plane, stopped with it.
    pub(crate) fn adopt(&mut self, process: Process) {
        self.processes.push(process);
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

    async fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            self.check_alive()?;
            if self.cluster.get_raw("/readyz").await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("kube-apiserver not ready within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    async fn start_jobset(
        &mut self,
        binaries: &Binaries,
        module: &Path,
        kubeconfig: &Path,
        logs: &Path,
    ) -> Result<()> {
        let port = free_port()?;
        let config = self.dir.join("jobset-config.yaml");
        std::fs::write(
            &config,
            serde_json::to_string(&json!({
                "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
                "kind": "Configuration",
                "leaderElection": {"leaderElect": false},
                // Our CA signs its serving certificate; it must not rotate its own.
                "internalCertManagement": {"enable": false},
                "webhook": {"port": port, "host": "127.0.0.1",
                            "certDir": self.pki.cert_dir().display().to_string()},
                "metrics": {"bindAddress": "0"},
                "health": {"healthProbeBindAddress": format!("127.0.0.1:{}", free_port()?)},
            }))?,
        )?;
        let process = Process::spawn(
            "jobset",
            binaries.get("jobset-manager")?,
            &args(&[
                &format!("--config={}", config.display()),
                &format!("--kubeconfig={}", kubeconfig.display()),
                "--zap-log-level=info",
            ]),
            &[("KUBECONFIG", kubeconfig.display().to_string())],
            &Supervision {
                logs,
                lifetime: self.lifetime,
            },
        )?;
        self.processes.push(process);
        let ca = self.pki.ca_bundle_base64()?;
        for configuration in jobset_webhook_configurations(module, port, &ca)? {
            self.cluster.apply(&configuration).await?;
        }
        // Its webhooks answer once its manager has started: a dry-run JobSet goes through them.
        let probe = json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "webhook-probe", "namespace": "default"},
            "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}}}]},
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            self.check_alive()?;
            match self.cluster.create(&probe, true).await {
                Ok(created) if created.status < 300 => return Ok(()),
                Ok(created) if Instant::now() > deadline => {
                    bail!("JobSet's webhooks not ready within 120 s: {}", created.body)
                }
                Err(e) if Instant::now() > deadline => return Err(e),
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
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
        self.served = None;
        while let Some(p) = self.processes.pop() {
            drop(p);
        }
        if self.keep {
            eprintln!("logs kept in {}", self.dir.join("logs").display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub(crate) fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn apiserver_args(pki: &Pki, etcd_port: u16, port: u16) -> Vec<String> {
    let p = |path: PathBuf| path.display().to_string();
    args(&[
        &format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        &format!("--secure-port={port}"),
        &format!("--tls-cert-file={}", p(pki.serving_cert())),
        &format!("--tls-private-key-file={}", p(pki.serving_key())),
        &format!("--client-ca-file={}", p(pki.ca_cert())),
        &format!("--service-account-issuer=https://127.0.0.1:{port}"),
        &format!("--service-account-key-file={}", p(pki.sa_pub())),
        &format!("--service-account-signing-key-file={}", p(pki.sa_key())),
        // Addresses are only allocated from this range (headless Services take none); nothing
        // is ever sent there, and there is no kube-proxy.
        "--service-cluster-ip-range=10.96.0.0/16",
        "--authorization-mode=RBAC",
        // xpk's TPU pods are privileged.
        "--allow-privileged=true",
        // TaintNodesByCondition would taint every fake node not-ready (no kubelet clears it);
        // the ServiceAccount plugin would make every pod wait for its namespace's default
        // ServiceAccount and mount a token no container here reads.
        "--disable-admission-plugins=TaintNodesByCondition,ServiceAccount",
        // As GKE: a pod that requests google.com/tpu or nvidia.com/gpu tolerates its taint.
        "--enable-admission-plugins=ExtendedResourceToleration",
        "--enable-priority-and-fairness=false",
        "--profiling=false",
        "--endpoint-reconciler-type=none",
        "--v=1",
    ])
}

fn kubeconfig_yaml(pki: &Pki, port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {ca}\nusers:\n- name: admin\n  user:\n    client-certificate: {cert}\n    client-key: {key}\ncontexts:\n- name: local\n  context:\n    cluster: local\n    user: admin\ncurrent-context: local\n",
        ca = pki.ca_cert().display(),
        cert = pki.admin_cert().display(),
        key = pki.admin_key().display(),
    )
}

pub(crate) fn crd_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    Ok(files)
}

/// JobSet's webhook configurations from its module (config/components/webhook, with its
/// patches), under their released names (kustomize's `jobset-` prefix), pointed at its
/// webhook server on loopback.
pub fn jobset_webhook_configurations(module: &Path, port: u16, ca: &str) -> Result<Vec<Value>> {
    let dir = module.join("config/components/webhook");
    let text = std::fs::read_to_string(dir.join("manifests.yaml"))?;
    let mut out = Vec::new();
    for mut doc in multislice_host::preview::yaml_documents(&text)? {
        let patch_file = match doc["kind"].as_str() {
            Some("MutatingWebhookConfiguration") => "mutating-patch.yaml",
            Some("ValidatingWebhookConfiguration") => "validating-patch.yaml",
            _ => continue,
        };
        let patch_path = dir.join("patches").join(patch_file);
        if patch_path.is_file() {
            let ops = multislice_host::fixtures::load_yaml(&patch_path)?;
            let patch: json_patch::Patch = serde_json::from_value(ops)?;
            json_patch::patch(&mut doc, &patch)
                .map_err(|e| anyhow!("{}: {e}", patch_path.display()))?;
        }
        released_by_url(&mut doc, "jobset-", port, ca);
        out.push(doc);
    }
    if out.len() != 2 {
        bail!(
            "JobSet's module has {} webhook configurations, not 2",
            out.len()
        );
    }
    Ok(out)
}

/// A webhook configuration from a project's `config/`, under its released name (kustomize's
/// `namePrefix`), each webhook's Service reference replaced by the same path on loopback:
/// there is no kube-proxy, so no Service can be reached.
pub(crate) fn released_by_url(configuration: &mut Value, prefix: &str, port: u16, ca: &str) {
    let name = configuration["metadata"]["name"]
        .as_str()
        .unwrap_or_default();
    configuration["metadata"]["name"] = json!(format!("{prefix}{name}"));
    for webhook in configuration["webhooks"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let path = webhook["clientConfig"]["service"]["path"]
            .as_str()
            .unwrap_or("/")
            .to_string();
        webhook["clientConfig"] =
            json!({"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": ca});
    }
}

/// Our policies on this control plane (their manifests and configurations: policies.rs).
impl ControlPlane {
    /// Our webhook server, and the policies of the deployment: each manifest's webhook
    /// configuration, pointed at its path.
    pub(crate) async fn install_policies(
        &mut self,
        overriding: Option<Value>,
        deployment: Deployment,
    ) -> Result<()> {
        let module = Arc::new(Policy::load(&multislice_host::default_wasm_path())?);
        let server = WebhookServer::start(WebhookConfig {
            policies: Vec::new(),
            cert: self.pki.serving_cert(),
            key: self.pki.serving_key(),
            log: Some(self.reviews.clone()),
            lifetime: self.remaining(),
        })?;
        self.served = Some(Served {
            server,
            module,
            overriding,
        });
        self.deployment = deployment;
        for (path, scope) in deployment.manifests() {
            let installed = self.install_policy(path, &scope).await?;
            // The webhook whose verdicts a namespace of the deployment sees: the validating
            // one of the pair, or the single policy.
            if !installed.mutating || deployment == Deployment::Single {
                self.webhook_name = installed.webhook.clone();
                self.settings = installed.settings.clone();
            }
        }
        Ok(())
    }

    /// The webhook of an installed manifest (such as [`SINGLE_MANIFEST`]).
    pub fn webhook_of(&self, manifest: &str) -> Option<&str> {
        self.installed
            .iter()
            .find(|i| i.manifest == manifest)
            .map(|i| i.webhook.as_str())
    }

    /// Installs one more policy manifest (such as [`NAMESPACED_MANIFEST`]) on the running
    /// webhook server, with the control plane's settings override, scoped by `scope`.
    pub async fn install_policy(&mut self, path: &str, scope: &[Value]) -> Result<Installed> {
        let Some(served) = &self.served else {
            bail!("this control plane runs without our webhook");
        };
        let manifest = Manifest::load(path)?;
        let settings = manifest.settings(served.overriding.as_ref());
        let outcome = served.module.validate_settings(&settings)?;
        if !outcome.valid {
            bail!(
                "the policy refuses the settings of {path}: {:?}",
                outcome.message
            );
        }
        let id = manifest.unique_name()?;
        served.server.serve(WebhookPolicy {
            id: id.clone(),
            policy: served.module.clone(),
            settings: settings.clone(),
            mutating: manifest.mutating(),
        })?;
        let configuration = manifest.webhook_configuration(
            &served.server.url(&id),
            &self.pki.ca_bundle_base64()?,
            scope,
        )?;
        self.cluster.apply(&configuration).await?;
        let installed = Installed {
            manifest: path.to_string(),
            configuration: id,
            webhook: configuration["webhooks"][0]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            mutating: manifest.mutating(),
            settings,
        };
        self.installed.push(installed.clone());
        Ok(installed)
    }
}
