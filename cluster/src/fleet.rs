//! Fake nodes for the objects a test applies: Node objects with no kubelet, marked Ready, that
//! carry the labels GKE puts on its node pools and the resources the pods ask for. Each Job
//! (one slice of a JobSet's replicated job) gets a node pool of its own with one node per pod,
//! so the real scheduler binds every pod and JobSet's exclusive placement runs for real.
//!
//! A JobSet that takes JobSet's node-selector strategy of exclusive placement gets what its
//! docs ask of the user (JobSet's hack/label_nodes): each Job's pool labelled
//! `alpha.jobset.sigs.k8s.io/namespaced-job: <namespace>_<job>` and tainted
//! `alpha.jobset.sigs.k8s.io/no-schedule`, which the controller's nodeSelector and toleration
//! on the Job's pods match.
//!
//! As on GKE, TPU and GPU nodes are tainted for their resource and the API server's
//! ExtendedResourceToleration plugin gives the pods that request it the toleration, so a CPU
//! pod never takes a TPU host.
use crate::kube_api::Cluster;
use anyhow::Result;
use jobset_multislice_policy::quantity::parse_whole;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub const TPU: &str = "google.com/tpu";
pub const GPU: &str = "nvidia.com/gpu";
pub const NODEPOOL: &str = "cloud.google.com/gke-nodepool";
const EXCLUSIVE: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
/// JobSet's node-selector strategy of exclusive placement: the flag, the node label that
/// names a pool's Job (`<namespace>_<job>`), and the taint its pods tolerate.
pub const NODE_SELECTOR_STRATEGY: &str = "alpha.jobset.sigs.k8s.io/node-selector";
pub const NAMESPACED_JOB: &str = "alpha.jobset.sigs.k8s.io/namespaced-job";
pub const NO_SCHEDULE: &str = "alpha.jobset.sigs.k8s.io/no-schedule";

/// A node pool: `nodes` nodes with these labels and this much of each resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub name: String,
    pub nodes: usize,
    pub labels: BTreeMap<String, String>,
    pub tpu: u64,
    pub gpu: u64,
    pub cordoned: bool,
    /// `<namespace>_<job>` of the one Job whose pods may run here, by JobSet's node-selector
    /// strategy: the pool's label and taint.
    pub namespaced_job: Option<String>,
}

/// The pools that fit the JobSets and Jobs among `objects` (others are ignored). `prefix`
/// keeps the pool names of two calls apart.
pub fn pools_for(objects: &[Value], prefix: &str) -> Vec<Pool> {
    let mut pools = Vec::new();
    for object in objects {
        match object["kind"].as_str() {
            Some("JobSet") => {
                let jobset = object["metadata"]["name"].as_str().unwrap_or("jobset");
                let namespace = object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default");
                let annotations = &object["metadata"]["annotations"];
                let exclusive_all = annotations[EXCLUSIVE].as_str();
                for rjob in object["spec"]["replicatedJobs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    let replicas = rjob["replicas"].as_u64().unwrap_or(1);
                    let job = &rjob["template"];
                    let own = &job["metadata"]["annotations"];
                    let exclusive = own[EXCLUSIVE].as_str().or(exclusive_all);
                    let rjob_name = rjob["name"].as_str().unwrap_or("rjob");
                    for r in 0..replicas {
                        let job_name = format!("{jobset}-{rjob_name}-{r}");
                        let mut pool =
                            pool_for_job(&format!("{prefix}{job_name}"), &job["spec"], exclusive);
                        if takes_node_selector_strategy(annotations, own) {
                            pool.namespaced_job = Some(format!("{namespace}_{job_name}"));
                        }
                        pools.push(pool);
                    }
                }
            }
            Some("Job") => {
                let name = format!(
                    "{prefix}{}",
                    object["metadata"]["name"]
                        .as_str()
                        .or(object["metadata"]["generateName"].as_str())
                        .unwrap_or("job")
                        .trim_end_matches('-')
                );
                pools.push(pool_for_job(&name, &object["spec"], None));
            }
            _ => {}
        }
    }
    pools
}

/// Whether a replicated job's Jobs take the node-selector strategy, as the JobSet controller
/// decides it: a Job carries its template's annotations, then the JobSet's exclusive key with
/// the JobSet's flag, then the template's own key; the strategy needs a key and the flag.
fn takes_node_selector_strategy(jobset: &Value, template: &Value) -> bool {
    let jobset_key = !jobset[EXCLUSIVE].is_null();
    let key = jobset_key || !template[EXCLUSIVE].is_null();
    let flag = !template[NODE_SELECTOR_STRATEGY].is_null()
        || (jobset_key && !jobset[NODE_SELECTOR_STRATEGY].is_null());
    key && flag
}

/// A pool name that fits a label value (63 characters), still apart from every other.
fn label_safe(name: &str) -> String {
    if name.len() <= 63 {
        return name.to_string();
    }
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let cut: String = name.chars().take(46).collect();
    format!("{}-{:016x}", cut.trim_end_matches('-'), hash)
}

fn pool_for_job(name: &str, job_spec: &Value, exclusive_key: Option<&str>) -> Pool {
    let name = &label_safe(name);
    let pods = crate::run::pods_at_once(job_spec).max(1);
    let pod = &job_spec["template"]["spec"];
    let mut labels: BTreeMap<String, String> = pod["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    for term in pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"]
        .as_array()
        .into_iter()
        .flatten()
        .take(1)
    {
        for expression in term["matchExpressions"].as_array().into_iter().flatten() {
            let key = expression["key"].as_str().unwrap_or_default().to_string();
            let value = match expression["operator"].as_str() {
                Some("In") => expression["values"][0].as_str().unwrap_or("true"),
                Some("Exists") => "true",
                _ => continue,
            };
            labels.entry(key).or_insert_with(|| value.to_string());
        }
    }
    for key in [Some(NODEPOOL), exclusive_key].into_iter().flatten() {
        if key != "kubernetes.io/hostname" {
            labels
                .entry(key.to_string())
                .or_insert_with(|| name.to_string());
        }
    }
    let (mut tpu, mut gpu) = (0, 0);
    for c in pod["containers"].as_array().into_iter().flatten() {
        tpu += count(c, TPU);
        gpu += count(c, GPU);
    }
    for c in pod["initContainers"].as_array().into_iter().flatten() {
        tpu = tpu.max(count(c, TPU));
        gpu = gpu.max(count(c, GPU));
    }
    Pool {
        name: name.to_string(),
        nodes: pods as usize,
        labels,
        tpu,
        gpu,
        cordoned: false,
        namespaced_job: None,
    }
}

/// A container's count of an extended resource (TPU chips, GPUs): its request, else its
/// limit, a whole number read by the policy's own quantity parser (src/quantity.rs); 0 where it
/// does not parse, which the policy refuses anyway.
fn count(container: &Value, name: &str) -> u64 {
    let r = &container["resources"];
    let value = match &r["requests"][name] {
        Value::Null => &r["limits"][name],
        v => v,
    };
    let text = match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => return 0,
    };
    parse_whole(&text).map_or(0, u64::from)
}

/// Every node's CPU cores and memory.
pub const NODE_CPU: &str = "224";
pub const NODE_MEMORY: &str = "2Ti";

/// The Node object of node `index` of a pool (its status goes in with `status`).
pub fn node(pool: &Pool, index: usize) -> Value {
    let name = format!("{}-{index}", pool.name);
    let mut labels: Map<String, Value> = pool
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    labels.insert("kubernetes.io/hostname".into(), json!(name));
    labels.insert("kubernetes.io/os".into(), json!("linux"));
    labels.insert("kubernetes.io/arch".into(), json!("amd64"));
    let mut taints = Vec::new();
    if let Some(job) = &pool.namespaced_job {
        labels.insert(NAMESPACED_JOB.into(), json!(job));
        taints.push(json!({"key": NO_SCHEDULE, "value": "true", "effect": "NoSchedule"}));
    }
    if pool.tpu > 0 {
        taints.push(json!({"key": TPU, "value": "present", "effect": "NoSchedule"}));
    }
    if pool.gpu > 0 {
        taints.push(json!({"key": GPU, "value": "present", "effect": "NoSchedule"}));
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints, "unschedulable": pool.cordoned},
    })
}

pub fn status(pool: &Pool) -> Value {
    // Exactly one pod's accelerators, so two slices' pods never share a host; CPU and memory
    // of the largest TPU and GPU hosts GKE offers, more than any pod here asks for (one that
    // asks more stays unbound, with the scheduler's reason in its case's report).
    let mut resources = json!({
        "cpu": NODE_CPU,
        "memory": NODE_MEMORY,
        "pods": "110",
        "ephemeral-storage": "1000Gi",
    });
    if pool.tpu > 0 {
        resources[TPU] = json!(pool.tpu.to_string());
    }
    if pool.gpu > 0 {
        resources[GPU] = json!(pool.gpu.to_string());
    }
    json!({
        "capacity": resources,
        "allocatable": resources,
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "a fake node of the cluster tests (no kubelet)",
        }],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
    })
}

/// Creates every node of the pools, Ready.
pub async fn provision(cluster: &Cluster, pools: &[Pool]) -> Result<usize> {
    let mut count = 0;
    for pool in pools {
        for i in 0..pool.nodes {
            let node = node(pool, i);
            cluster.apply(&node).await?;
            cluster.patch_status(&node, &status(pool)).await?;
            count += 1;
        }
    }
    Ok(count)
}

/// Deletes every node of the pools.
pub async fn remove(cluster: &Cluster, pools: &[Pool]) -> Result<()> {
    for pool in pools {
        for i in 0..pool.nodes {
            cluster.delete_now(&node(pool, i)).await?;
        }
    }
    Ok(())
}

/// Every node of the cluster, by name.
pub async fn nodes_by_name(cluster: &Cluster) -> Result<BTreeMap<String, Value>> {
    Ok(cluster
        .list("v1", "Node", None, None)
        .await?
        .into_iter()
        .map(|n| {
            let name = n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (name, n)
        })
        .collect())
}
