//! What Kueue works with, as objects and reads: flavours, queues and topologies as xpk sets
//! them up, a JobSet as Kueue starts it in a flavour, and the Workloads, conditions and our
//! verdicts that show what Kueue did with a queued JobSet.
use crate::fleet::TPU;
use crate::run::Submitted;
use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The label that puts a workload in a queue. Here, beside the queues, rather than in
/// kueue/mod.rs: install.rs reads it too, and neither child reaches back into the parent.
pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

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
    tpu_cluster_queue_of(name, &[(tpu_flavour, chips)], cpu_flavour)
}

/// A ClusterQueue as [`tpu_cluster_queue`], with several TPU flavours in one resource group, in
/// this order (Kueue tries them in it), each with its quota of chips.
pub fn tpu_cluster_queue_of(name: &str, tpu_flavours: &[(&str, u64)], cpu_flavour: &str) -> Value {
    let flavours: Vec<Value> = tpu_flavours
        .iter()
        .map(|(flavour, chips)| {
            json!({"name": flavour,
                   "resources": [{"name": TPU, "nominalQuota": chips.to_string()}]})
        })
        .collect();
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {"coveredResources": [TPU], "flavors": flavours},
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

/// The Workloads Kueue made for a submitted object (by their owner reference to its uid).
pub async fn workloads_of(cluster: &crate::Cluster, owner: &Submitted) -> Result<Vec<Value>> {
    let uid = &owner.created.body["metadata"]["uid"];
    let all = cluster
        .list(
            "kueue.x-k8s.io/v1beta2",
            "Workload",
            Some(&owner.namespace),
            None,
        )
        .await?;
    Ok(all
        .into_iter()
        .filter(|w| {
            w["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|o| uid.is_string() && &o["uid"] == uid)
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
        .filter_map(|o| Some((namespace_of(o), queue_name(o)?.to_string())))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// One TPU flavour of `make cluster-preview QUEUE_FLAVOR=…`: its name, and the node labels it
/// selects.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewFlavour {
    pub name: String,
    pub node_labels: BTreeMap<String, String>,
}

/// The flavours `make cluster-preview QUEUE_FLAVOR=accelerator:topology[,…]` queues into, in
/// the ClusterQueue's order. Each is named after its shape, such as `tpu-v6e-slice-4x4`.
pub fn preview_flavours(spec: &str) -> Result<Vec<PreviewFlavour>> {
    let usage = "QUEUE_FLAVOR is ACCELERATOR:TOPOLOGY[,ACCELERATOR:TOPOLOGY…], such as tpu-v6e-slice:4x4,tpu-v6e-slice:2x4";
    let mut out: Vec<PreviewFlavour> = Vec::new();
    for item in spec.split(',').map(str::trim) {
        let Some((accelerator, topology)) = item.split_once(':') else {
            bail!("{usage}, not {spec:?}");
        };
        if accelerator.is_empty() || topology.is_empty() {
            bail!("{usage}, not {spec:?}");
        }
        let name = format!("{accelerator}-{topology}").to_lowercase();
        if out.iter().any(|f| f.name == name) {
            bail!("QUEUE_FLAVOR names {accelerator}:{topology} twice");
        }
        out.push(PreviewFlavour {
            name,
            node_labels: tpu_node_labels(accelerator, topology),
        });
    }
    Ok(out)
}

/// The labels GKE puts on the nodes of a TPU node pool of this shape, which a flavour selects.
pub fn tpu_node_labels(accelerator: &str, topology: &str) -> BTreeMap<String, String> {
    [
        ("cloud.google.com/gke-tpu-accelerator", accelerator),
        ("cloud.google.com/gke-tpu-topology", topology),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The TPU flavours, a CPU flavour, a ClusterQueue with room for anything in each flavour, and
/// a LocalQueue for every queue name the objects use, in their namespaces; with
/// `default_queue`, a LocalQueue `default` in every namespace of the objects too (Kueue's
/// LocalQueueDefaulting then queues whatever carries no queue label there).
pub async fn queue_into(
    cluster: &crate::Cluster,
    objects: &[Value],
    flavours: &[PreviewFlavour],
    default_queue: bool,
) -> Result<()> {
    for flavour in flavours {
        cluster
            .apply(&resource_flavor(&flavour.name, &flavour.node_labels))
            .await?;
    }
    cluster
        .apply(&resource_flavor("preview-cpu", &BTreeMap::new()))
        .await?;
    let quotas: Vec<(&str, u64)> = flavours
        .iter()
        .map(|f| (f.name.as_str(), 1 << 20))
        .collect();
    cluster
        .apply(&tpu_cluster_queue_of("preview", &quotas, "preview-cpu"))
        .await?;
    let mut queues = queue_names(objects);
    if default_queue {
        queues.extend(
            objects
                .iter()
                .map(|o| (namespace_of(o), DEFAULT_QUEUE.to_string())),
        );
        queues.sort();
        queues.dedup();
    }
    for (namespace, queue) in &queues {
        cluster
            .apply(&json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": namespace}}))
            .await?;
        cluster
            .apply(&local_queue(namespace, queue, "preview"))
            .await?;
    }
    for (namespace, queue) in &queues {
        wait_local_queue_active(cluster, namespace, queue).await?;
    }
    Ok(())
}

/// Waits until Kueue has taken a LocalQueue in (condition `Active`): before that, its webhook
/// does not queue into it what comes without a queue label.
pub async fn wait_local_queue_active(
    cluster: &crate::Cluster,
    namespace: &str,
    name: &str,
) -> Result<()> {
    let object = local_queue(namespace, name, "");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let found = cluster.get(&object).await?.unwrap_or_default();
        if is_true(&found, "Active") {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            bail!(
                "LocalQueue {namespace}/{name} not Active within 60 s: {:?}",
                conditions_text(&found)
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}

/// The LocalQueue Kueue's LocalQueueDefaulting (always on since v0.17) puts an object without
/// a queue label into, in its namespace.
pub const DEFAULT_QUEUE: &str = "default";

fn namespace_of(object: &Value) -> String {
    object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string()
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
