//! The policy's host on the control plane: what runs in each pod of the Deployment that
//! Kubewarden's controller makes for PolicyServer `default`. No kubelet and no container runtime
//! run here, so this file plays the kubelet for those pods (the node agent plays it for every
//! other pod): for each pod bound to its node, it starts a host process fed what the pod would
//! mount, the controller's own `policies.yml` (ConfigMap `policy-server-default`, at the
//! version the pod's `kubewarden/config-version` label names) and certificate (Secret
//! `policy-server-default`), with the pod's environment; it marks the pod Ready once that
//! process answers its readiness probe, then sends the Service's traffic to it (kube_proxy.rs);
//! and it stops the process when the pod is deleted. A rolling update of the Deployment is then
//! what it is on a cluster: the new pod Ready before the old one goes.
//!
//! The process is Kubewarden's policy-server where it is installed (as `make e2e-tests` finds
//! it: `POLICY_SERVER`, PATH, `../shared/tools`), else the project's `policy-host`
//! (src/bin/policy-host.rs); `CLUSTER_HOST=policy-host` picks the project's. Both read the same
//! file, with two differences from the controller's ConfigMap: each `module` stays the
//! `file://` URL the test kustomizations set, and each cluster-wide entry gets
//! `hostCapabilities: ["*"]`, which v1.31's controller does not write and v1.35's does (since
//! policy-server v1.35 refuses every host call an entry does not grant).
//!
//! The control plane gives a test three calls over it (webhook.rs): `kill_host`, `start_host`
//! and `swap_module`.
use crate::kube_api::Cluster;
use crate::kube_proxy::{relabelled_key, ReviewRoute, Route, Routes};
use crate::policy_server::{
    CONFIG_VERSION_LABEL, NAMESPACE, POLICY_SERVER_LABEL, POLICY_SERVER_OBJECTS,
};
use crate::procs::{free_port, Process, Supervision};
use anyhow::{anyhow, bail, Context, Result};
use base64::Engine as _;
use multislice_host::policy_server_client::{http, kubewarden_binary, trust_config};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How long a host may take to compile its modules and answer its readiness probe.
const READY_WITHIN: Duration = Duration::from_secs(120);

/// Which process serves a pod.
#[derive(Debug, Clone)]
pub enum HostBinary {
    PolicyServer(PathBuf),
    PolicyHost(PathBuf),
}

impl HostBinary {
    /// policy-server where it is installed, else `policy-host`; `CLUSTER_HOST` chooses.
    pub fn find() -> Result<HostBinary> {
        let wanted = std::env::var("CLUSTER_HOST").unwrap_or_default();
        match wanted.as_str() {
            "policy-host" => Ok(HostBinary::PolicyHost(sibling_binary("policy-host")?)),
            "policy-server" => Ok(HostBinary::PolicyServer(kubewarden_binary(
                "POLICY_SERVER",
                "policy-server",
            )?)),
            "" => Ok(match kubewarden_binary("POLICY_SERVER", "policy-server") {
                Ok(path) => HostBinary::PolicyServer(path),
                Err(_) => HostBinary::PolicyHost(sibling_binary("policy-host")?),
            }),
            other => bail!("CLUSTER_HOST is `policy-server` or `policy-host`, not {other:?}"),
        }
    }

    /// The module as this host loads it: policy-server runs only a module annotated with its
    /// metadata (`kwctl annotate` with policy-metadata.yml and README.md, as
    /// `make annotated-policy.wasm`), written into `dir`; policy-host takes it as it is.
    pub fn servable(&self, module: &Path, dir: &Path) -> Result<PathBuf> {
        if let HostBinary::PolicyHost(_) = self {
            return Ok(module.to_path_buf());
        }
        let kwctl = kubewarden_binary("KWCTL", "kwctl")?;
        let bytes =
            std::fs::read(module).with_context(|| format!("cannot read {}", module.display()))?;
        let digest = sha1_smol::Sha1::from(&bytes).digest().to_string();
        std::fs::create_dir_all(dir)?;
        let annotated = dir.join(format!("annotated-{digest}.wasm"));
        if annotated.is_file() {
            return Ok(annotated);
        }
        let root = multislice_host::workspace_root();
        let out = std::process::Command::new(&kwctl)
            .arg("annotate")
            .arg("-m")
            .arg(root.join("policy-metadata.yml"))
            .arg("-u")
            .arg(root.join("README.md"))
            .arg("-o")
            .arg(&annotated)
            .arg(module)
            .output()
            .with_context(|| format!("cannot run {}", kwctl.display()))?;
        if !out.status.success() {
            bail!(
                "kwctl annotate {}: {}",
                module.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(annotated)
    }

    pub fn name(&self) -> &'static str {
        match self {
            HostBinary::PolicyServer(_) => "policy-server",
            HostBinary::PolicyHost(_) => "policy-host",
        }
    }
}

/// What a pod's process needs from the control plane.
#[derive(Clone)]
pub(crate) struct Surroundings {
    pub(crate) binary: HostBinary,
    /// Where each pod gets a folder of its own.
    pub(crate) dir: PathBuf,
    pub(crate) logs: PathBuf,
    pub(crate) kubeconfig: PathBuf,
    /// `kubewarden-ca`'s certificate, which the API server trusts for the Service.
    pub(crate) ca: PathBuf,
    /// When every process of the control plane stops.
    pub(crate) until: Instant,
}

/// One pod's process, and how to start it again.
struct PodHost {
    /// The ConfigMap version it serves.
    version: String,
    port: u16,
    command: Vec<String>,
    env: Vec<(String, String)>,
    readiness: SocketAddr,
    process: Option<Process>,
    /// When the pod was marked Ready: the newest such pod gets the Service's traffic.
    ready_at: Instant,
}

#[derive(Default)]
struct Pods {
    by_name: BTreeMap<String, PodHost>,
}

/// The kubelet of policy-server's pods, running until dropped.
pub(crate) struct Host {
    around: Surroundings,
    pods: Arc<Mutex<Pods>>,
    task: JoinHandle<()>,
}

impl Drop for Host {
    fn drop(&mut self) {
        self.task.abort();
        if let Ok(mut pods) = self.pods.lock() {
            pods.by_name.clear();
        }
    }
}

impl Host {
    /// Starts the loop; the Service's route goes into the kube-proxy shim's `routes` once the
    /// controller has made the Service and its Secret.
    pub(crate) fn start(around: Surroundings, cluster: Cluster, routes: Routes) -> Host {
        let pods: Arc<Mutex<Pods>> = Arc::default();
        let route: Arc<Mutex<Option<Arc<ReviewRoute>>>> = Arc::default();
        let (p, a) = (pods.clone(), around.clone());
        let r = route;
        let task = tokio::spawn(async move {
            while Instant::now() < a.until {
                if let Err(e) = pass(&cluster, &a, &p, &r, &routes).await {
                    eprintln!("policy-server pods: {e:#}");
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        Host { around, pods, task }
    }

    pub(crate) fn binary(&self) -> &HostBinary {
        &self.around.binary
    }

    /// The ConfigMap version served to the Service's traffic, if any pod is Ready.
    pub(crate) fn served_version(&self) -> Option<String> {
        let pods = self.pods.lock().ok()?;
        newest(&pods).map(|(_, p)| p.version.clone())
    }

    /// Where the process of the pod that gets the Service's traffic listens: what a client
    /// outside the cluster reaches policy-server at (the audit scanner's `-u`).
    pub(crate) fn served_address(&self) -> Option<SocketAddr> {
        let pods = self.pods.lock().ok()?;
        newest(&pods).map(|(_, p)| SocketAddr::from((Ipv4Addr::LOCALHOST, p.port)))
    }

    /// SIGKILLs the process of the pod that gets the Service's traffic.
    pub(crate) fn kill(&self) -> Result<()> {
        let mut pods = self.pods.lock().map_err(|_| anyhow!("poisoned"))?;
        let name = newest(&pods)
            .map(|(n, _)| n.clone())
            .ok_or_else(|| anyhow!("no policy-server pod is Ready"))?;
        let pod = pods.by_name.get_mut(&name).ok_or_else(|| anyhow!("gone"))?;
        pod.process
            .as_mut()
            .ok_or_else(|| anyhow!("{name}'s host is not running"))?
            .kill_hard()
    }

    /// Starts that pod's process again, on the same address, and waits until it answers.
    pub(crate) fn restart(&self) -> Result<()> {
        let mut pods = self.pods.lock().map_err(|_| anyhow!("poisoned"))?;
        let name = newest(&pods)
            .map(|(n, _)| n.clone())
            .ok_or_else(|| anyhow!("no policy-server pod is Ready"))?;
        let pod = pods.by_name.get_mut(&name).ok_or_else(|| anyhow!("gone"))?;
        if pod.process.as_mut().is_some_and(|p| p.exited().is_none()) {
            bail!("{name}'s host is running already");
        }
        pod.process = Some(spawn(&self.around, &name, &pod.command, &pod.env)?);
        wait_ready(pod.process.as_mut(), pod.readiness)
    }
}

/// The Ready pod whose host gets the traffic: the newest.
fn newest(pods: &Pods) -> Option<(&String, &PodHost)> {
    pods.by_name.iter().max_by_key(|(_, p)| p.ready_at)
}

/// One look at policy-server's pods, as a kubelet's sync loop.
async fn pass(
    cluster: &Cluster,
    around: &Surroundings,
    pods: &Mutex<Pods>,
    route: &Mutex<Option<Arc<ReviewRoute>>>,
    routes: &Routes,
) -> Result<()> {
    let listed = cluster
        .list(
            "v1",
            "Pod",
            Some(NAMESPACE),
            Some(&format!("{POLICY_SERVER_LABEL}=default")),
        )
        .await?;
    let mut alive = Vec::new();
    for pod in &listed {
        let name = pod["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !pod["metadata"]["deletionTimestamp"].is_null() {
            // The containers stop, then the pod is gone.
            if let Ok(mut p) = pods.lock() {
                p.by_name.remove(&name);
            }
            let _ = cluster.delete_now(pod).await;
            continue;
        }
        alive.push(name.clone());
        let known = pods
            .lock()
            .map(|p| p.by_name.contains_key(&name))
            .unwrap_or(true);
        if known || pod["spec"]["nodeName"].is_null() {
            continue;
        }
        if route.lock().map(|r| r.is_none()).unwrap_or(false) {
            let Some(r) = service_route(cluster, around).await? else {
                continue;
            };
            if let Ok(mut all) = routes.write() {
                all.insert(format!("{}:443", r.0), Route::Reviews(r.1.clone()));
            }
            if let Ok(mut slot) = route.lock() {
                *slot = Some(r.1);
            }
        }
        let Some(started) = start_pod(cluster, around, pod).await? else {
            continue;
        };
        cluster.patch_status(pod, &running()).await?;
        if let Ok(mut p) = pods.lock() {
            p.by_name.insert(name, started);
        }
    }
    if let Ok(mut p) = pods.lock() {
        p.by_name.retain(|name, _| alive.contains(name));
        let upstream = newest(&p).map(|(_, h)| SocketAddr::from((Ipv4Addr::LOCALHOST, h.port)));
        if let Some(r) = route.lock().ok().and_then(|r| r.clone()) {
            r.set_upstream(upstream);
        }
    }
    Ok(())
}

/// The Service's ClusterIP and the route to its pods' hosts, once the controller has made the
/// Service and the Secret.
async fn service_route(
    cluster: &Cluster,
    around: &Surroundings,
) -> Result<Option<(String, Arc<ReviewRoute>)>> {
    let Some(service) = get(cluster, "Service", POLICY_SERVER_OBJECTS).await? else {
        return Ok(None);
    };
    let Some((cert, key)) = certificate(cluster, &around.dir).await? else {
        return Ok(None);
    };
    let ip = service["spec"]["clusterIP"]
        .as_str()
        .context("policy-server's Service has no ClusterIP")?;
    let name = format!("{POLICY_SERVER_OBJECTS}.{NAMESPACE}.svc");
    let r = ReviewRoute::new(&cert, &key, &around.ca, &name)?;
    Ok(Some((ip.to_string(), Arc::new(r))))
}

async fn get(cluster: &Cluster, kind: &str, name: &str) -> Result<Option<Value>> {
    cluster
        .get(&json!({"apiVersion": "v1", "kind": kind,
                     "metadata": {"name": name, "namespace": NAMESPACE}}))
        .await
}

/// The Secret's certificate and key, written where a pod would mount them (the key relabelled:
/// kube_proxy::relabelled_key).
async fn certificate(cluster: &Cluster, dir: &Path) -> Result<Option<(PathBuf, PathBuf)>> {
    let Some(secret) = get(cluster, "Secret", POLICY_SERVER_OBJECTS).await? else {
        return Ok(None);
    };
    let decode = |key: &str| -> Result<String> {
        let b64 = secret["data"][key]
            .as_str()
            .ok_or_else(|| anyhow!("policy-server's Secret has no {key}"))?;
        Ok(String::from_utf8(
            base64::engine::general_purpose::STANDARD.decode(b64)?,
        )?)
    };
    std::fs::create_dir_all(dir)?;
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, decode("tls.crt")?)?;
    std::fs::write(&key, relabelled_key(&decode("tls.key")?))?;
    Ok(Some((cert, key)))
}

/// Starts the host of one bound pod and waits until it serves; `None` while the ConfigMap is
/// not at the pod's version (a newer pod is then on its way).
async fn start_pod(
    cluster: &Cluster,
    around: &Surroundings,
    pod: &Value,
) -> Result<Option<PodHost>> {
    let name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let version = pod["metadata"]["labels"][CONFIG_VERSION_LABEL]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let Some(config_map) = get(cluster, "ConfigMap", POLICY_SERVER_OBJECTS).await? else {
        return Ok(None);
    };
    if config_map["metadata"]["resourceVersion"].as_str() != Some(version.as_str()) {
        return Ok(None);
    }
    let Some((cert, key)) = certificate(cluster, &around.dir).await? else {
        return Ok(None);
    };
    let dir = around.dir.join(&name);
    std::fs::create_dir_all(&dir)?;
    let policies = dir.join("policies.yml");
    let text = config_map["data"]["policies.yml"]
        .as_str()
        .context("the ConfigMap has no policies.yml")?;
    std::fs::write(&policies, served_file(text)?)?;
    let (port, readiness_port) = (free_port()?, free_port()?);
    let (command, env) = command_line(around, pod, &dir, (&cert, &key), (port, readiness_port))?;
    let readiness = SocketAddr::from((Ipv4Addr::LOCALHOST, readiness_port));
    let around = around.clone();
    tokio::task::spawn_blocking(move || {
        let mut process = Some(spawn(&around, &name, &command, &env)?);
        wait_ready(process.as_mut(), readiness)?;
        Ok(Some(PodHost {
            version,
            port,
            command,
            env,
            readiness,
            process,
            ready_at: Instant::now(),
        }))
    })
    .await?
}

/// The controller's `policies.yml` as the host reads it: every cluster-wide entry granted all
/// host capabilities, as v1.35's controller grants them.
pub fn served_file(controller_file: &str) -> Result<String> {
    let mut entries: BTreeMap<String, Value> = serde_json::from_str(controller_file)
        .or_else(|_| serde_yaml::from_str(controller_file))
        .context("the controller's policies.yml")?;
    for entry in entries.values_mut() {
        let cluster_wide = entry["namespacedName"]["Namespace"]
            .as_str()
            .or(entry["namespacedName"]["namespace"].as_str())
            .unwrap_or_default()
            .is_empty();
        if cluster_wide && entry.get("hostCapabilities").is_none() {
            entry["hostCapabilities"] = json!(["*"]);
        }
    }
    Ok(serde_yaml::to_string(&entries)?)
}

/// A process's command (the binary, then its arguments) and its environment.
type CommandLine = (Vec<String>, Vec<(String, String)>);

/// The process of a pod: policy-server with the pod's environment (its paths and ports moved
/// to the pod's folder and free ports of 127.0.0.1), or policy-host with the same file, the
/// `policies.yml` of the pod's folder `dir`.
fn command_line(
    around: &Surroundings,
    pod: &Value,
    dir: &Path,
    (cert, key): (&Path, &Path),
    (port, readiness_port): (u16, u16),
) -> Result<CommandLine> {
    let policies = &dir.join("policies.yml");
    let s = |p: &Path| p.display().to_string();
    let mut env: Vec<(String, String)> = vec![("KUBECONFIG".into(), s(&around.kubeconfig))];
    let command = match &around.binary {
        HostBinary::PolicyServer(binary) => {
            let container = &pod["spec"]["containers"][0];
            for var in container["env"].as_array().into_iter().flatten() {
                if let (Some(k), Some(v)) = (var["name"].as_str(), var["value"].as_str()) {
                    env.push((k.to_string(), v.to_string()));
                }
            }
            let moved = [
                ("KUBEWARDEN_CERT_FILE", s(cert)),
                ("KUBEWARDEN_KEY_FILE", s(key)),
                ("KUBEWARDEN_PORT", port.to_string()),
                (
                    "KUBEWARDEN_READINESS_PROBE_PORT",
                    readiness_port.to_string(),
                ),
                ("KUBEWARDEN_POLICIES_DOWNLOAD_DIR", s(&dir.join("store"))),
                ("KUBEWARDEN_POLICIES", s(policies)),
                ("KUBEWARDEN_SIGSTORE_CACHE_DIR", s(&dir.join("sigstore"))),
            ];
            env.retain(|(k, _)| !moved.iter().any(|(m, _)| m == k));
            env.extend(moved.into_iter().map(|(k, v)| (k.to_string(), v)));
            let mut command = vec![
                s(binary),
                "--addr".into(),
                "127.0.0.1".into(),
                "--log-no-color".into(),
            ];
            if let Some(trust) = trust_config(binary) {
                command.extend(["--sigstore-trust-config".into(), s(&trust)]);
            }
            command
        }
        HostBinary::PolicyHost(binary) => vec![
            s(binary),
            "--policies".into(),
            s(policies),
            "--port".into(),
            port.to_string(),
            "--readiness-probe-port".into(),
            readiness_port.to_string(),
            "--cert-file".into(),
            s(cert),
            "--key-file".into(),
            s(key),
            "--lifetime".into(),
            around
                .until
                .saturating_duration_since(Instant::now())
                .as_secs()
                .to_string(),
        ],
    };
    Ok((command, env))
}

fn spawn(
    around: &Surroundings,
    pod: &str,
    command: &[String],
    env: &[(String, String)],
) -> Result<Process> {
    let supervision = Supervision {
        logs: &around.logs,
        lifetime: around.until.saturating_duration_since(Instant::now()) + Duration::from_secs(5),
    };
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let (binary, args) = command.split_first().ok_or_else(|| anyhow!("no command"))?;
    Process::spawn(
        &format!("{}-{pod}", around.binary.name()),
        Path::new(binary),
        args,
        &env,
        &supervision,
    )
}

/// Waits until the readiness probe answers 200; fails at once if the process exits.
fn wait_ready(mut process: Option<&mut Process>, readiness: SocketAddr) -> Result<()> {
    let deadline = Instant::now() + READY_WITHIN;
    loop {
        if let Some(p) = process.as_deref_mut() {
            if let Some(status) = p.exited() {
                bail!("{} exited ({status}):\n{}", p.name, p.tail(20));
            }
        }
        if let Ok((200, _)) = http(readiness, "GET", "/readiness", b"") {
            return Ok(());
        }
        if Instant::now() > deadline {
            let tail = process.map(|p| p.tail(20)).unwrap_or_default();
            bail!("the host did not answer its readiness probe within {READY_WITHIN:?}:\n{tail}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The status a kubelet writes for a pod whose container is up and whose probe passes.
fn running() -> Value {
    json!({
        "phase": "Running",
        "hostIP": "127.0.0.1",
        "podIP": "127.0.0.1",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": "True"},
            {"type": "Ready", "status": "True"},
        ],
    })
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
