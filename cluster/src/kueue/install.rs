//! Kueue started on the control plane as its release installs it, but on loopback: its CRDs
//! (server-side applied, conversion webhooks by Service reference), its released configuration
//! with its own certificate management, and its webhook configurations under their released
//! names (`kueue-…`), which sort after `clusterwide-…` and `jobset-…` and before a namespaced
//! policy's `namespaced-…`: the API server calls the mutating webhooks in that order (a
//! cluster-wide mutating policy, JobSet's, Kueue's, a namespaced policy), then every validating
//! webhook, on the object as it will be stored.
//!
//! Its webhooks and conversions are reached as on a cluster, through its webhook Service, which
//! the kube-proxy shim maps to its webhook server on loopback. Its certificate rotator
//! (cert-controller) makes a CA and a serving certificate for the Service's name, stores them in
//! the release's Secret and injects the CA into the five CRDs and two webhook configurations; the
//! harness plays the kubelet that mounts the Secret at the server's `certDir`. With its
//! certificate management off, this release would instead read a metrics certificate from a
//! fixed path under /etc (cmd/kueue/main.go), which a user who is not root cannot write.
use super::queues::QUEUE_LABEL;
use crate::kube_proxy::Route;
use crate::modules::{args, crd_files, module_dir, Binaries};
use crate::plane::ControlPlane;
use crate::procs::free_port;
use anyhow::{bail, Context, Result};
use base64::Engine as _;
use multislice_host::fixtures::load_yaml;
use multislice_host::preview::yaml_documents;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

pub const KUEUE_NAMESPACE: &str = "kueue-system";
/// kustomize's `namePrefix` of the release (config/default).
const PREFIX: &str = "kueue-";
/// The integrations this control plane runs: the JobSets, and plain Jobs.
const FRAMEWORKS: [&str; 2] = ["batch/job", "jobset.x-k8s.io/jobset"];

/// Kueue's released configuration (config/components/manager), changed only where a
/// loopback control plane needs it.
pub fn configuration(
    module: &Path,
    webhook_port: u16,
    health_port: u16,
    cert_dir: &Path,
) -> Result<Value> {
    let mut config =
        load_yaml(&module.join("config/components/manager/controller_manager_config.yaml"))?;
    config["health"]["healthProbeBindAddress"] = json!(format!("127.0.0.1:{health_port}"));
    config["metrics"] = json!({"bindAddress": "0"});
    config["webhook"] = json!({
        "port": webhook_port, "host": "127.0.0.1", "certDir": cert_dir.display().to_string(),
    });
    config["leaderElection"] = json!({"leaderElect": false});
    config["integrations"]["frameworks"] = json!(FRAMEWORKS);
    // Said, not left to the default: Kueue defaults it from a pod's service-account namespace
    // file where there is one (CI may run in a pod), and MultiKueue reads its kubeconfig
    // Secrets from this namespace.
    config["namespace"] = json!(KUEUE_NAMESPACE);
    // Its visibility API server would listen on every address; nothing here reads it.
    // TASMultiLayerTopology (alpha in v0.17) lets the TAS record (issue 60) place a JobSet by
    // `podset-slice-required-topology-constraints`, which Kueue's webhook refuses without it.
    config["featureGates"] = json!({"VisibilityOnDemand": false, "TASMultiLayerTopology": true});
    Ok(config)
}

/// A `name` and `namespace` of the module's `config/` (an object's metadata, a Service
/// reference) as kustomize releases them: the name prefixed, in Kueue's namespace.
fn as_released(named: &mut Value) {
    let name = named["name"].as_str().unwrap_or_default();
    named["name"] = json!(format!("{PREFIX}{name}"));
    named["namespace"] = json!(KUEUE_NAMESPACE);
}

/// An object of the module's `config/components` (a Service, a Secret), as released.
fn released_object(module: &Path, file: &str) -> Result<Value> {
    let mut object = load_yaml(&module.join("config/components").join(file))?;
    as_released(&mut object["metadata"]);
    Ok(object)
}

/// Kueue's CRDs, with the conversion webhooks its kustomization enables, by Service reference
/// and without a CA bundle, which its certificate rotator injects.
pub fn crds(module: &Path) -> Result<Vec<Value>> {
    let dir = module.join("config/components/crd");
    let kustomization = load_yaml(&dir.join("kustomization.yaml"))?;
    let mut conversions = BTreeMap::new();
    for patch in kustomization["patches"].as_array().into_iter().flatten() {
        let Some(path) = patch["path"].as_str() else {
            continue;
        };
        let mut doc = load_yaml(&dir.join(path))?;
        if doc["spec"]["conversion"]["strategy"] == "Webhook" {
            as_released(&mut doc["spec"]["conversion"]["webhook"]["clientConfig"]["service"]);
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            conversions.insert(name.to_string(), doc["spec"]["conversion"].clone());
        }
    }
    let mut out = Vec::new();
    for file in crd_files(&dir.join("bases"))? {
        let mut crd = load_yaml(&file)?;
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(conversion) = conversions.get(name) {
            crd["spec"]["conversion"] = conversion.clone();
        }
        out.push(crd);
    }
    if out.is_empty() {
        bail!("no CRDs in {}", dir.display());
    }
    Ok(out)
}

/// Kueue's webhook configurations from its module (config/components/webhook, with the
/// namespace selectors its kustomization patches in), as released: their names prefixed, each
/// webhook calling the webhook Service, with no CA bundle until the rotator injects one.
pub fn webhook_configurations(module: &Path) -> Result<Vec<Value>> {
    let dir = module.join("config/components/webhook");
    let selectors = namespace_selectors(&load_yaml(&dir.join("kustomization.yaml"))?)?;
    let text = std::fs::read_to_string(dir.join("manifests.yaml"))?;
    let mut out = Vec::new();
    for mut doc in yaml_documents(&text)? {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        if !kind.ends_with("WebhookConfiguration") {
            continue;
        }
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        doc["metadata"]["name"] = json!(format!("{PREFIX}{name}"));
        for webhook in doc["webhooks"].as_array_mut().into_iter().flatten() {
            as_released(&mut webhook["clientConfig"]["service"]);
            let key = (
                kind.clone(),
                webhook["name"].as_str().unwrap_or_default().to_string(),
            );
            if let Some(selector) = selectors.get(&key) {
                webhook["namespaceSelector"] = selector.clone();
            }
        }
        out.push(doc);
    }
    if out.len() != 2 {
        bail!(
            "Kueue's module has {} webhook configurations, not 2",
            out.len()
        );
    }
    Ok(out)
}

/// (configuration kind, webhook name) → namespaceSelector, from the strategic-merge patches of
/// config/components/webhook/kustomization.yaml.
fn namespace_selectors(kustomization: &Value) -> Result<BTreeMap<(String, String), Value>> {
    let mut out = BTreeMap::new();
    for patch in kustomization["patches"].as_array().into_iter().flatten() {
        let Some(text) = patch["patch"].as_str() else {
            continue;
        };
        for doc in yaml_documents(text)? {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            for webhook in doc["webhooks"].as_array().into_iter().flatten() {
                if let (Some(name), Some(selector)) =
                    (webhook["name"].as_str(), webhook.get("namespaceSelector"))
                {
                    out.insert((kind.clone(), name.to_string()), selector.clone());
                }
            }
        }
    }
    Ok(out)
}

/// Starts Kueue; JobSet's CRD exists by now, so its JobSet integration starts at once.
pub(crate) async fn start(plane: &mut ControlPlane, binaries: &Binaries) -> Result<()> {
    let module = module_dir("kueue", "sigs.k8s.io/kueue")?;
    let port = free_port()?;
    plane
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": KUEUE_NAMESPACE}}))
        .await?;
    for crd in crds(&module)? {
        plane.cluster.apply(&crd).await?;
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        plane.cluster.wait_crd_established(name).await?;
    }
    // The Secret the rotator fills, and the Service by which the API server reaches the
    // webhook server: its ClusterIP's port leads to the server on loopback.
    let secret = released_object(&module, "internalcert/secret.yaml")?;
    plane.cluster.apply(&secret).await?;
    let service = plane
        .cluster
        .apply(&released_object(&module, "webhook/service.yaml")?)
        .await?;
    let ip = service["spec"]["clusterIP"]
        .as_str()
        .context("Kueue's webhook Service has no ClusterIP")?;
    for p in service["spec"]["ports"].as_array().into_iter().flatten() {
        let service_port = p["port"].as_u64().and_then(|n| u16::try_from(n).ok());
        let service_port = service_port.context("Kueue's webhook Service names no port")?;
        plane.proxy()?.route(
            ip,
            service_port,
            Route::Pass(SocketAddr::from((Ipv4Addr::LOCALHOST, port))),
        );
    }
    // Before Kueue starts: its rotator injects the CA into the configurations it finds.
    for configuration in webhook_configurations(&module)? {
        plane.cluster.apply(&configuration).await?;
    }
    let cert_dir = plane.dir.join("kueue/serving-certs");
    let config_path = plane.dir.join("kueue-config.yaml");
    let config = configuration(&module, port, free_port()?, &cert_dir)?;
    std::fs::write(&config_path, serde_json::to_string(&config)?)?;
    let kubeconfig = plane.kubeconfig.display().to_string();
    plane.spawn(
        "kueue",
        binaries.get("kueue-manager")?,
        &args(&[
            &format!("--config={}", config_path.display()),
            &format!("--kubeconfig={kubeconfig}"),
            // The released manager's own flag.
            "--zap-log-level=2",
        ]),
        &[("KUBECONFIG", kubeconfig.clone())],
    )?;
    mount_secret(plane, &secret, &cert_dir).await?;
    // Its webhooks answer once its manager has started: a dry-run ResourceFlavor goes
    // through them, then a dry-run queued JobSet through its JobSet webhook.
    let probes = [
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
               "metadata": {"name": "webhook-probe"}}),
        json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "kueue-probe", "namespace": "default",
                         "labels": {QUEUE_LABEL: "probe"}},
            "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}}}]},
        }),
    ];
    plane.wait_for_webhooks("Kueue", &probes).await
}

/// The kubelet's part for the release's volume of `secret` at the webhook server's `certDir`
/// (config/default/manager_webhook_patch.yaml): once the rotator has stored the serving pair,
/// its files, the key first (the rotator waits for `tls.crt`, then the server reads both).
/// Kueue starts its webhook server only after that, and the pair lasts beyond any run.
async fn mount_secret(plane: &mut ControlPlane, secret: &Value, dir: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        plane.check_alive()?;
        let data = plane.cluster.get(secret).await?.map(|s| s["data"].clone());
        if let Some(data) = data.filter(|d| d["tls.crt"].is_string() && d["tls.key"].is_string()) {
            std::fs::create_dir_all(dir)?;
            for file in ["tls.key", "tls.crt"] {
                let pem = base64::engine::general_purpose::STANDARD
                    .decode(data[file].as_str().unwrap_or_default())?;
                std::fs::write(dir.join(file), pem)?;
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("Kueue's certificate rotator did not fill its Secret within 120 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
