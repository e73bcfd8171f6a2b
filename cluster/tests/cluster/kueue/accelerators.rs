//! Every accelerator label GKE puts on TPU nodes (issue 45, item 3), on the real Kueue and
//! scheduler: a flavour of v5e's single-host machine types (`tpu-v5-lite-device`) admits a
//! single-host JobSet that leaves its shape to the queue; a flavour whose accelerator the
//! table does not know is not skipped because of the policy's narrowing (docs/contributing/spec.md §4.7);
//! and with `requireTpuNodeSelectors: false` no node affinity is written, so a JobSet runs on
//! TPU nodes without GKE's labels.
//!
//! `CLUSTER_PARTS=accelerators` runs these cases alone (on the Kueue control plane), and
//! `CLUSTER_CASE=<part of a case's name>` narrows them to one.
use super::runs::queued_jobset_runs;
use super::shared::{Flavour, CPU_FLAVOUR, QUEUE};
use crate::common::{Failures, Report};
use crate::shapes::{object_named, reviews_of};
use multislice_cluster::fleet::{self, Pool};
use multislice_cluster::kueue;
use multislice_cluster::policies::{self, Variant};
use multislice_cluster::run;
use multislice_cluster::ControlPlane;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// ct5l-hightpu-8t: one host of 8 v5e chips, a 2x4 slice that is never split into hosts.
const V5E_DEVICE: Flavour = Flavour {
    name: "tpu-v5e-device-2x4",
    accelerator: "tpu-v5-lite-device",
    topology: "2x4",
};

/// An accelerator no row of the table names (a generation newer than the policy).
const UNKNOWN: Flavour = Flavour {
    name: "tpu-v9-2x2",
    accelerator: "tpu-v9-slice",
    topology: "2x2",
};

const V5E_NAMESPACE: &str = "accel-v5e-device";
const UNKNOWN_NAMESPACE: &str = "accel-unknown";
/// Judged by a pair of its own, with `requireTpuNodeSelectors: false`.
const NO_GKE_NAMESPACE: &str = "accel-no-gke-labels";

const ACCELERATOR: &str = "cloud.google.com/gke-tpu-accelerator";

/// The narrowing's CREATE warning on [`jobset`] with `chips` per pod (docs/contributing/spec.md §4.7),
/// cut at 256 characters as every warning is (§4.2).
fn narrowed_warning(chips: u32, pairs: &str) -> String {
    let full = format!(
        "spec.replicatedJobs[0].template.spec.template.spec.affinity: replicated job \"slice\" leaves its slice shape open, so a required node affinity limits it to slices of 1 host of {chips} chips (or an unknown accelerator): {pairs}"
    );
    if full.chars().count() <= 256 {
        return full;
    }
    let mut cut: String = full.chars().take(255).collect();
    cut.push('…');
    cut
}

/// A one-host TPU JobSet that selects no node labels of its own: its slice shape is the
/// queue's (or, unqueued, any TPU node's).
fn jobset(namespace: &str, name: &str, chips: u32, queued: bool) -> Value {
    let mut object = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicatedJobs": [{
            "name": "slice", "replicas": 1,
            "template": {"spec": {
                "parallelism": 1, "completions": 1, "backoffLimit": 0,
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "jax-tpu",
                        "image": "us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:latest",
                        "command": ["python3", "-c", "import jax; print(jax.device_count())"],
                        "resources": {"limits": {"google.com/tpu": chips}},
                    }],
                }},
            }},
        }]},
    });
    if queued {
        object["metadata"]["labels"] = json!({kueue::QUEUE_LABEL: QUEUE});
    }
    object
}

/// Whether the case `name` runs (`CLUSTER_CASE` narrows the part to the cases it names).
fn selected(name: &str) -> bool {
    std::env::var("CLUSTER_CASE").map_or(true, |c| c.is_empty() || name.contains(&c))
}

/// The flavours, ClusterQueues, namespaces and the `requireTpuNodeSelectors: false` pair.
pub(crate) async fn set_up(plane: &mut ControlPlane) -> anyhow::Result<()> {
    let cluster = plane.cluster.clone();
    for (flavour, namespace) in [(&V5E_DEVICE, V5E_NAMESPACE), (&UNKNOWN, UNKNOWN_NAMESPACE)] {
        cluster
            .apply(&kueue::resource_flavor(flavour.name, &flavour.labels()))
            .await?;
        cluster
            .apply(&kueue::tpu_cluster_queue(
                flavour.name,
                flavour.name,
                64,
                CPU_FLAVOUR,
            ))
            .await?;
        policies::namespace(&cluster, namespace, None).await?;
        cluster
            .apply(&kueue::local_queue(namespace, QUEUE, flavour.name))
            .await?;
        kueue::wait_local_queue_active(&cluster, namespace, QUEUE).await?;
    }
    policies::namespace(&cluster, NO_GKE_NAMESPACE, Some(policies::NONE)).await?;
    let scope = [
        json!({"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NO_GKE_NAMESPACE]}),
    ];
    let settings = json!({"requireTpuNodeSelectors": false});
    plane
        .install_variant(Variant::Pair, Some("no-gke-labels"), &settings, &scope)
        .await?;
    // A moment for the API server's informers to have the labels and the configurations.
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}

/// The three cases, each where `CLUSTER_CASE` selects it.
pub(crate) async fn cases(plane: &ControlPlane, report: &mut Report) {
    let cases: [(&str, u8); 3] = [
        ("a tpu-v5-lite-device flavour admits a single-host v5e JobSet (8 chips, its shape left to the queue): Kueue admits it into the flavour and the scheduler binds its pod", 0),
        ("a flavour whose accelerator the table does not know (tpu-v9-slice): the policy's narrowing leaves it open, Kueue admits the JobSet into it, and it runs", 1),
        ("requireTpuNodeSelectors: false: no node affinity is written, and a TPU JobSet runs on nodes without GKE's labels", 2),
    ];
    for (name, case) in cases {
        if !selected(name) {
            continue;
        }
        let result = match case {
            0 => v5e_device_flavour_runs(plane).await,
            1 => unknown_accelerator_flavour_runs(plane).await,
            _ => no_affinity_without_gke_labels(plane).await,
        };
        report.record(name, result);
    }
}

/// The CREATE warnings our policies answered for the JobSet `name` in `namespace`.
fn create_warnings(
    plane: &ControlPlane,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Vec<String>> {
    let reviews = plane.reviews()?;
    let mut out = Vec::new();
    for review in reviews_of(&reviews, "JobSet", namespace, name) {
        let warnings: Vec<String> =
            serde_json::from_value(review["warnings"].clone()).unwrap_or_default();
        out.extend(warnings);
    }
    Ok(out)
}

/// (a) One host of 8 chips, queued into the tpu-v5-lite-device 2x4 flavour only.
async fn v5e_device_flavour_runs(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let object = jobset(V5E_NAMESPACE, "v5e-device", 8, true);
    let mut f = queued_jobset_runs(plane, &object, &V5E_DEVICE).await?;
    let want = narrowed_warning(
        8,
        "tpu-v5-lite-device 2x4, tpu-v5-lite-podslice 2x4, tpu-v6e-slice 2x4",
    );
    let got = create_warnings(plane, V5E_NAMESPACE, "v5e-device")?;
    f.check(got.contains(&want), || {
        format!("CREATE warnings {got:?}, want one to be {want:?}")
    });
    Ok(f)
}

/// (b) One host of 4 chips, queued into a flavour of an accelerator the table lacks.
async fn unknown_accelerator_flavour_runs(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let object = jobset(UNKNOWN_NAMESPACE, "unknown-accelerator", 4, true);
    let mut f = queued_jobset_runs(plane, &object, &UNKNOWN).await?;
    let got = create_warnings(plane, UNKNOWN_NAMESPACE, "unknown-accelerator")?;
    f.check(
        // The narrowing's warning (§4.7) names the slice shapes that fit, "(or an unknown
        // accelerator)": a flavour the table lacks is left open.
        got.iter().any(|w| {
            w.contains("limits it to slices of 1 host of 4 chips (or an unknown accelerator): ")
        }),
        || format!("CREATE warnings {got:?}: none says that an unknown accelerator is left open"),
    );
    Ok(f)
}

/// (c) Unqueued, on a node pool that carries no GKE label at all.
async fn no_affinity_without_gke_labels(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let cluster = &plane.cluster;
    let object = jobset(NO_GKE_NAMESPACE, "no-gke-labels", 4, false);
    let pool = Pool {
        name: "accel-plain-tpu".to_string(),
        nodes: 1,
        labels: BTreeMap::new(),
        tpu: 4,
        gpu: 0,
        cordoned: false,
        namespaced_job: None,
    };
    fleet::provision(cluster, std::slice::from_ref(&pool)).await?;
    let sub = run::submit(cluster, std::slice::from_ref(&object))
        .await?
        .remove(0);
    let what = format!("JobSet {NO_GKE_NAMESPACE}/{}", sub.name);
    f.check(sub.allowed(), || {
        format!("{what}: CREATE refused: {:?}", sub.created.message())
    });
    if !sub.allowed() {
        fleet::remove(cluster, std::slice::from_ref(&pool)).await?;
        return Ok(f);
    }
    let stored = cluster.get(&sub.created.body).await?.unwrap_or_default();
    let spec = &stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"];
    f.eq(
        &spec["affinity"],
        &Value::Null,
        &format!("{what}: the stored pod template's affinity"),
    );
    let (complete, pods) =
        run::wait_bound(cluster, &[(sub.clone(), 1)], Duration::from_secs(120)).await?;
    let pods = pods.into_iter().next().unwrap_or_default();
    f.check(complete, || {
        let why: Vec<String> = pods
            .iter()
            .map(|p| {
                let condition = p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["type"] == "PodScheduled")
                    .and_then(|c| c["message"].as_str())
                    .unwrap_or("no scheduling condition yet");
                format!("{}: {condition}", p["metadata"]["name"])
            })
            .collect();
        format!("{what}: {} pods, not 1 bound: {why:?}", pods.len())
    });
    let nodes = fleet::nodes_by_name(cluster).await?;
    for p in &pods {
        let node = p["spec"]["nodeName"].as_str().unwrap_or_default();
        let labelled = nodes
            .get(node)
            .map(|n| n["metadata"]["labels"][ACCELERATOR].clone());
        f.eq(
            labelled,
            Some(Value::Null),
            &format!("{what}: the {ACCELERATOR} label of the node its pod runs on"),
        );
    }
    eprintln!(
        "accelerators: {what}: affinity {}, {} pod(s) bound on nodes without GKE labels",
        spec["affinity"],
        pods.len()
    );
    cluster.delete(&object_named(&sub)).await?;
    fleet::remove(cluster, std::slice::from_ref(&pool)).await?;
    Ok(f)
}
