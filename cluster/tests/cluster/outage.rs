//! An outage of the policy's host while the Job controller creates a large slice's pods
//! (issue 51): the host is SIGKILLed as the first pod of a 4-slice × 16-host JobSet appears, and
//! started again on the same address 30 s later. With `failurePolicy: Fail` the API server
//! refuses every pod meanwhile, the Job controller retries, and in the end every pod exists
//! with its full env, none created while the host was down.
use crate::common::Failures;
use crate::pods::check_jobset_pods;
use crate::shapes::object_named;
use multislice_cluster::fleet::{self, NODE_SELECTOR_STRATEGY};
use multislice_cluster::{policies, run, ControlPlane};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The namespace of the case, judged by the pair.
pub(crate) const NAMESPACE: &str = "outage";
const SLICES: u64 = 4;
const HOSTS: u64 = 16;
/// How long the host stays down.
const DOWN: Duration = Duration::from_secs(30);
/// How long the Job controller may take, after the host is back, to make every pod: its
/// retries of a failed create back off up to a minute.
const RECOVERY: Duration = Duration::from_secs(180);

/// 4 slices of v5p 4x4x4 (16 hosts of 4 chips), placed by JobSet's node-selector strategy, so
/// that no pod waits for a leader and the Job controller makes all 64 pods at once.
pub(crate) fn large_slice_jobset(name: &str, namespace: &str, slices: u64, hosts: u64) -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {
                "alpha.jobset.sigs.k8s.io/exclusive-topology": fleet::NODEPOOL,
                NODE_SELECTOR_STRATEGY: "true",
            },
        },
        "spec": {
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [{
                "name": "slice",
                "replicas": slices,
                "template": {"spec": {
                    "parallelism": hosts,
                    "completions": hosts,
                    "backoffLimit": 0,
                    "template": {"spec": {
                        "nodeSelector": {
                            "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
                            "cloud.google.com/gke-tpu-topology": "4x4x4",
                        },
                        "containers": [{
                            "name": "jax",
                            "image": "python:3.11",
                            "command": ["python", "train.py"],
                            "resources": {"limits": {"google.com/tpu": "4"}},
                        }],
                    }},
                }},
            }],
        },
    })
}

pub(crate) async fn host_killed_while_pods_are_made(
    plane: &mut ControlPlane,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let object = large_slice_jobset("big", NAMESPACE, SLICES, HOSTS);
    let pools = fleet::pools_for(std::slice::from_ref(&object), "outage-");
    fleet::provision(&plane.cluster, &pools).await?;
    let expected = SLICES * HOSTS;

    let sub = run::submit(&plane.cluster, std::slice::from_ref(&object))
        .await?
        .remove(0);
    f.check(sub.allowed(), || {
        format!("CREATE refused: {:?}", sub.created.message())
    });
    if !sub.allowed() {
        return Ok(f);
    }
    // The host dies as the Job controller starts making pods.
    let first = Instant::now() + Duration::from_secs(60);
    while run::pods_of(&plane.cluster, &sub).await?.is_empty() {
        if Instant::now() > first {
            f.0.push("no pod within 60 s of the JobSet's CREATE".into());
            return Ok(f);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    plane.kill_host().await?;
    let killed = Instant::now();
    // What was in flight when it died is answered or failed within a second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let at_kill = names(&run::pods_of(&plane.cluster, &sub).await?);
    tokio::time::sleep(DOWN.saturating_sub(killed.elapsed())).await;
    let before_restart = names(&run::pods_of(&plane.cluster, &sub).await?);
    f.eq(
        &before_restart,
        &at_kill,
        "pods created while the policy's host was down (none may be)",
    );
    let refused = failed_creates(plane).await?;
    f.check(refused > 0, || {
        "the Job controller reported no FailedCreate while the host was down".into()
    });
    plane.start_host().await?;
    let restarted = Instant::now();

    let (complete, pods) =
        run::wait_bound(&plane.cluster, &[(sub.clone(), expected)], RECOVERY).await?;
    let pods = pods.into_iter().next().unwrap_or_default();
    f.check(complete, || {
        format!(
            "{} of {expected} pods exist and are bound {RECOVERY:?} after the restart",
            pods.len()
        )
    });
    // Every pod, whenever it was made, with the env of SPEC §4.
    let stored = plane
        .cluster
        .get(&sub.created.body)
        .await?
        .unwrap_or(sub.created.body.clone());
    check_jobset_pods(&mut f, "after the outage", &stored, &pods);
    eprintln!(
        "outage: {} of {expected} pods existed when the host was killed, none was made in the {} s it was down ({refused} FailedCreate events), all {} bound {:.0} s after the restart",
        at_kill.len(),
        DOWN.as_secs(),
        pods.len(),
        restarted.elapsed().as_secs_f64()
    );
    plane.cluster.delete(&object_named(&sub)).await?;
    fleet::remove(&plane.cluster, &pools).await?;
    Ok(f)
}

/// The names of some pods, sorted.
fn names(pods: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = pods
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    out.sort();
    out
}

/// The Job controller's FailedCreate events in the namespace, counted as it counts repeats.
async fn failed_creates(plane: &ControlPlane) -> anyhow::Result<u64> {
    let events = plane
        .cluster
        .list("v1", "Event", Some(NAMESPACE), None)
        .await?;
    let by_reason: BTreeMap<String, u64> = events.iter().fold(BTreeMap::new(), |mut counts, e| {
        let reason = e["reason"].as_str().unwrap_or_default().to_string();
        *counts.entry(reason).or_default() += e["count"].as_u64().unwrap_or(1);
        counts
    });
    Ok(by_reason.get("FailedCreate").copied().unwrap_or(0))
}

/// Creates the case's namespace, for the pair.
pub(crate) async fn namespace(plane: &ControlPlane) -> anyhow::Result<()> {
    policies::namespace(&plane.cluster, NAMESPACE, None).await
}
