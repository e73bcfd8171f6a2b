//! The JobSet controller as its release installs it, but on loopback: its CRDs, its manager
//! with certificate management off (our CA signs its serving certificate), and its webhook
//! configurations under their released names (`jobset-…`), by URL.
use crate::modules::{args, crd_files, module_dir, released_by_url, Binaries};
use crate::plane::ControlPlane;
use crate::procs::free_port;
use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};
use std::path::Path;

/// Its CRDs (established before the controllers start), its manager, and its webhooks, ready.
pub(crate) async fn start(plane: &mut ControlPlane, binaries: &Binaries) -> Result<()> {
    let module = module_dir("jobset", "sigs.k8s.io/jobset")?;
    for crd in crd_files(&module.join("config/components/crd/bases"))? {
        plane.cluster.apply_yaml_file(&crd).await?;
    }
    plane
        .cluster
        .wait_crd_established("jobsets.jobset.x-k8s.io")
        .await?;
    let port = free_port()?;
    let config = plane.dir.join("jobset-config.yaml");
    std::fs::write(
        &config,
        serde_json::to_string(&json!({
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": false},
            // Our CA signs its serving certificate; it must not rotate its own.
            "internalCertManagement": {"enable": false},
            "webhook": {"port": port, "host": "127.0.0.1",
                        "certDir": plane.pki.cert_dir().display().to_string()},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": format!("127.0.0.1:{}", free_port()?)},
        }))?,
    )?;
    let kubeconfig = plane.kubeconfig.display().to_string();
    plane.spawn(
        "jobset",
        binaries.get("jobset-manager")?,
        &args(&[
            &format!("--config={}", config.display()),
            &format!("--kubeconfig={kubeconfig}"),
            "--zap-log-level=info",
        ]),
        &[("KUBECONFIG", kubeconfig.clone())],
    )?;
    let ca = plane.pki.ca_bundle_base64()?;
    for configuration in webhook_configurations(&module, port, &ca)? {
        plane.cluster.apply(&configuration).await?;
    }
    // Its webhooks answer once its manager has started: a dry-run JobSet goes through them.
    let probe = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "webhook-probe", "namespace": "default"},
        "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}}}]},
    });
    plane.wait_for_webhooks("JobSet", &[probe]).await
}

/// JobSet's webhook configurations from its module (config/components/webhook, with its
/// patches), under their released names (kustomize's `jobset-` prefix), pointed at its
/// webhook server on loopback.
pub fn webhook_configurations(module: &Path, port: u16, ca: &str) -> Result<Vec<Value>> {
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
