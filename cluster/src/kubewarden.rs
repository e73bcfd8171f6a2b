//! Kubewarden itself, v1.31.0 from its Go module: its five CRDs, and its controller with its
//! own webhooks (the defaulter and the validator of policies and PolicyServers). The harness
//! does only what Kubewarden's Helm charts do before the controller takes over (kubewarden-crds,
//! kubewarden-controller, kubewarden-defaults): the `kubewarden-ca` Secret (an ECDSA CA, as the
//! chart's `genCAWithKey … (genPrivateKey "ecdsa")`), the controller's serving certificate, its
//! webhook Service and the chart's two webhook configurations (the module's
//! `config/webhook/manifests.yaml` under the chart's names), the `policy-server` ServiceAccount,
//! and PolicyServer `default`. The rest (policy-server's Deployment, Service, Secret and
//! ConfigMap, each policy's webhook configuration, the policies' status) is the controller's.
use crate::kube_proxy::Route;
use crate::modules::{args, crd_files, module_dir, Binaries};
use crate::pki::openssl;
use crate::plane::ControlPlane;
use crate::policy_server::{NAMESPACE, POLICY_SERVER};
use crate::procs::free_port;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// The taint of the one node policy-server's pods run on, so that no test's pod lands there;
/// PolicyServer `default` tolerates it and asks for the node's label.
const NODE: &str = "kubewarden-system";
const NODE_ROLE: &str = "multislice.test/kubewarden";

/// The chart's webhook Service of the controller (release `kubewarden-controller`).
const CONTROLLER_SERVICE: &str = "kubewarden-controller-webhook-service";
/// controller-runtime's webhook server: port 9443 on every interface, with no flag to move it
/// in v1.31. So only one control plane with Kubewarden can run on a machine at a time.
const WEBHOOK_PORT: u16 = 9443;
const GO_MODULE: &str = "github.com/kubewarden/kubewarden-controller";

/// Installs the CRDs, the Secrets, the controller and its webhooks, and PolicyServer
/// `default`; returns once the controller answers its webhooks.
pub(crate) async fn install(plane: &mut ControlPlane, binaries: &Binaries) -> Result<()> {
    if TcpStream::connect((Ipv4Addr::LOCALHOST, WEBHOOK_PORT)).is_ok() {
        bail!("port {WEBHOOK_PORT} is taken: Kubewarden's controller listens there (one control plane with Kubewarden per machine)");
    }
    let crds = module_dir("kubewarden", GO_MODULE)?.join("config/crd/bases");
    for file in crd_files(&crds)? {
        plane.cluster.apply_yaml_file(&file).await?;
    }
    for file in crd_files(&crds)? {
        let crd = multislice_host::fixtures::load_yaml(&file)?;
        if let Some(name) = crd["metadata"]["name"].as_str() {
            plane.cluster.wait_crd_established(name).await?;
        }
    }
    let dir = plane.dir.join("kubewarden");
    let certs = dir.join("tmp/k8s-webhook-server/serving-certs");
    std::fs::create_dir_all(&certs)?;
    let service_name = format!("{CONTROLLER_SERVICE}.{NAMESPACE}.svc");
    certificates(&dir, &service_name)?;
    std::fs::copy(dir.join("controller.crt"), certs.join("tls.crt"))?;
    std::fs::copy(dir.join("controller.key"), certs.join("tls.key"))?;
    let read = |name: &str| std::fs::read_to_string(dir.join(name));
    let secret = |name: &str, data: Value| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": name, "namespace": NAMESPACE}, "stringData": data})
    };
    plane
        .cluster
        .apply(&secret(
            "kubewarden-ca",
            json!({"ca.crt": read("ca.crt")?, "ca.key": read("ca.key")?}),
        ))
        .await?;
    plane
        .cluster
        .apply(&secret(
            "kubewarden-webhook-server-cert",
            json!({"tls.crt": read("controller.crt")?, "tls.key": read("controller.key")?}),
        ))
        .await?;
    let service = plane
        .cluster
        .apply(&json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": CONTROLLER_SERVICE, "namespace": NAMESPACE},
            "spec": {"ports": [{"port": 443, "targetPort": WEBHOOK_PORT, "protocol": "TCP"}],
                     "selector": {"app.kubernetes.io/name": "kubewarden-controller"}},
        }))
        .await?;
    let ip = service["spec"]["clusterIP"]
        .as_str()
        .context("the controller's Service has no ClusterIP")?;
    plane.proxy()?.route(
        ip,
        443,
        Route::Pass(SocketAddr::from((Ipv4Addr::LOCALHOST, WEBHOOK_PORT))),
    );
    start_controller(plane, binaries, &dir)?;
    wait_listening(plane).await?;
    let ca = plane.kubewarden_ca_bundle()?;
    let manifests = module_dir("kubewarden", GO_MODULE)?.join("config/webhook/manifests.yaml");
    let text = std::fs::read_to_string(&manifests)?;
    for mut configuration in multislice_host::preview::yaml_documents(&text)? {
        if !configuration.is_object() {
            continue;
        }
        as_the_chart_registers(&mut configuration, &ca);
        plane.cluster.apply(&configuration).await?;
    }
    policy_server_node(plane).await?;
    plane
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "policy-server", "namespace": NAMESPACE}}))
        .await?;
    // Through the controller's own webhooks, which may take a moment to answer.
    let policy_server = policy_server_default();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        plane.check_alive()?;
        match plane.cluster.apply(&policy_server).await {
            Ok(_) => break,
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    Ok(())
}

/// kubewarden-defaults' PolicyServer `default` (chart 3.9.0, appVersion v1.31.0), with a
/// toleration and an affinity for the node kept for it.
fn policy_server_default() -> Value {
    json!({
        "apiVersion": "policies.kubewarden.io/v1", "kind": "PolicyServer",
        "metadata": {"name": POLICY_SERVER, "finalizers": ["kubewarden.io/finalizer"]},
        "spec": {
            "image": "ghcr.io/kubewarden/policy-server:v1.31.0",
            "serviceAccountName": "policy-server",
            "replicas": 1,
            "env": [{"name": "KUBEWARDEN_LOG_LEVEL", "value": "info"}],
            "annotations": {},
            "tolerations": [{"key": NODE_ROLE, "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": NODE_ROLE, "operator": "Exists"}]}]}}},
        },
    })
}

/// The node policy-server's pods are scheduled to (the node agent plays its kubelet).
async fn policy_server_node(plane: &ControlPlane) -> Result<()> {
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "labels": {
            NODE_ROLE: "true", "kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux"}},
        "spec": {"taints": [{"key": NODE_ROLE, "value": "true", "effect": "NoSchedule"}]},
    });
    plane.cluster.apply(&node).await?;
    let resources = json!({"cpu": "8", "memory": "32Gi", "pods": "110"});
    plane
        .cluster
        .patch_status(
            &node,
            &json!({
                "capacity": resources, "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "the node of policy-server's pods (no kubelet)"}],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            }),
        )
        .await
}

/// The controller as the chart runs it (`--deployments-namespace`,
/// `--always-accept-admission-reviews-on-deployments-namespace`), with the admin kubeconfig in
/// place of its ServiceAccount, no leader election (which needs a pod's namespace), and its
/// probe and metrics ports off 8081 and 8088.
fn start_controller(plane: &mut ControlPlane, binaries: &Binaries, dir: &Path) -> Result<()> {
    let controller_args = args(&[
        &format!("--kubeconfig={}", plane.kubeconfig.display()),
        &format!("--deployments-namespace={NAMESPACE}"),
        &format!("--webhook-service-name={CONTROLLER_SERVICE}"),
        "--always-accept-admission-reviews-on-deployments-namespace",
        &format!("--health-probe-bind-address=127.0.0.1:{}", free_port()?),
        "--metrics-bind-address=0",
        "--zap-log-level=info",
    ]);
    let tmp = dir.join("tmp").display().to_string();
    plane.spawn(
        "kubewarden-controller",
        binaries.get("kubewarden-controller")?,
        &controller_args,
        &[("TMPDIR", tmp)],
    )
}

async fn wait_listening(plane: &mut ControlPlane) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while TcpStream::connect((Ipv4Addr::LOCALHOST, WEBHOOK_PORT)).is_err() {
        plane.check_alive()?;
        if Instant::now() > deadline {
            bail!("Kubewarden's controller did not listen on {WEBHOOK_PORT} within 120 s");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(())
}

/// A webhook configuration of the module's `config/webhook` under the chart's name, Service and
/// labels, with the CA bundle of `kubewarden-ca`.
fn as_the_chart_registers(configuration: &mut Value, ca: &str) {
    let name = configuration["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    configuration["metadata"]["name"] = json!(format!("kubewarden-controller-{name}"));
    configuration["metadata"]["labels"] = json!({"app.kubernetes.io/part-of": "kubewarden"});
    for webhook in configuration["webhooks"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        webhook["clientConfig"]["service"]["name"] = json!(CONTROLLER_SERVICE);
        webhook["clientConfig"]["service"]["namespace"] = json!(NAMESPACE);
        webhook["clientConfig"]["caBundle"] = json!(ca);
    }
}

/// `ca.key`/`ca.crt`: an ECDSA P-256 CA with its key in SEC1 (`EC PRIVATE KEY`), the only kind
/// the controller reads (`x509.ParseECPrivateKey`); `controller.{key,crt}`: the controller's
/// serving pair for its Service's name, signed by it.
fn certificates(dir: &Path, service_name: &str) -> Result<()> {
    // Every argument is one word (a DNS name has no space), so each command is one line.
    let run = |command: &str| openssl(dir, &command.split_whitespace().collect::<Vec<_>>());
    for key in ["ca.key", "controller.key"] {
        run(&format!(
            "ecparam -name prime256v1 -genkey -noout -out {key}"
        ))?;
    }
    run("req -x509 -new -key ca.key -out ca.crt -days 2 -subj /CN=kubewarden-controller-ca")?;
    run(&format!(
        "req -new -key controller.key -out controller.csr -subj /CN={service_name}"
    ))?;
    std::fs::write(
        dir.join("controller.ext"),
        format!("subjectAltName=DNS:{service_name}\nextendedKeyUsage=serverAuth\n"),
    )?;
    run(
        "x509 -req -in controller.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
         -out controller.crt -days 2 -extfile controller.ext",
    )
}

impl ControlPlane {
    /// Stops Kubewarden's controller once its work here is done (every policy served), and
    /// returns once its port is free: a second control plane's controller needs the port (the
    /// MultiKueue cases run two). What it made stays and works: the policies' webhook
    /// configurations, policy-server's Deployment and the host serving it. Only a change to a
    /// policy would now go unanswered (its own webhooks fail closed).
    pub async fn stop_kubewarden_controller(&mut self) -> Result<()> {
        self.stop("kubewarden-controller")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, WEBHOOK_PORT)).is_ok() {
            if Instant::now() > deadline {
                bail!(
                    "port {WEBHOOK_PORT} still answers 30 s after Kubewarden's controller stopped"
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(())
    }

    /// `kubewarden-ca`'s certificate, base64, as the chart puts it in a `caBundle`.
    pub(crate) fn kubewarden_ca_bundle(&self) -> Result<String> {
        use base64::Engine as _;
        Ok(base64::engine::general_purpose::STANDARD.encode(std::fs::read(self.kubewarden_ca())?))
    }

    pub(crate) fn kubewarden_ca(&self) -> std::path::PathBuf {
        self.dir.join("kubewarden/ca.crt")
    }
}
