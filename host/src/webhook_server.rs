//! The server side of an admission webhook: the policy served over HTTPS on loopback, for a
//! real kube-apiserver to call (`policy_server_client.rs` is the other way round: it starts
//! Kubewarden's policy-server and is its client). The same `policy.wasm` and runner as the
//! tests, compiled once at start; as policy-server (since v1.10) does, each request gets a
//! fresh instance and policy-server's default deadline (2 s). Like policy-server, it serves
//! several policies, each at `POST /validate/<id>` with its own settings and its own
//! `mutating` flag, and answers with an AdmissionReview as policy-server does (the JSON patch
//! that the host derives from the mutated object, base64, `patchType: JSONPatch`). A policy
//! served with `mutating: false` that answers with a patch is refused as policy-server refuses
//! it: the API server would silently drop a patch from a validating webhook, so nothing else
//! would notice. It can log every review it answers, one JSON line each, so a test can compare
//! what the real controllers sent.
//!
//! Bounded on purpose: it listens on 127.0.0.1 only, stops by itself after its lifetime, each
//! connection serves a bounded number of requests, and an idle connection is closed.
//!
//! The control plane runs it in a process of its own (`policy-host`, in the cluster crate), fed
//! the `policies.yml` that policy-server reads, so that it can be killed and restarted on its
//! address as policy-server can, and its policies replaced without a gap ([`WebhookServer::replace`]).
use crate::review::admission_response;
use crate::Policy;
use anyhow::{anyhow, bail, Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Requests one connection may carry before the server closes it (the API server reconnects).
const REQUESTS_PER_CONNECTION: usize = 10_000;
/// An idle keep-alive connection is closed after this.
const IDLE: Duration = Duration::from_secs(30);
/// The largest AdmissionReview accepted (the API server's own request limit is 3 MiB).
const MAX_BODY: usize = 8 << 20;
/// At most this many header lines in one message.
const MAX_HEADERS: usize = 200;

/// One policy the webhook serves: the module, its settings, and the id in its path.
#[derive(Clone)]
pub struct WebhookPolicy {
    /// The `<id>` of `/validate/<id>` (Kubewarden's `clusterwide-<policy>` or
    /// `namespaced-<namespace>-<policy>`).
    pub id: String,
    pub policy: Arc<Policy>,
    pub settings: Value,
    /// Whether its answer may carry a patch (the policy's `spec.mutating`).
    pub mutating: bool,
}

/// What the webhook serves at start (more may be added with [`WebhookServer::serve`]), and how.
pub struct WebhookConfig {
    pub policies: Vec<WebhookPolicy>,
    /// Where it listens: a loopback address, port 0 for a free one. std binds with
    /// `SO_REUSEADDR`, so a host restarted after a kill gets its port back at once.
    pub addr: SocketAddr,
    /// The serving certificate and key (PEM files); plain HTTP without them, as policy-server.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Where to append one JSON line per answered review (`null` to keep none).
    pub log: Option<PathBuf>,
    /// The server stops accepting after this, whatever else happens.
    pub lifetime: Duration,
}

/// A running webhook server; it stops when dropped.
pub struct WebhookServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
    scheme: &'static str,
}

impl WebhookServer {
    /// Binds its loopback address and serves in background threads.
    pub fn start(config: WebhookConfig) -> Result<WebhookServer> {
        if !config.addr.ip().is_loopback() {
            bail!("the webhook listens on loopback only, not {}", config.addr);
        }
        let tls = match &config.tls {
            Some((cert, key)) => Some(Arc::new(server_tls(cert, key)?)),
            None => None,
        };
        let listener = TcpListener::bind(config.addr)
            .with_context(|| format!("cannot listen on {}", config.addr))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let log = match &config.log {
            Some(path) => Some(Arc::new(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .with_context(|| format!("cannot open {}", path.display()))?,
            ))),
            None => None,
        };
        let shared = Arc::new(Shared {
            policies: RwLock::new(BTreeMap::new()),
            log,
        });
        let deadline = Instant::now() + config.lifetime;
        let stopping = stop.clone();
        let serving = shared.clone();
        std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (tls, shared) = (tls.clone(), serving.clone());
                        std::thread::spawn(move || {
                            if let Err(e) = serve_connection(stream, tls, &shared) {
                                eprintln!("webhook: connection: {e:#}");
                            }
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(e) => eprintln!("webhook: accept: {e}"),
                }
            }
        });
        let server = WebhookServer {
            addr,
            stop,
            shared,
            scheme: if config.tls.is_some() {
                "https"
            } else {
                "http"
            },
        };
        for policy in config.policies {
            server.serve(policy)?;
        }
        Ok(server)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves one more policy, at `/validate/<id>`; an id already served is an error.
    pub fn serve(&self, policy: WebhookPolicy) -> Result<()> {
        let mut policies = self
            .shared
            .policies
            .write()
            .map_err(|_| anyhow!("policies lock poisoned"))?;
        if policies.contains_key(&policy.id) {
            bail!("a policy is already served at /validate/{}", policy.id);
        }
        policies.insert(policy.id.clone(), Arc::new(policy));
        Ok(())
    }

    /// Serves exactly `policies` from now on, in one step: a request is answered either by the
    /// policies before or by those after, never refused in between (policy-server's rolling
    /// update, where a new replica is ready before the old one stops).
    pub fn replace(&self, policies: Vec<WebhookPolicy>) -> Result<()> {
        let by_id = policies
            .into_iter()
            .map(|p| (p.id.clone(), Arc::new(p)))
            .collect();
        *self
            .shared
            .policies
            .write()
            .map_err(|_| anyhow!("policies lock poisoned"))? = by_id;
        Ok(())
    }

    /// The URL of a policy's path on this server.
    pub fn url(&self, id: &str) -> String {
        format!("{}://{}/validate/{id}", self.scheme, self.addr)
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

struct Shared {
    /// By id, the `<id>` of `/validate/<id>`.
    policies: RwLock<BTreeMap<String, Arc<WebhookPolicy>>>,
    log: Option<Arc<Mutex<std::fs::File>>>,
}

impl Shared {
    fn policy_at(&self, path: &str) -> Option<Arc<WebhookPolicy>> {
        self.policies.read().ok()?.get(policy_id(path)?).cloned()
    }
}

/// The `<id>` of a request path `/validate/<id>` (the API server may add a query).
fn policy_id(path: &str) -> Option<&str> {
    path.split('?')
        .next()?
        .strip_prefix("/validate/")
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

/// The TLS configuration of a server with this PEM certificate and key, speaking HTTP/1.1.
pub fn server_tls(cert: &Path, key: &Path) -> Result<rustls::ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("cannot read {}", cert.display()))?
        .collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("cannot read {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    // HTTP/1.1 only, as JobSet's and Kueue's webhook servers also choose.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn serve_connection(
    stream: TcpStream,
    tls: Option<Arc<rustls::ServerConfig>>,
    shared: &Shared,
) -> Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IDLE))?;
    match tls {
        Some(tls) => {
            let connection = rustls::ServerConnection::new(tls)?;
            serve_requests(rustls::StreamOwned::new(connection, stream), shared)
        }
        None => serve_requests(stream, shared),
    }
}

fn serve_requests(mut stream: impl Read + Write, shared: &Shared) -> Result<()> {
    for _ in 0..REQUESTS_PER_CONNECTION {
        let Some((path, body)) = read_request(&mut stream)? else {
            return Ok(());
        };
        let (status, reply) = match shared.policy_at(&path) {
            Some(policy) => match answer(shared, &policy, &body) {
                Ok(reply) => (200, reply),
                Err(e) => (400, json!({"error": format!("{e:#}")})),
            },
            None => (404, json!({"error": format!("no policy at {path}")})),
        };
        let bytes = serde_json::to_vec(&reply)?;
        write!(
            stream,
            "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            if status == 200 { "OK" } else { "Error" },
            bytes.len()
        )?;
        stream.write_all(&bytes)?;
        stream.flush()?;
    }
    Ok(())
}

/// One HTTP/1.1 request's path and body; `None` when the peer closed the connection.
fn read_request(stream: &mut impl Read) -> Result<Option<(String, Vec<u8>)>> {
    let mut reader = BufReader::new(stream);
    let Some(message) = read_message(&mut reader)? else {
        return Ok(None);
    };
    // Nothing may stay buffered: the API server waits for our answer before sending more.
    if !reader.buffer().is_empty() {
        bail!("pipelined requests are not supported");
    }
    let path = message
        .start
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| anyhow!("bad request line {:?}", message.start))?
        .to_string();
    Ok(Some((path, message.body)))
}

/// An HTTP/1.1 message as it went over the wire, and its start line and body.
pub struct Message {
    pub raw: Vec<u8>,
    pub start: String,
    pub body: Vec<u8>,
}

/// One request or response with a `content-length` (what the API server and both hosts send);
/// `None` when the peer closed the connection between messages.
pub fn read_message(reader: &mut impl BufRead) -> Result<Option<Message>> {
    let mut raw = Vec::new();
    let mut start = String::new();
    match reader.read_line(&mut start) {
        Ok(0) => return Ok(None),
        Ok(_) => {}
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e.into()),
    }
    raw.extend_from_slice(start.as_bytes());
    let mut length = 0usize;
    let mut ended = false;
    for _ in 0..MAX_HEADERS {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 {
            bail!("the connection closed inside a message's head");
        }
        raw.extend_from_slice(header.as_bytes());
        let line = header.trim_end();
        if line.is_empty() {
            ended = true;
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse()?;
            }
            if name.eq_ignore_ascii_case("transfer-encoding") {
                bail!("a chunked message ({line}) is not read here");
            }
        }
    }
    if !ended {
        bail!("a message with more than {MAX_HEADERS} header lines");
    }
    if length > MAX_BODY {
        bail!("a body of {length} bytes");
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    raw.extend_from_slice(&body);
    Ok(Some(Message {
        raw,
        start: start.trim_end().to_string(),
        body,
    }))
}

/// What the API server was answered, as the reviews log records it.
pub struct Answer {
    pub allowed: Value,
    pub message: Value,
    pub warnings: Value,
    pub patch: Value,
}

/// One line of the reviews log: the policy, what the API server asked (and for whom:
/// `userInfo`, which tells a MultiKueue copy's requester from the worker's own Kueue) and what
/// it was answered. One write per line: a host killed mid-run leaves whole lines behind.
pub fn review_log_line(policy: &str, request: &Value, answer: Answer) -> String {
    let mut text = json!({
        "policy": policy,
        "kind": request.pointer("/kind/kind"),
        "operation": request.get("operation"),
        "namespace": request.get("namespace"),
        "name": request.get("name"),
        "userInfo": request.get("userInfo"),
        "object": request.get("object"),
        "oldObject": request.get("oldObject"),
        "allowed": answer.allowed,
        "message": answer.message,
        "warnings": answer.warnings,
        "patch": answer.patch,
    })
    .to_string();
    text.push('\n');
    text
}

/// The AdmissionReview answer to one AdmissionReview request, from one policy.
fn answer(shared: &Shared, served: &WebhookPolicy, body: &[u8]) -> Result<Value> {
    let review: Value = serde_json::from_slice(body).context("not JSON")?;
    let request = review
        .get("request")
        .ok_or_else(|| anyhow!("an AdmissionReview without request"))?;
    let outcome = served.policy.validate(request, &served.settings)?;
    let uid = request.get("uid").cloned().unwrap_or(Value::Null);
    let response = admission_response(uid, &served.id, served.mutating, &outcome)?;
    if let Some(log) = &shared.log {
        // What the API server was answered (`allowed`, `message`), and the patch the policy
        // returned, even one refused because the policy may not mutate.
        let answer = Answer {
            allowed: response["allowed"].clone(),
            message: json!(response.pointer("/status/message")),
            warnings: json!(outcome.warnings),
            patch: outcome.patch_json(),
        };
        let text = review_log_line(&served.id, request, answer);
        let mut file = log.lock().map_err(|_| anyhow!("log lock poisoned"))?;
        file.write_all(text.as_bytes())?;
    }
    Ok(json!({
        "apiVersion": review.get("apiVersion").cloned().unwrap_or(json!("admission.k8s.io/v1")),
        "kind": "AdmissionReview",
        "response": response,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_policy_is_served_at_its_own_path() {
        assert_eq!(policy_id("/validate/a?timeout=5s"), Some("a"));
        assert_eq!(policy_id("/validate/clusterwide-b"), Some("clusterwide-b"));
        for path in ["/validate/", "/validate/a/b", "/mutate/a", "/"] {
            assert_eq!(policy_id(path), None, "{path}");
        }
    }
}
