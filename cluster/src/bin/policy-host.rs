//! policy-host: the project's stand-in for Kubewarden's policy-server on the control plane, for
//! machines without policy-server. It reads the `policies.yml` that policy-server reads, takes
//! policy-server's own flags for what it does alike, and serves each policy at
//! `/validate/<id>` with the host crate's waPC runner and policy-server's 2 s deadline.
//!
//! What it does as policy-server does: `module` (a `file://` URL or a path), `settings`
//! (validated at start: a policy whose settings are refused stops the host, as it stops
//! policy-server), `allowedToMutate`, `contextAwareResources` (answered by the API server of
//! `$KUBECONFIG`), `timeoutEvalSeconds`, and the readiness probe (`GET /readiness` on
//! `--readiness-probe-port`, plain HTTP). What it adds for the tests: `--review-log` (one JSON
//! line per review), `--lifetime` (it exits by itself). A new file is served by a new process, as a
//! new policy-server pod serves a new ConfigMap version (cluster/src/host.rs). It refuses
//! `policyMode: monitor` and policy groups, which policy-server serves and this host does not.
//!
//! usage: policy-host --policies FILE --port N --readiness-probe-port N [--addr 127.0.0.1]
//!        [--cert-file FILE --key-file FILE] [--review-log FILE] [--lifetime SECONDS]
use anyhow::{anyhow, bail, Context, Result};
use multislice_cluster::context_aware::ClusterBackend;
use multislice_cluster::Cluster;
use multislice_host::capabilities::{Capabilities, ContextAwareResource};
use multislice_host::runner::Deadline;
use multislice_host::webhook_server::{WebhookConfig, WebhookPolicy, WebhookServer};
use multislice_host::Policy;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

struct Args {
    policies: PathBuf,
    addr: IpAddr,
    port: u16,
    readiness_port: u16,
    tls: Option<(PathBuf, PathBuf)>,
    review_log: Option<PathBuf>,
    lifetime: Duration,
}

fn parse_args() -> Result<Args> {
    let mut flags = BTreeMap::new();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let name = flag
            .strip_prefix("--")
            .ok_or_else(|| anyhow!("unexpected argument {flag}"))?;
        let value = it.next().ok_or_else(|| anyhow!("{flag} needs a value"))?;
        flags.insert(name.to_string(), value);
    }
    let mut take = |name: &str| flags.remove(name);
    let port = |v: Option<String>, name: &str| -> Result<u16> {
        v.ok_or_else(|| anyhow!("--{name} is required"))?
            .parse()
            .with_context(|| format!("--{name}"))
    };
    let args = Args {
        policies: take("policies")
            .map(PathBuf::from)
            .ok_or_else(|| anyhow!("--policies is required"))?,
        addr: take("addr")
            .map(|a| a.parse())
            .transpose()?
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        port: port(take("port"), "port")?,
        readiness_port: port(take("readiness-probe-port"), "readiness-probe-port")?,
        tls: match (take("cert-file"), take("key-file")) {
            (Some(cert), Some(key)) => Some((cert.into(), key.into())),
            (None, None) => None,
            _ => bail!("--cert-file and --key-file go together"),
        },
        review_log: take("review-log").map(PathBuf::from),
        lifetime: Duration::from_secs(take("lifetime").map_or(Ok(3600), |s| s.parse())?),
    };
    if let Some(unknown) = flags.keys().next() {
        bail!("--{unknown} is not a flag of policy-host");
    }
    Ok(args)
}

/// Every policy of the file, compiled, with what it is granted.
fn load(file: &Path, cluster: Option<&Cluster>) -> Result<Vec<WebhookPolicy>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let entries: BTreeMap<String, Value> = serde_yaml::from_str(&text)?;
    let mut compiled: BTreeMap<(String, u64), Policy> = BTreeMap::new();
    let mut out = Vec::new();
    for (id, entry) in entries {
        if entry.get("policies").is_some() {
            bail!("{id}: policy groups are served by policy-server, not by policy-host");
        }
        if entry["policyMode"].as_str().is_some_and(|m| m != "protect") {
            bail!(
                "{id}: policyMode {} is served by policy-server, not by policy-host",
                entry["policyMode"]
            );
        }
        let module = entry["module"]
            .as_str()
            .ok_or_else(|| anyhow!("{id}: no module"))?;
        let path = module.strip_prefix("file://").unwrap_or(module).to_string();
        let seconds = entry["timeoutEvalSeconds"].as_u64().unwrap_or(2);
        let policy = match compiled.get(&(path.clone(), seconds)) {
            Some(p) => p.clone(),
            None => {
                let bytes =
                    std::fs::read(&path).with_context(|| format!("{id}: cannot read {path}"))?;
                let p = Policy::with_deadline(&bytes, Deadline::Seconds(seconds))?;
                compiled.insert((path.clone(), seconds), p.clone());
                p
            }
        };
        let settings = match &entry["settings"] {
            Value::Null => Value::Object(Default::default()),
            s => s.clone(),
        };
        let outcome = policy.validate_settings(&settings)?;
        if !outcome.valid {
            bail!(
                "{id}: the policy refuses its settings: {:?}",
                outcome.message
            );
        }
        let allowed = ContextAwareResource::list_of(&serde_json::json!({
            "spec": {"contextAwareResources": entry["contextAwareResources"]}
        }))
        .map_err(|e| anyhow!("{id}: {e}"))?;
        let capabilities = match (allowed.is_empty(), cluster) {
            (true, _) => Capabilities::none(),
            (false, Some(cluster)) => {
                Capabilities::kubernetes(Arc::new(ClusterBackend::new(cluster)), allowed)
            }
            (false, None) => {
                bail!("{id}: grants contextAwareResources, and $KUBECONFIG is not set")
            }
        };
        out.push(WebhookPolicy {
            id,
            policy: Arc::new(policy.with_capabilities(capabilities)),
            settings,
            mutating: entry["allowedToMutate"].as_bool().unwrap_or(false),
        });
    }
    Ok(out)
}

/// `GET /readiness`: 200 as soon as it serves.
fn serve_readiness(listener: TcpListener) {
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let body = "{\"ready\":true}";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
}

async fn run() -> Result<()> {
    let args = parse_args()?;
    let cluster = match std::env::var_os("KUBECONFIG") {
        Some(path) => Some(Cluster::connect(Path::new(&path)).await?),
        None => None,
    };
    let policies = load(&args.policies, cluster.as_ref())?;
    let server = WebhookServer::start(WebhookConfig {
        policies,
        addr: SocketAddr::new(args.addr, args.port),
        tls: args.tls.clone(),
        log: args.review_log.clone(),
        lifetime: args.lifetime,
    })?;
    let readiness = TcpListener::bind(SocketAddr::new(args.addr, args.readiness_port))
        .with_context(|| format!("cannot listen on port {}", args.readiness_port))?;
    serve_readiness(readiness);
    eprintln!(
        "policy-host: serving {} on {}",
        args.policies.display(),
        server.addr()
    );
    tokio::time::sleep(args.lifetime).await;
    drop(server);
    Ok(())
}

fn main() -> std::process::ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("policy-host: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
