//! Kueue on the control plane, set up as its release installs it but on loopback: its CRDs
//! (server-side applied, conversion webhooks by URL), its released configuration with
//! certificate management off, and its webhook configurations under their released names
//! (`kueue-…`), which sort after `clusterwide-…` and `jobset-…`, so the API server calls our
//! webhook, then JobSet's, then Kueue's.
use crate::controlplane::{args, crd_files, module_dir, ControlPlane};
use crate::fleet::TPU;
use crate::procs::{free_port, Process, Supervision};
use anyhow::{bail, Context, Result};
use multislice_host::fixtures::load_yaml;
use multislice_host::preview::yaml_documents;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const KUEUE_NAMESPACE: &str = "kueue-system";
pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
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
    // Its visibility API server would listen on every address; nothing here reads it.
    config["featureGates"] = json!({"VisibilityOnDemand": false});
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
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        doc["metadata"]["name"] = json!(format!("kueue-{name}"));
        for webhook in doc["webhooks"].as_array_mut().into_iter().flatten() {
            let path = webhook["clientConfig"]["service"]["path"]
                .as_str()
                .unwrap_or("/")
                .to_string();
            webhook["clientConfig"] =
                json!({"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": ca});
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

impl ControlPlane {
    /// Starts Kueue; JobSet's CRD exists by now, so its JobSet integration starts at once.
    pub(crate) async fn start_kueue(
        &mut self,
        binary: &Path,
        kubeconfig: &Path,
        logs: &Path,
    ) -> Result<()> {
        let module = module_dir("kueue", "sigs.k8s.io/kueue")?;
        let ca = self.pki.ca_bundle_base64()?;
        let port = free_port()?;
        self.cluster
            .apply(&json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": KUEUE_NAMESPACE}}))
            .await?;
        for crd in crds(&module, port, &ca)? {
            self.cluster.apply(&crd).await?;
            let name = crd["metadata"]["name"].as_str().unwrap_or_default();
            self.cluster.wait_crd_established(name).await?;
        }
        self.fixed_files = Some(metrics_certificate(
            &self.pki.serving_cert(),
            &self.pki.serving_key(),
        )?);
        let config_path = self.dir.join("kueue-config.yaml");
        let config = configuration(&module, port, free_port()?, &self.pki.cert_dir())?;
        std::fs::write(&config_path, serde_json::to_string(&config)?)?;
        let process = Process::spawn(
            "kueue",
            binary,
            &args(&[
                &format!("--config={}", config_path.display()),
                &format!("--kubeconfig={}", kubeconfig.display()),
                // The released manager's own flag.
                "--zap-log-level=2",
            ]),
            &[("KUBECONFIG", kubeconfig.display().to_string())],
            &Supervision {
                logs,
                lifetime: self.remaining(),
            },
        )?;
        self.adopt(process);
        for configuration in webhook_configurations(&module, port, &ca)? {
            self.cluster.apply(&configuration).await?;
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
        let deadline = Instant::now() + Duration::from_secs(120);
        for probe in &probes {
            loop {
                self.check_alive()?;
                match self.cluster.create(probe, true).await {
                    Ok(created) if created.status < 300 => break,
                    Ok(created) if Instant::now() > deadline => {
                        bail!("Kueue's webhooks not ready within 120 s: {}", created.body)
                    }
                    Err(e) if Instant::now() > deadline => return Err(e),
                    _ => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
        }
        Ok(())
    }
}

/// A ResourceFlavor that selects nodes with these labels (as xpk makes one per slice shape).
pub fn resource_flavor(name: &str, node_labels: &BTreeMap<String, String>) -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": node_labels},
    })
}

/// A Topology for Kueue's Topology Aware Scheduling: the node labels of its levels, outermost
/// first.
pub fn topology(name: &str, levels: &[&str]) -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": levels.iter().map(|l| json!({"nodeLabel": l})).collect::<Vec<_>>()},
    })
}

/// Whether a replicated job's pods ask for TPUs (a container's limit or request).
fn asks_for_tpu(rjob: &Value) -> bool {
    let pod = &rjob["template"]["spec"]["template"]["spec"];
    ["containers", "initContainers"].iter().any(|list| {
        pod[list].as_array().into_iter().flatten().any(|c| {
            !c["resources"]["limits"][TPU].is_null() || !c["resources"]["requests"][TPU].is_null()
        })
    })
}

/// The object as Kueue starts it in a flavour: each TPU replicated job's pods select the
/// flavour's node labels. Fleets are built from it, so the nodes are there when Kueue
/// unsuspends the JobSet.
pub fn as_started_in(object: &Value, node_labels: &BTreeMap<String, String>) -> Value {
    let mut object = object.clone();
    for rjob in object["spec"]["replicatedJobs"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        if !asks_for_tpu(rjob) {
            continue;
        }
        let selector = &mut rjob["template"]["spec"]["template"]["spec"]["nodeSelector"];
        if !selector.is_object() {
            *selector = json!({});
        }
        for (k, v) in node_labels {
            selector[k] = json!(v);
        }
    }
    object
}

/// A ClusterQueue over every namespace, as xpk sets one up: `chips` of `google.com/tpu` in one
/// TPU flavour, and CPU and memory in a flavour without node labels (drivers and other CPU
/// pods go to any node their taints allow, and TPU pods take no second set of labels).
pub fn tpu_cluster_queue(name: &str, tpu_flavour: &str, chips: u64, cpu_flavour: &str) -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {"coveredResources": [TPU],
                 "flavors": [{"name": tpu_flavour,
                              "resources": [{"name": TPU, "nominalQuota": chips.to_string()}]}]},
                {"coveredResources": ["cpu", "memory"],
                 "flavors": [{"name": cpu_flavour,
                              "resources": [{"name": "cpu", "nominalQuota": "1000"},
                                            {"name": "memory", "nominalQuota": "10Ti"}]}]},
            ],
        },
    })
}

pub fn local_queue(namespace: &str, name: &str, cluster_queue: &str) -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    })
}

/// The Workloads Kueue made for an object (by their owner reference).
pub async fn workloads_of(
    cluster: &crate::Cluster,
    namespace: &str,
    owner_uid: &str,
) -> Result<Vec<Value>> {
    let all = cluster
        .list("kueue.x-k8s.io/v1beta2", "Workload", Some(namespace), None)
        .await?;
    Ok(all
        .into_iter()
        .filter(|w| {
            w["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|o| o["uid"] == owner_uid)
        })
        .collect())
}

/// A condition of an object's status, by type.
pub fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind)
}

/// Whether the condition is there with status True.
pub fn is_true(object: &Value, kind: &str) -> bool {
    condition(object, kind).is_some_and(|c| c["status"] == "True")
}

/// The queue name an object carries, if any.
pub fn queue_name(object: &Value) -> Option<&str> {
    object["metadata"]["labels"][QUEUE_LABEL].as_str()
}

/// The (namespace, queue name) of every object with the queue label, for their LocalQueues.
pub fn queue_names(objects: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = objects
        .iter()
        .filter_map(|o| {
            Some((
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default")
                    .to_string(),
                queue_name(o)?.to_string(),
            ))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The flavour `make cluster-preview QUEUE_FLAVOR=accelerator:topology` queues into.
pub fn preview_flavour(spec: &str) -> Result<BTreeMap<String, String>> {
    let Some((accelerator, topology)) = spec.split_once(':') else {
        bail!("QUEUE_FLAVOR is ACCELERATOR:TOPOLOGY, such as tpu-v6e-slice:4x4, not {spec:?}");
    };
    if accelerator.is_empty() || topology.is_empty() {
        bail!("QUEUE_FLAVOR is ACCELERATOR:TOPOLOGY, such as tpu-v6e-slice:4x4, not {spec:?}");
    }
    Ok([
        ("cloud.google.com/gke-tpu-accelerator", accelerator),
        ("cloud.google.com/gke-tpu-topology", topology),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect())
}

/// One TPU flavour with these labels, a CPU flavour, a ClusterQueue with room for anything,
/// and a LocalQueue for every queue name the objects use, in their namespaces.
pub async fn queue_into(
    cluster: &crate::Cluster,
    objects: &[Value],
    node_labels: &BTreeMap<String, String>,
) -> Result<()> {
    cluster
        .apply(&resource_flavor("preview-tpu", node_labels))
        .await?;
    cluster
        .apply(&resource_flavor("preview-cpu", &BTreeMap::new()))
        .await?;
    cluster
        .apply(&tpu_cluster_queue(
            "preview",
            "preview-tpu",
            1 << 20,
            "preview-cpu",
        ))
        .await?;
    for (namespace, queue) in queue_names(objects) {
        cluster
            .apply(&json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": namespace}}))
            .await?;
        cluster
            .apply(&local_queue(&namespace, &queue, "preview"))
            .await?;
    }
    Ok(())
}

/// Our webhook's answers to the UPDATEs that would unsuspend a JobSet (old: suspended, new:
/// not), from the review log.
pub fn unsuspending_reviews<'a>(
    reviews: &'a [Value],
    namespace: &str,
    name: &str,
) -> Vec<&'a Value> {
    reviews
        .iter()
        .filter(|r| {
            r["kind"] == "JobSet"
                && r["operation"] == "UPDATE"
                && r["namespace"] == namespace
                && r["name"] == name
                && r["oldObject"]["spec"]["suspend"] == json!(true)
                && r["object"]["spec"]["suspend"] != json!(true)
        })
        .collect()
}

/// A Workload's conditions as `Type=Status (Reason): message` lines, for reports.
pub fn conditions_text(workload: &Value) -> Vec<String> {
    workload["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={} ({}): {}",
                c["type"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or_default(),
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            )
        })
        .collect()
}
