//! MultiKueue between two control planes (issue 54): a manager whose Kueue dispatches queued
//! JobSets to a worker's. What the worker grants the manager (a client certificate of its own
//! CA for a user of its own, and the ClusterRole MultiKueue's remote client needs), and what
//! the manager is given (the kubeconfig Secret with everything embedded, the MultiKueueCluster,
//! MultiKueueConfig and AdmissionCheck, and a ClusterQueue of one bare flavour that runs
//! nothing itself), each waited on until Kueue reports it `Active`.
use super::install::KUEUE_NAMESPACE;
use super::queues::{conditions_text, is_true, resource_flavor};
use crate::fleet::TPU;
use crate::kube_api::Cluster;
use crate::plane::ControlPlane;
use anyhow::{bail, Result};
use base64::Engine as _;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The user the manager's Kueue is in the worker: the CN of its client certificate, in no
/// group (not `system:masters`), so that its requests are told apart from the worker's own
/// Kueue's (the worker's `admin`).
pub const MULTIKUEUE_USER: &str = "multikueue-manager";
/// Kueue's labels on the copy it creates in a worker, and the value it gives `spec.managedBy`
/// of a JobSet it dispatches.
pub const ORIGIN_LABEL: &str = "kueue.x-k8s.io/multikueue-origin";
pub const PREBUILT_LABEL: &str = "kueue.x-k8s.io/prebuilt-workload-name";
pub const MANAGED_BY: &str = "kueue.x-k8s.io/multikueue";
/// The `origin` of Kueue's configuration, its default (the copies' origin label value).
pub const ORIGIN: &str = "multikueue";

/// The names of the manager's objects.
pub const WORKER_CLUSTER: &str = "worker";
const SECRET: &str = "worker-kubeconfig";
const CONFIG: &str = "multikueue";
pub const ADMISSION_CHECK: &str = "multikueue";
/// The manager's one flavour: no node labels, no taints; it admits and places nothing.
pub const BARE_FLAVOUR: &str = "bare";

/// How long Kueue may take to connect and report its objects Active.
const ACTIVE_WITHIN: Duration = Duration::from_secs(120);

/// The worker's side: a client certificate for [`MULTIKUEUE_USER`] and the ClusterRole and
/// ClusterRoleBinding that give it what MultiKueue's remote client does in a worker (cluster-wide
/// watches of Workloads, JobSets and Jobs; create, update and delete of Workloads and JobSets;
/// the Workloads' status). Returns the kubeconfig to reach the worker as that user, every
/// credential embedded, and the path it is also written to (for the test's own client).
pub async fn grant_manager_access(worker: &ControlPlane) -> Result<(String, PathBuf)> {
    let (cert, key) = worker
        .pki
        .client(MULTIKUEUE_USER, &format!("/CN={MULTIKUEUE_USER}"))?;
    let all = [
        "create", "update", "patch", "delete", "get", "list", "watch",
    ];
    worker
        .cluster
        .apply(&json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": MULTIKUEUE_USER},
            "rules": [
                {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": all},
                {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"],
                 "verbs": ["get", "patch", "update"]},
                {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": all},
                {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"],
                 "verbs": ["get"]},
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": all},
                {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
            ],
        }))
        .await?;
    worker
        .cluster
        .apply(&json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": MULTIKUEUE_USER},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": MULTIKUEUE_USER},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": MULTIKUEUE_USER}],
        }))
        .await?;
    let text = worker.embedded_kubeconfig(MULTIKUEUE_USER, &cert, &key)?;
    let path = worker.dir.join("multikueue.kubeconfig");
    std::fs::write(&path, &text)?;
    Ok((text, path))
}

/// The manager's side: the kubeconfig Secret in Kueue's namespace, the MultiKueueCluster that
/// names it, a MultiKueueConfig of that one cluster and the AdmissionCheck that uses it; returns
/// once Kueue has connected to the worker (the MultiKueueCluster `Active`) and the
/// AdmissionCheck is `Active`.
pub async fn connect_to_worker(manager: &Cluster, kubeconfig: &str) -> Result<()> {
    let data = base64::engine::general_purpose::STANDARD.encode(kubeconfig);
    manager
        .apply(&json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": KUEUE_NAMESPACE},
            "data": {"kubeconfig": data},
        }))
        .await?;
    let cluster = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
        "metadata": {"name": WORKER_CLUSTER},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": SECRET}}},
    });
    manager.apply(&cluster).await?;
    manager
        .apply(&json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
            "metadata": {"name": CONFIG},
            "spec": {"clusters": [WORKER_CLUSTER]},
        }))
        .await?;
    let check = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": ADMISSION_CHECK},
        "spec": {"controllerName": MANAGED_BY,
                 "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                "name": CONFIG}},
    });
    manager.apply(&check).await?;
    wait_active(manager, &cluster).await?;
    wait_active(manager, &check).await
}

/// The manager's ClusterQueue: one bare flavour (no node labels: it steers nothing, and no
/// narrowing excludes it) with `chips` of TPU and room for CPU and memory, dispatched through
/// the MultiKueue AdmissionCheck. Applied with its flavour; returns once it is `Active`.
pub async fn dispatching_cluster_queue(manager: &Cluster, name: &str, chips: u64) -> Result<()> {
    manager
        .apply(&resource_flavor(BARE_FLAVOUR, &BTreeMap::new()))
        .await?;
    let queue = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{
                "coveredResources": [TPU, "cpu", "memory"],
                "flavors": [{"name": BARE_FLAVOUR, "resources": [
                    {"name": TPU, "nominalQuota": chips.to_string()},
                    {"name": "cpu", "nominalQuota": "1000"},
                    {"name": "memory", "nominalQuota": "10Ti"}]}],
            }],
            "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}]},
        },
    });
    manager.apply(&queue).await?;
    wait_active(manager, &queue).await
}

/// Waits until a Kueue object's condition `Active` is True; fails with its conditions.
pub async fn wait_active(cluster: &Cluster, object: &Value) -> Result<()> {
    let deadline = Instant::now() + ACTIVE_WITHIN;
    loop {
        let found = cluster.get(object).await?.unwrap_or_default();
        if is_true(&found, "Active") {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{} {} not Active within {ACTIVE_WITHIN:?}: {:?}",
                object["kind"].as_str().unwrap_or_default(),
                object["metadata"]["name"].as_str().unwrap_or_default(),
                conditions_text(&found)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
