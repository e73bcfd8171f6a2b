//! The one simulated part: a node agent doing what a kubelet would for the fake nodes, and
//! nothing else. It marks each bound pod Running and Ready (or Succeeded, for the JobSets and
//! replicated jobs a test names), and finishes the deletion of terminating pods (policy-server's pods are host.rs's). Without it JobSet's `InOrder`
//! startup never proceeds (it waits for Ready), and a deleted pod hangs forever.
use crate::kube_api::Cluster;
use anyhow::Result;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// Pods that finish with success: (namespace, JobSet, replicated job), where no replicated
/// job means all of the JobSet's.
type Succeed = BTreeSet<(String, String, Option<String>)>;

pub struct NodeAgent {
    succeed: Arc<Mutex<Succeed>>,
    task: JoinHandle<()>,
}

impl NodeAgent {
    pub fn start(cluster: Cluster, lifetime: Duration) -> NodeAgent {
        let succeed = Arc::new(Mutex::new(BTreeSet::new()));
        let wanted = succeed.clone();
        let task = tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + lifetime;
            while tokio::time::Instant::now() < deadline {
                if let Err(e) = pass(&cluster, &wanted).await {
                    eprintln!("node agent: {e:#}");
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        NodeAgent { succeed, task }
    }

    /// From now on the pods of this JobSet (label jobset-name) finish with success.
    pub fn succeed_jobset(&self, namespace: &str, jobset: &str) {
        self.succeed(namespace, jobset, None);
    }

    /// From now on the pods of this replicated job finish with success: what an initializer
    /// that others wait for (JobSet `dependsOn`) does.
    pub fn succeed_replicated_job(&self, namespace: &str, jobset: &str, rjob: &str) {
        self.succeed(namespace, jobset, Some(rjob));
    }

    fn succeed(&self, namespace: &str, jobset: &str, rjob: Option<&str>) {
        if let Ok(mut set) = self.succeed.lock() {
            set.insert((
                namespace.to_string(),
                jobset.to_string(),
                rjob.map(str::to_string),
            ));
        }
    }
}

impl Drop for NodeAgent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pass(cluster: &Cluster, succeed: &Mutex<Succeed>) -> Result<()> {
    for pod in cluster.list("v1", "Pod", None, None).await? {
        let meta = &pod["metadata"];
        if !meta["deletionTimestamp"].is_null() {
            // What a kubelet does once the containers have stopped.
            let _ = cluster.delete_now(&pod).await;
            continue;
        }
        let Some(node) = pod["spec"]["nodeName"].as_str() else {
            continue;
        };
        // policy-server's pods are Ready only once their host serves (host.rs plays their
        // kubelet).
        if !meta["labels"][crate::policy_server::POLICY_SERVER_LABEL].is_null() {
            continue;
        }
        let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
        let ns = meta["namespace"].as_str().unwrap_or_default().to_string();
        let jobset = meta["labels"]["jobset.sigs.k8s.io/jobset-name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let rjob = meta["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]
            .as_str()
            .map(str::to_string);
        let finish = succeed
            .lock()
            .map(|s| {
                s.contains(&(ns.clone(), jobset.clone(), None))
                    || rjob.is_some_and(|r| s.contains(&(ns, jobset, Some(r))))
            })
            .unwrap_or(false);
        let status = match (phase, finish) {
            ("Pending", _) => running(&pod, node),
            ("Running", true) => succeeded(&pod),
            _ => continue,
        };
        let _ = cluster.patch_status(&pod, &status).await;
    }
    Ok(())
}

fn now() -> String {
    // RFC 3339 in UTC, second precision, as the API server stores times.
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 -> (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn conditions(ready: bool, at: &str) -> Value {
    let s = if ready { "True" } else { "False" };
    json!([
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": at},
        {"type": "Initialized", "status": "True", "lastTransitionTime": at},
        {"type": "ContainersReady", "status": s, "lastTransitionTime": at},
        {"type": "Ready", "status": s, "lastTransitionTime": at},
    ])
}

fn container_statuses(pod: &Value, state: Value, ready: bool) -> Value {
    let containers = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    json!(containers
        .iter()
        .map(|c| json!({
            "name": c["name"], "image": c["image"], "imageID": "",
            "ready": ready, "started": ready, "restartCount": 0, "state": state,
        }))
        .collect::<Vec<_>>())
}

fn running(pod: &Value, node: &str) -> Value {
    let at = now();
    json!({
        "phase": "Running",
        "hostIP": "127.0.0.1",
        "podIP": "127.0.0.1",
        "startTime": at,
        "conditions": conditions(true, &at),
        "containerStatuses": container_statuses(pod, json!({"running": {"startedAt": at}}), true),
        "nominatedNodeName": null,
        "message": format!("started by the test node agent on {node}"),
    })
}

fn succeeded(pod: &Value) -> Value {
    let at = now();
    json!({
        "phase": "Succeeded",
        "conditions": conditions(false, &at),
        "containerStatuses": container_statuses(
            pod,
            json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": at, "finishedAt": at}}),
            false,
        ),
    })
}
