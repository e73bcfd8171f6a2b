//! The one stand-in for kube-proxy. EndpointSlices refuse loopback addresses and no kube-proxy
//! runs, so a Service's ClusterIP leads nowhere; kube-apiserver's `--egress-selector-config-file`
//! sends what it dials in the `cluster` context (webhooks that name a Service: Kubewarden's
//! controller's and the policies' that the controller writes) through this HTTP CONNECT proxy on
//! a Unix socket in the control plane's folder (an egress selector's TCP transport must be TLS
//! with a client certificate), which maps the `<ClusterIP>:<port>` the API server asks for to a process on
//! loopback, as kube-proxy's rules map it to a pod:
//! - the controller's webhook Service: passed through, bytes as they come, to its port 9443;
//! - policy-server's Service: its TLS ended here with the certificate of the Secret the
//!   controller wrote for it (the same the host serves with), each review logged (the request,
//!   and what the host answered: policy-server logs no bodies), and sent on over TLS to the host
//!   process of the policy-server pod the node agent last marked Ready.
//!
//! Bounded as the other servers here: loopback only, a lifetime, a bounded number of requests
//! per connection.
use anyhow::{anyhow, bail, Context, Result};
use multislice_host::review::ReviewResponse;
use multislice_host::webhook_server::{read_message, review_log_line, server_tls, Answer, Message};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

const REQUESTS_PER_CONNECTION: usize = 10_000;
const IDLE: Duration = Duration::from_secs(60);

/// Where a Service's address leads.
#[derive(Clone)]
pub enum Route {
    /// Every byte to this address (the controller's webhook server).
    Pass(SocketAddr),
    /// TLS ended with the Service's certificate, each review logged, then sent to the host.
    Reviews(Arc<ReviewRoute>),
}

pub struct ReviewRoute {
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
    /// The name the host's certificate carries (`<service>.<namespace>.svc`).
    pub server_name: String,
    /// The host of the pod last marked Ready; `None` while no pod is.
    pub upstream: RwLock<Option<SocketAddr>>,
}

impl ReviewRoute {
    /// From the PEM certificate and key the host serves with, and the CA that signed them.
    pub fn new(cert: &Path, key: &Path, ca: &Path, server_name: &str) -> Result<ReviewRoute> {
        let server = server_tls(cert, key)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca)? {
            roots.add(c?)?;
        }
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(ReviewRoute {
            server: Arc::new(server),
            client: Arc::new(client),
            server_name: server_name.to_string(),
            upstream: RwLock::new(None),
        })
    }

    pub fn set_upstream(&self, upstream: Option<SocketAddr>) {
        if let Ok(mut u) = self.upstream.write() {
            *u = upstream;
        }
    }
}

/// Where each `<ClusterIP>:<port>` leads.
pub type Routes = Arc<RwLock<BTreeMap<String, Route>>>;

/// The proxy: its socket, and the routes by `<ClusterIP>:<port>`.
pub struct KubeProxy {
    pub socket: PathBuf,
    routes: Routes,
    stop: Arc<AtomicBool>,
}

impl KubeProxy {
    /// Listens on `socket` for `lifetime`, logging reviews to `log` and what went wrong (a host
    /// that is down, in an outage) to `errors`.
    pub fn start(
        socket: &Path,
        log: &Path,
        errors: &Path,
        lifetime: Duration,
    ) -> Result<KubeProxy> {
        let listener = UnixListener::bind(socket)
            .with_context(|| format!("cannot listen on {}", socket.display()))?;
        let routes: Routes = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let log = Arc::new(Mutex::new(file));
        let errors = Arc::new(Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(errors)?,
        ));
        let (r, s) = (routes.clone(), stop.clone());
        let until = Instant::now() + lifetime;
        listener.set_nonblocking(true)?;
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) && Instant::now() < until {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (routes, log, errors) = (r.clone(), log.clone(), errors.clone());
                        std::thread::spawn(move || {
                            if let Err(e) = serve(stream, &routes, &log) {
                                if let Ok(mut file) = errors.lock() {
                                    let _ = writeln!(file, "{e:#}");
                                }
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Ok(KubeProxy {
            socket: socket.to_path_buf(),
            routes,
            stop,
        })
    }

    /// From now on `<cluster_ip>:<port>` leads where `route` says.
    pub fn route(&self, cluster_ip: &str, port: u16, route: Route) {
        if let Ok(mut routes) = self.routes.write() {
            routes.insert(format!("{cluster_ip}:{port}"), route);
        }
    }

    /// The routes, for a component that learns a Service's address later.
    pub fn routes(&self) -> Routes {
        self.routes.clone()
    }

    /// The egress selector configuration that sends the API server's `cluster` dials here.
    pub fn egress_selector_configuration(&self) -> String {
        format!(
            "apiVersion: apiserver.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\negressSelections:\n- name: cluster\n  connection:\n    proxyProtocol: HTTPConnect\n    transport:\n      uds:\n        udsName: {}\n",
            self.socket.display()
        )
    }
}

impl Drop for KubeProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One CONNECT: its target's route, then the tunnel.
fn serve(
    mut stream: UnixStream,
    routes: &RwLock<BTreeMap<String, Route>>,
    log: &Mutex<std::fs::File>,
) -> Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IDLE))?;
    // Byte by byte up to the blank line: the TLS handshake follows at once, and must stay unread.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 || head.len() > 8192 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let target = match head.split_whitespace().collect::<Vec<_>>()[..] {
        ["CONNECT", target, ..] => target.to_string(),
        _ => bail!("not a CONNECT: {head:?}"),
    };
    let route = routes.read().ok().and_then(|r| r.get(&target).cloned());
    let Some(route) = route else {
        stream.write_all(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")?;
        bail!("no Service behind {target}");
    };
    match route {
        Route::Pass(addr) => {
            let upstream = match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                Ok(u) => u,
                Err(e) => {
                    stream.write_all(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")?;
                    return Err(e.into());
                }
            };
            stream.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
            pass(stream, upstream)
        }
        Route::Reviews(route) => {
            stream.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
            reviews(stream, &route, log)
        }
    }
}

/// Bytes both ways until either side closes.
fn pass(down: UnixStream, up: TcpStream) -> Result<()> {
    let (mut down_r, mut up_w) = (down.try_clone()?, up.try_clone()?);
    let (mut up_r, mut down_w) = (up, down);
    let t = std::thread::spawn(move || {
        let _ = std::io::copy(&mut down_r, &mut up_w);
        let _ = up_w.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut up_r, &mut down_w);
    let _ = down_w.shutdown(std::net::Shutdown::Write);
    let _ = t.join();
    Ok(())
}

/// TLS ended with the Service's certificate; each request sent to the host over TLS of its own,
/// its answer sent back, and the two logged.
fn reviews(down: UnixStream, route: &ReviewRoute, log: &Mutex<std::fs::File>) -> Result<()> {
    let connection = rustls::ServerConnection::new(route.server.clone())?;
    let mut down = BufReader::new(rustls::StreamOwned::new(connection, down));
    let mut up: Option<Upstream> = None;
    for _ in 0..REQUESTS_PER_CONNECTION {
        let Some(request) = read_message(&mut down)? else {
            return Ok(());
        };
        // One connection of the API server's stands for the connections it would open to
        // policy-server's pods: a pod that went away (a rollout) takes its connection with it,
        // and the request goes on a new connection, to the pod the Service now leads to. A host
        // that is down (killed) refuses the new connection, and the API server's call fails.
        let current = route.upstream.read().ok().and_then(|u| *u);
        if up.as_ref().map(|u| u.0) != current {
            up = None;
        }
        let reused = up.is_some();
        let response = match exchange(&mut up, route, current, &request) {
            Err(_) if reused => exchange(&mut up, route, current, &request)?,
            answer => answer?,
        };
        down.get_mut().write_all(&response.raw)?;
        down.get_mut().flush()?;
        log_review(log, &request, &response)?;
    }
    Ok(())
}

/// A TLS connection to a pod's host, and its address.
type Upstream = (
    SocketAddr,
    BufReader<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>,
);

/// Sends `request` to the host at `addr` (on `up`, or a new connection) and reads its answer;
/// on an error the connection is dropped.
fn exchange(
    up: &mut Option<Upstream>,
    route: &ReviewRoute,
    addr: Option<SocketAddr>,
    request: &Message,
) -> Result<Message> {
    if up.is_none() {
        let addr = addr.ok_or_else(|| anyhow!("no policy-server pod is Ready"))?;
        let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        tcp.set_read_timeout(Some(IDLE))?;
        let name = ServerName::try_from(route.server_name.clone())?;
        let client = rustls::ClientConnection::new(route.client.clone(), name)?;
        *up = Some((addr, BufReader::new(rustls::StreamOwned::new(client, tcp))));
    }
    let answer = match up.as_mut() {
        Some((_, upstream)) => send(upstream, request),
        None => Err(anyhow!("no upstream")),
    };
    if answer.is_err() {
        *up = None;
    }
    answer
}

/// Writes `request` on `upstream` and reads the answer.
fn send(
    upstream: &mut BufReader<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>,
    request: &Message,
) -> Result<Message> {
    upstream.get_mut().write_all(&request.raw)?;
    upstream.get_mut().flush()?;
    read_message(upstream)?.ok_or_else(|| anyhow!("the host closed the connection"))
}

/// One JSON line per review: the policy (`<id>` of `/validate/<id>`), what the API server asked
/// and what the host answered.
fn log_review(log: &Mutex<std::fs::File>, request: &Message, response: &Message) -> Result<()> {
    let path = request.start.split_whitespace().nth(1).unwrap_or_default();
    let policy = path
        .split('?')
        .next()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let review: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let answer: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    let request = &review["request"];
    let answer = match ReviewResponse::from_response(&answer["response"]) {
        Ok(r) => Answer {
            allowed: json!(r.allowed),
            message: json!(r.message),
            warnings: json!(r.warnings),
            patch: r.patch.unwrap_or(json!([])),
        },
        Err(_) => Answer {
            allowed: Value::Null,
            message: json!(response.start),
            warnings: json!([]),
            patch: json!([]),
        },
    };
    let text = review_log_line(policy, request, answer);
    let mut file = log.lock().map_err(|_| anyhow!("log lock poisoned"))?;
    file.write_all(text.as_bytes())?;
    Ok(())
}

/// Where the policy-server pods' hosts find their certificate: the Secret's `tls.key` with the
/// PEM label of what it holds. Kubewarden's controller v1.31 writes a SEC1 EC key under an
/// `RSA PRIVATE KEY` label (fixed in v1.33), which rustls, and so policy-server since v1.33,
/// cannot read; the DER is left as it is.
pub fn relabelled_key(pem: &str) -> String {
    pem.replace("RSA PRIVATE KEY", "EC PRIVATE KEY")
}
