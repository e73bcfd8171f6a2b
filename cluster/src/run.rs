//! Applying a user's objects to the control plane and waiting, within a bound, for the pods
//! the real controllers make from them, and the report `make cluster-preview` prints.
use crate::kube_api::{Cluster, Created};
use anyhow::Result;
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// One object as the API server answered its CREATE.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub kind: String,
    pub namespace: String,
    /// The created object's name (generateName resolved), else the one asked for.
    pub name: String,
    pub created: Created,
}

impl Submitted {
    pub fn allowed(&self) -> bool {
        self.created.status < 300
    }
}

/// Creates the namespace of each object, then each object, in order. Objects other than
/// JobSets, Jobs and Services are ignored.
pub async fn submit(cluster: &Cluster, objects: &[Value]) -> Result<Vec<Submitted>> {
    let mut out = Vec::new();
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        if !matches!(kind.as_str(), "JobSet" | "Job" | "Service") {
            continue;
        }
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let mut object = object.clone();
        object["metadata"]["namespace"] = json!(namespace);
        cluster
            .apply(&json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": namespace}}))
            .await?;
        let created = cluster.create(&object, false).await?;
        let name = created.body["metadata"]["name"]
            .as_str()
            .or(object["metadata"]["name"].as_str())
            .or(object["metadata"]["generateName"].as_str())
            .unwrap_or_default()
            .to_string();
        out.push(Submitted {
            kind,
            namespace,
            name,
            created,
        });
    }
    Ok(out)
}

/// How many pods the Job controller runs at once for a Job spec: min(parallelism,
/// completions).
pub fn pods_at_once(job_spec: &Value) -> u64 {
    let parallelism = job_spec["parallelism"].as_u64().unwrap_or(1);
    job_spec["completions"]
        .as_u64()
        .map_or(parallelism, |c| c.min(parallelism))
}

/// How many pods the controllers make for an object: every Job of a JobSet runs
/// `pods_at_once`.
pub fn expected_pods(object: &Value) -> u64 {
    match object["kind"].as_str() {
        Some("JobSet") => object["spec"]["replicatedJobs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["replicas"].as_u64().unwrap_or(1) * pods_at_once(&r["template"]["spec"]))
            .sum(),
        Some("Job") => pods_at_once(&object["spec"]),
        _ => 0,
    }
}

/// The pods of one submitted object, by the label its controller puts on them.
pub async fn pods_of(cluster: &Cluster, submitted: &Submitted) -> Result<Vec<Value>> {
    let selector = match submitted.kind.as_str() {
        "JobSet" => format!("jobset.sigs.k8s.io/jobset-name={}", submitted.name),
        "Job" => format!("batch.kubernetes.io/job-name={}", submitted.name),
        _ => return Ok(Vec::new()),
    };
    let mut pods = cluster
        .list("v1", "Pod", Some(&submitted.namespace), Some(&selector))
        .await?;
    pods.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    Ok(pods)
}

/// Waits until every allowed object has all its pods, each bound to a node, or `bound` runs
/// out. Returns whether it completed, and the pods of each object, in order.
pub async fn wait_bound(
    cluster: &Cluster,
    submitted: &[(Submitted, u64)],
    bound: Duration,
) -> Result<(bool, Vec<Vec<Value>>)> {
    let deadline = Instant::now() + bound;
    loop {
        let mut all = Vec::new();
        let mut complete = true;
        for (s, expected) in submitted {
            let pods = if s.allowed() {
                pods_of(cluster, s).await?
            } else {
                Vec::new()
            };
            let bound_pods = pods
                .iter()
                .filter(|p| p["spec"]["nodeName"].is_string())
                .count() as u64;
            if s.allowed() && (pods.len() as u64 != *expected || bound_pods != *expected) {
                complete = false;
            }
            all.push(pods);
        }
        if complete || Instant::now() > deadline {
            return Ok((complete, all));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A pod as the report shows it: placement, metadata, and every container's env resolved as
/// the kubelet will (a fieldRef to the pod's own metadata, `$(VAR)`).
pub fn pod_report(pod: &Value) -> Value {
    let spec = &pod["spec"];
    let mut containers = Vec::new();
    for (list, init) in [("initContainers", true), ("containers", false)] {
        for c in spec[list].as_array().into_iter().flatten() {
            let env: Map<String, Value> = multislice_host::env::resolve(pod, c)
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, json!(v)))
                .collect();
            containers.push(json!({"name": c["name"], "init": init, "env": env}));
        }
    }
    json!({
        "name": pod["metadata"]["name"],
        "hostname": spec["hostname"],
        "subdomain": spec["subdomain"],
        "nodeName": spec["nodeName"],
        "nodeSelector": spec["nodeSelector"],
        "labels": pod["metadata"]["labels"].as_object().cloned().unwrap_or_default(),
        "annotations": pod["metadata"]["annotations"].as_object().cloned().unwrap_or_default(),
        "containers": containers,
    })
}

pub fn object_report(s: &Submitted) -> Value {
    json!({
        "kind": s.kind,
        "name": s.name,
        "namespace": s.namespace,
        "allowed": s.allowed(),
        "message": s.created.message(),
        "warnings": s.created.warnings,
    })
}
