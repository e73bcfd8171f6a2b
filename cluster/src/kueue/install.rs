//! Kueue started on the control plane as its release installs it, but on loopback: its CRDs
//! (server-side applied, conversion webhooks by URL), its released configuration with
//! certificate management off, and its webhook configurations under their released names
//! (`kueue-…`), which sort after `clusterwide-…` and `jobset-…` and before a namespaced
//! policy's `namespaced-…`: the API server calls the mutating webhooks in that order (a
//! cluster-wide mutating policy, JobSet's, Kueue's, a namespaced policy), then every validating
//! webhook, on the object as it will be stored.
use super::queues::QUEUE_LABEL;
use crate::modules::{args, crd_files, module_dir, released_by_url, Binaries};
use crate::plane::ControlPlane;
use crate::procs::free_port;
use anyhow::{bail, Context, Result};
use multislice_host::fixtures::load_yaml;
use multislice_host::preview::yaml_documents;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const KUEUE_NAMESPACE: &str = "kueue-system";
/// With its certificate management off, this Kueue release reads a metrics certificate from
/// this fixed path and exits when there is none (cmd/kueue/main.go), even with metrics off.
pub const METRICS_CERTS: &str = "/etc/kueue/metrics/certs";
/// The integrations this control plane runs: the JobSets, and plain Jobs.
const FRAMEWORKS: [&str; 2] = ["batch/job", "jobset.x-k8s.io/jobset"];

/// Files this run wrote outside the project, removed when the control plane stops.
#[derive(Debug, Default)]
pub struct FixedFiles {
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

impl Drop for FixedFiles {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        // Innermost first; a directory something else has filled stays.
        for d in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Puts a certificate where Kueue looks for one, unless one is there already (another run's,
/// or an installation's): that one is left alone, and only what this run created is removed.
fn metrics_certificate(cert: &Path, key: &Path) -> Result<FixedFiles> {
    let dir = Path::new(METRICS_CERTS);
    let mut fixed = FixedFiles::default();
    if dir.join("tls.crt").is_file() && dir.join("tls.key").is_file() {
        return Ok(fixed);
    }
    let mut missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.exists()).collect();
    missing.reverse();
    std::fs::create_dir_all(dir).with_context(|| {
        format!("Kueue needs a metrics certificate in {METRICS_CERTS}, and it cannot be written")
    })?;
    fixed.dirs = missing.into_iter().map(Path::to_path_buf).collect();
    for (from, name) in [(cert, "tls.crt"), (key, "tls.key")] {
        let to = dir.join(name);
        std::fs::copy(from, &to)?;
        fixed.files.push(to);
    }
    Ok(fixed)
}

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
    // Our CA signs its serving certificate; it must not make and inject its own.
    config["internalCertManagement"] = json!({"enable": false});
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

/// Kueue's CRDs, with the conversion webhooks its kustomization enables pointed at its
/// webhook server on loopback.
pub fn crds(module: &Path, webhook_port: u16, ca: &str) -> Result<Vec<Value>> {
    let dir = module.join("config/components/crd");
    let kustomization = load_yaml(&dir.join("kustomization.yaml"))?;
    let mut converted = Vec::new();
    for patch in kustomization["patches"].as_array().into_iter().flatten() {
        let Some(path) = patch["path"].as_str() else {
            continue;
        };
        let doc = load_yaml(&dir.join(path))?;
        if doc["spec"]["conversion"]["strategy"] == "Webhook" {
            converted.push(
                doc["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    let mut out = Vec::new();
    for file in crd_files(&dir.join("bases"))? {
        let mut crd = load_yaml(&file)?;
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if converted.contains(&name) {
            crd["spec"]["conversion"] = json!({
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": format!("https://127.0.0.1:{webhook_port}/convert"),
                                     "caBundle": ca},
                    "conversionReviewVersions": ["v1"],
                },
            });
        }
        out.push(crd);
    }
    if out.is_empty() {
        bail!("no CRDs in {}", dir.display());
    }
    Ok(out)
}

/// Kueue's webhook configurations from its module (config/components/webhook, with the
/// namespace selectors its kustomization patches in), named as released, by URL.
pub fn webhook_configurations(module: &Path, port: u16, ca: &str) -> Result<Vec<Value>> {
    let dir = module.join("config/components/webhook");
    let selectors = namespace_selectors(&load_yaml(&dir.join("kustomization.yaml"))?)?;
    let text = std::fs::read_to_string(dir.join("manifests.yaml"))?;
    let mut out = Vec::new();
    for mut doc in yaml_documents(&text)? {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        if !kind.ends_with("WebhookConfiguration") {
            continue;
        }
        released_by_url(&mut doc, "kueue-", port, ca);
        for webhook in doc["webhooks"].as_array_mut().into_iter().flatten() {
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
    let ca = plane.pki.ca_bundle_base64()?;
    let port = free_port()?;
    plane
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": KUEUE_NAMESPACE}}))
        .await?;
    for crd in crds(&module, port, &ca)? {
        plane.cluster.apply(&crd).await?;
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        plane.cluster.wait_crd_established(name).await?;
    }
    let fixed = metrics_certificate(&plane.pki.serving_cert(), &plane.pki.serving_key())?;
    plane.hold(Box::new(fixed));
    let config_path = plane.dir.join("kueue-config.yaml");
    let config = configuration(&module, port, free_port()?, &plane.pki.cert_dir())?;
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
    for configuration in webhook_configurations(&module, port, &ca)? {
        plane.cluster.apply(&configuration).await?;
    }
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
