//! The client side of Kubewarden's own policy-server: it starts one on loopback for a test or
//! a benchmark and sends it AdmissionReviews as the API server would (the webhook server that
//! the API server calls is `webhook_server.rs`). Random free
//! ports, a bounded wait on its readiness probe, and always stopped (on drop). Requests go
//! over plain HTTP/1.1 as the API server sends them (the API server uses TLS; the server's
//! code path past TLS is the same).
use crate::capabilities::{allowed_by_file, ContextAwareResource};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long policy-server may take to compile its modules and answer its readiness probe.
const READY_WITHIN: Duration = Duration::from_secs(120);
/// How long one request may take before the test calls it hung.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One entry of policy-server's policies file.
#[derive(Debug, Clone)]
pub struct ServedPolicy {
    /// The id in `POST /validate/<id>`.
    pub id: String,
    /// An annotated module (`kwctl annotate`): policy-server reads its metadata.
    pub module: PathBuf,
    pub settings: Value,
    /// `allowedToMutate`: false for a policy deployed with `mutating: false`, whose patches
    /// policy-server refuses.
    pub allowed_to_mutate: bool,
    /// `contextAwareResources`: the Kubernetes kinds policy-server lets the policy read.
    pub context_aware_resources: BTreeSet<ContextAwareResource>,
    /// `hostCapabilities`: policy-server 1.35 and later refuses every host call of a policy
    /// that this list does not grant (`*` grants all).
    pub host_capabilities: Vec<String>,
}

impl ServedPolicy {
    /// A ClusterAdmissionPolicy's entry as Kubewarden's v1.35 controller writes it into
    /// `policies.yml`: `hostCapabilities: ["*"]`, which it grants every cluster-wide policy
    /// (`internal/controller/policyserver_controller_configmap.go`, `hostCapabilitiesForPolicy`),
    /// and the manifest's `contextAwareResources`, here what `policy-metadata.yml` declares
    /// (what the component `examples/queue-check/` grants).
    pub fn cluster_wide(
        id: &str,
        module: PathBuf,
        settings: Value,
        allowed_to_mutate: bool,
    ) -> Result<ServedPolicy> {
        Ok(ServedPolicy {
            id: id.to_string(),
            module,
            settings,
            allowed_to_mutate,
            context_aware_resources: allowed_by_file(
                &crate::workspace_root().join("policy-metadata.yml"),
            )?,
            host_capabilities: vec!["*".to_string()],
        })
    }
}

/// A running policy-server; stopped and its scratch folder removed when dropped.
pub struct PolicyServer {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

/// The policy-server binary (see [`kubewarden_binary`]).
pub fn binary() -> Result<PathBuf> {
    kubewarden_binary("POLICY_SERVER", "policy-server")
}

/// The kwctl binary (see [`kubewarden_binary`]).
pub fn kwctl() -> Result<PathBuf> {
    kubewarden_binary("KWCTL", "kwctl")
}

/// One of Kubewarden's own binaries, found as `.ci/kubewarden which` finds it (docs/contributing/testing.md
/// "Kubewarden's own tools"): the environment variable `var` when it holds a path, else its
/// value (default `name`) on PATH, else in `../shared/tools`.
pub fn kubewarden_binary(var: &str, name: &str) -> Result<PathBuf> {
    let value = std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| name.to_string());
    let found = if value.contains('/') {
        Some(PathBuf::from(&value)).filter(|p| p.is_file())
    } else {
        find_on_path(&value).or_else(|| Some(shared_tools().join(&value)).filter(|p| p.is_file()))
    };
    found.ok_or_else(|| {
        let looked = if value.contains('/') {
            format!("{var}={value} is not a file")
        } else {
            format!("{value} is neither on PATH nor in ../shared/tools")
        };
        anyhow!("{name} is not installed ({looked}); see docs/contributing/testing.md \"Kubewarden's own tools\"")
    })
}

/// `../shared/tools` beside the clone, where CI machines may keep Kubewarden's binaries and
/// the Sigstore trust config.
fn shared_tools() -> PathBuf {
    crate::workspace_root().join("../shared/tools")
}

/// The first executable of that name in PATH.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A port nobody listens on now. Another process may take it before policy-server binds it;
/// `start` then fails with the server's log, and a rerun picks other ports.
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("no free port")?;
    Ok(listener.local_addr()?.port())
}

/// The Sigstore trust config that keeps kwctl and policy-server off the network (see
/// shared/tools/README.md): `SIGSTORE_TRUST_CONFIG`, else one beside the binary, else the one
/// in `../shared/tools`, as `.ci/kubewarden trust-config` finds it.
pub fn trust_config(binary: &Path) -> Option<PathBuf> {
    std::env::var_os("SIGSTORE_TRUST_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .chain(
            binary
                .parent()
                .map(|d| d.join("sigstore-trust-config.json")),
        )
        .chain([shared_tools().join("sigstore-trust-config.json")])
        .find(|p| p.is_file())
}

impl PolicyServer {
    /// Starts policy-server with these policies and waits until its readiness probe says OK.
    pub fn start(policies: &[ServedPolicy], workers: Option<usize>) -> Result<PolicyServer> {
        let binary = binary()?;
        let dir = std::env::temp_dir().join(format!(
            "jsp-policy-server-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ));
        std::fs::create_dir_all(dir.join("downloads"))?;
        let mut file = serde_json::Map::new();
        for p in policies {
            let module = std::fs::canonicalize(&p.module).with_context(|| {
                format!(
                    "{} is missing; build it with `make annotated-policy.wasm`",
                    p.module.display()
                )
            })?;
            file.insert(
                p.id.clone(),
                json!({
                    "module": format!("file://{}", module.display()),
                    "settings": p.settings,
                    "allowedToMutate": p.allowed_to_mutate,
                    "contextAwareResources": p.context_aware_resources,
                    "hostCapabilities": p.host_capabilities,
                }),
            );
        }
        let policies_file = dir.join("policies.yml");
        std::fs::write(&policies_file, serde_yaml::to_string(&file)?)?;

        let port = free_port()?;
        let probe = free_port()?;
        let mut command = Command::new(&binary);
        command
            .args(["--addr", "127.0.0.1", "--port", &port.to_string()])
            .args(["--readiness-probe-port", &probe.to_string()])
            .arg("--policies")
            .arg(&policies_file)
            .arg("--policies-download-dir")
            .arg(dir.join("downloads"))
            .args(["--ignore-kubernetes-connection-failure", "--log-no-color"])
            .args(["--log-level", "warn"]);
        if let Some(trust) = trust_config(&binary) {
            command.arg("--sigstore-trust-config").arg(trust);
        }
        if let Some(n) = workers {
            command.args(["--workers", &n.to_string()]);
        }
        let log = std::fs::File::create(dir.join("server.log"))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let mut server = PolicyServer {
            child,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            dir,
        };
        server.wait_ready(SocketAddr::from((Ipv4Addr::LOCALHOST, probe)))?;
        Ok(server)
    }

    fn wait_ready(&mut self, probe: SocketAddr) -> Result<()> {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "policy-server exited ({status}) before it was ready:\n{}",
                    self.log()
                );
            }
            if let Ok((200, _)) = http(probe, "GET", "/readiness", b"") {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "policy-server was not ready within {READY_WITHIN:?}:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server's process id, for reading its CPU time from /proc.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server logged so far (for error messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// The address `wrk` and others can POST to.
    pub fn url(&self, policy_id: &str) -> String {
        format!("http://{}/validate/{policy_id}", self.addr)
    }

    /// The AdmissionReview body the API server would POST for this request.
    pub fn review_body(request: &Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request,
        }))
        .expect("JSON values serialize")
    }

    /// POSTs an AdmissionReview for `request` to a policy and returns its `response`.
    pub fn review(&self, policy_id: &str, request: &Value) -> Result<Value> {
        let path = format!("/validate/{policy_id}");
        let (status, body) = http(self.addr, "POST", &path, &Self::review_body(request))?;
        if status != 200 {
            bail!(
                "POST {path}: HTTP {status}: {}\n{}",
                String::from_utf8_lossy(&body),
                self.log()
            );
        }
        let review: Value = serde_json::from_slice(&body).with_context(|| {
            format!("POST {path}: not JSON: {}", String::from_utf8_lossy(&body))
        })?;
        if review["response"]["uid"] != request["uid"] {
            bail!("POST {path}: the response answers another uid: {review}");
        }
        Ok(review["response"].clone())
    }
}

impl Drop for PolicyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One HTTP/1.1 exchange with `Connection: close`: (status, body).
pub fn http(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("{method} {path}: no HTTP header in the answer"))?;
    let header = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status: u16 = header
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("{method} {path}: bad status line: {header}"))?;
    let rest = &raw[split + 4..];
    let body = if header.contains("transfer-encoding: chunked") {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Ok((status, body))
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| anyhow!("bad chunked body"))?;
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = data
            .get(..size)
            .ok_or_else(|| anyhow!("chunk runs past the body"))?;
        out.extend_from_slice(chunk);
        data = data.get(size + 2..).unwrap_or(&[]);
    }
}
