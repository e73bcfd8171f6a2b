//! Kubernetes itself: etcd (its own, or another control plane's under a prefix of its own) and
//! kube-apiserver (dialling Services through the kube-proxy shim),
//! with what the fixtures name (PriorityClasses) and Kubewarden's namespace; then kube-controller-manager (the Job, Deployment and ReplicaSet
//! controllers, the garbage collector) and kube-scheduler.
use crate::kube_proxy::KubeProxy;
use crate::modules::{args, Binaries};
use crate::pki::Pki;
use crate::plane::ControlPlane;
use crate::policies::KUBEWARDEN_NAMESPACE;
use crate::procs::free_port;
use anyhow::{bail, Result};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Where an API server keeps its objects: an etcd of its own when `etcd` is `None`, else the
/// etcd at that client URL; under `prefix` (`/registry` when `None`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Storage<'a> {
    pub(crate) etcd: Option<&'a str>,
    pub(crate) prefix: Option<&'a str>,
}

/// etcd (unless shared) and the API server, ready, with the objects everything else expects.
pub(crate) async fn start_api_server(
    plane: &mut ControlPlane,
    binaries: &Binaries,
    storage: Storage<'_>,
) -> Result<()> {
    plane.etcd_url = match storage.etcd {
        Some(url) => url.to_string(),
        None => start_etcd(plane, binaries)?,
    };
    let proxy = KubeProxy::start(
        &plane.dir.join("kube-proxy.sock"),
        &plane.reviews,
        &plane.logs().join("kube-proxy.log"),
        plane.remaining(),
    )?;
    let egress = plane.dir.join("egress-selector.yaml");
    std::fs::write(&egress, proxy.egress_selector_configuration())?;
    plane.proxy = Some(proxy);
    let mut apiserver_args = apiserver_args(&plane.pki, &plane.etcd_url, plane.api_port);
    if let Some(prefix) = storage.prefix {
        apiserver_args.push(format!("--etcd-prefix={prefix}"));
    }
    // Webhooks that name a Service (Kubewarden's) are dialled through the kube-proxy shim.
    apiserver_args.push(format!(
        "--egress-selector-config-file={}",
        egress.display()
    ));
    plane.spawn(
        "kube-apiserver",
        binaries.get("kube-apiserver")?,
        &apiserver_args,
        &[],
    )?;
    wait_ready(plane).await?;
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
    Ok(())
}

/// One etcd member on free ports; returns its client URL.
fn start_etcd(plane: &mut ControlPlane, binaries: &Binaries) -> Result<String> {
    let (etcd_port, peer_port) = (free_port()?, free_port()?);
    plane.spawn(
        "etcd",
        binaries.get("etcd")?,
        &args(&[
            "--name=default",
            &format!("--data-dir={}", plane.dir.join("etcd").display()),
            &format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
            &format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
            &format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            &format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            &format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]),
        &[],
    )?;
    Ok(format!("http://127.0.0.1:{etcd_port}"))
}

/// kube-controller-manager with the controllers the tests need, and kube-scheduler.
pub(crate) fn start_controllers(
    plane: &mut ControlPlane,
    binaries: &Binaries,
    qps: Option<u32>,
    role_aggregation: bool,
) -> Result<()> {
    let kubeconfig_arg = format!("--kubeconfig={}", plane.kubeconfig.display());
    let ca = plane.pki.ca_cert();
    // No node-lifecycle controller: the fake nodes have no kubelet to heartbeat. The
    // Deployment and ReplicaSet controllers run policy-server's Deployment; the ClusterRole
    // aggregation one, where asked, fills `view` (the audit scanner's).
    let mut controllers = "--controllers=job-controller,garbage-collector-controller,namespace-controller,ttl-after-finished-controller,deployment-controller,replicaset-controller".to_string();
    if role_aggregation {
        controllers.push_str(",clusterrole-aggregation-controller");
    }
    let mut controller_args = args(&[
        &kubeconfig_arg,
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        &format!("--secure-port={}", free_port()?),
        &controllers,
        &format!("--root-ca-file={}", ca.display()),
    ]);
    if let Some(qps) = qps {
        controller_args.push(format!("--kube-api-qps={qps}"));
        controller_args.push(format!("--kube-api-burst={}", qps.saturating_mul(2)));
    }
    plane.spawn(
        "kube-controller-manager",
        binaries.get("kube-controller-manager")?,
        &controller_args,
        &[],
    )?;
    plane.spawn(
        "kube-scheduler",
        binaries.get("kube-scheduler")?,
        &args(&[
            &kubeconfig_arg,
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={}", free_port()?),
        ]),
        &[],
    )
}

async fn wait_ready(plane: &mut ControlPlane) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        plane.check_alive()?;
        if plane.cluster.get_raw("/readyz").await.is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("kube-apiserver not ready within 120 s");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn apiserver_args(pki: &Pki, etcd: &str, port: u16) -> Vec<String> {
    let p = |path: PathBuf| path.display().to_string();
    args(&[
        &format!("--etcd-servers={etcd}"),
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
