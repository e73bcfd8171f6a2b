//! docs/contributing/spec.md §4.7 on the real Kueue, the cases the narrowing adds: what a user sees while no flavour
//! fits (Kueue's Warning Event, no TPU quota reserved) and what happens when one is added; a
//! flavour that labels only the accelerator; and G5 at CREATE.
use super::runs::{create_queued, fixture_jobset};
use super::shared::{
    check_waits_unfit, eventually, tpu_flavours, workload_when, BOUND, CPU_FLAVOUR, V6E_2X4,
    V6E_4X4, V6E_ANY,
};
use crate::common::Failures;
use crate::pods::check_jobset_pods;
use crate::shapes::object_named;
use multislice_cluster::fleet::{self, TPU};
use multislice_cluster::kueue::{self, is_true};
use multislice_cluster::run::{self, Submitted};
use multislice_cluster::ControlPlane;
use multislice_host::fixtures::load_yaml;
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::collections::BTreeSet;

const V6E_EXAMPLE: &str = "test_data/jobsets/jobset-v6e-example.yaml";
const TOPOLOGY: &str = "cloud.google.com/gke-tpu-topology";

/// The TPU quota a ClusterQueue has reserved, per flavour, from its status.
fn tpu_reserved(cluster_queue: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for flavour in cluster_queue["status"]["flavorsReservation"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for r in flavour["resources"].as_array().into_iter().flatten() {
            if r["name"] == TPU {
                out.push((
                    flavour["name"].as_str().unwrap_or_default().to_string(),
                    r["total"].as_str().unwrap_or_default().to_string(),
                ));
            }
        }
    }
    out
}

/// A JobSet that waits in ClusterQueue `queue`, whose only TPU flavour it does not fit: Kueue
/// records why in a Warning Event on the Workload, and the ClusterQueue reserves no TPU quota.
/// Then a fitting flavour joins the ClusterQueue after the misfit one, and Kueue admits the
/// waiting Workload into it, and the JobSet runs.
pub async fn waits_then_runs_once_a_flavour_fits(
    f: &mut Failures,
    plane: &ControlPlane,
    sub: &Submitted,
    queue: &str,
) -> anyhow::Result<()> {
    let cluster = &plane.cluster;
    let what = format!("JobSet {}/{}", sub.namespace, sub.name);
    let reason = format!("flavor {} doesn't match node affinity", V6E_2X4.name);
    let events = eventually(BOUND, || async {
        let events = cluster
            .list("v1", "Event", Some(&sub.namespace), None)
            .await?;
        let found: Vec<Value> = events
            .into_iter()
            .filter(|e| {
                e["type"] == "Warning"
                    && e["involvedObject"]["kind"] == "Workload"
                    && e["message"].as_str().is_some_and(|m| m.contains(&reason))
            })
            .collect();
        Ok((!found.is_empty()).then_some(found))
    })
    .await?
    .unwrap_or_default();
    let event = events
        .first()
        .map(|e| format!("{} {}: {}", e["type"], e["reason"], e["message"]))
        .unwrap_or_default();
    f.check(!events.is_empty(), || {
        format!("{what}: no Warning Event on its Workload says {reason:?}")
    });
    let queue_object = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                              "metadata": {"name": queue}});
    let reserved = tpu_reserved(&cluster.get(&queue_object).await?.unwrap_or_default());
    f.check(reserved.iter().all(|(_, total)| total == "0"), || {
        format!("{what}: ClusterQueue {queue} reserves TPU quota {reserved:?}")
    });
    eprintln!(
        "kueue: {what}: Kueue's Event {event}; ClusterQueue {queue} reserves TPU {reserved:?}"
    );

    // A fitting flavour joins the queue, after the misfit one.
    let object = cluster.get(&sub.created.body).await?.unwrap_or_default();
    let started = kueue::as_started_in(&object, &V6E_4X4.labels());
    let pools = fleet::pools_for(std::slice::from_ref(&started), "joined-");
    fleet::provision(cluster, &pools).await?;
    cluster
        .apply(&kueue::tpu_cluster_queue_of(
            queue,
            &[(V6E_2X4.name, 256), (V6E_4X4.name, 256)],
            CPU_FLAVOUR,
        ))
        .await?;
    let admitted = workload_when(cluster, sub, BOUND, |w| is_true(w, "Admitted")).await?;
    let assigned = admitted.as_ref().map(tpu_flavours).unwrap_or_default();
    f.eq(
        assigned.clone(),
        vec![V6E_4X4.name.to_string()],
        &format!("{what}: TPU flavour once {} joined", V6E_4X4.name),
    );
    let expected = run::expected_pods(&object);
    let (complete, pods) = run::wait_bound(cluster, &[(sub.clone(), expected)], BOUND).await?;
    let pods = pods.into_iter().next().unwrap_or_default();
    f.check(complete, || {
        format!("{what}: {} of {expected} pods bound", pods.len())
    });
    let stored = cluster.get(&sub.created.body).await?.unwrap_or_default();
    check_jobset_pods(f, &what, &stored, &pods);
    eprintln!(
        "kueue: {what}: {} joined ClusterQueue {queue}: admitted in {assigned:?}, {} pods bound",
        V6E_4X4.name,
        pods.len()
    );
    fleet::remove(cluster, &pools).await?;
    Ok(())
}

/// A flavour that labels only the accelerator, in a resource group of its own: Kueue admits
/// JobSet's v6e example into it and unsuspends it with that one label. Our UPDATE allows it
/// (T3 reads the narrowing's v6e 4x4, the only pair that label leaves), and the scheduler puts
/// every pod on 4x4 nodes, past a free 2x4 node pool of as many hosts.
pub async fn accelerator_only_flavour(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let namespace = "kueue-any";
    let cluster = &plane.cluster;
    let object = fixture_jobset(V6E_EXAMPLE, namespace)?;
    let started = kueue::as_started_in(&object, &V6E_4X4.labels());
    let mut pools = fleet::pools_for(std::slice::from_ref(&started), "any-");
    let decoys: Vec<fleet::Pool> = pools
        .iter()
        .map(|p| {
            let mut decoy = p.clone();
            decoy.name = format!("{}-decoy-2x4", p.name);
            decoy
                .labels
                .insert(fleet::NODEPOOL.to_string(), decoy.name.clone());
            decoy
                .labels
                .insert(TOPOLOGY.to_string(), V6E_2X4.topology.to_string());
            decoy
        })
        .collect();
    pools.extend(decoys);
    fleet::provision(cluster, &pools).await?;
    let Some(sub) = create_queued(&mut f, plane, &object).await? else {
        return Ok(f);
    };
    let what = format!("JobSet {namespace}/{}", sub.name);
    let expected = run::expected_pods(&object);
    let (complete, pods) = run::wait_bound(cluster, &[(sub.clone(), expected)], BOUND).await?;
    let pods = pods.into_iter().next().unwrap_or_default();
    f.check(complete, || {
        format!("{what}: {} of {expected} pods bound", pods.len())
    });
    let workload = kueue::workloads_of(cluster, &sub)
        .await?
        .into_iter()
        .next()
        .unwrap_or_default();
    f.eq(
        tpu_flavours(&workload),
        vec![V6E_ANY.to_string()],
        &format!("{what}: TPU flavour"),
    );
    let reviews = plane.reviews()?;
    let updates = kueue::unsuspending_reviews(&reviews, namespace, &sub.name);
    f.check(
        !updates.is_empty() && updates.iter().all(|u| u["allowed"] == json!(true)),
        || {
            format!(
                "{what}: unsuspending UPDATEs {:?}",
                updates
                    .iter()
                    .map(|u| (&u["policy"], &u["allowed"], &u["message"]))
                    .collect::<Vec<_>>()
            )
        },
    );
    let nodes = fleet::nodes_by_name(cluster).await?;
    let topologies: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| {
            let node = nodes.get(p["spec"]["nodeName"].as_str()?)?;
            node["metadata"]["labels"][TOPOLOGY]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    f.eq(
        topologies.iter().cloned().collect::<Vec<_>>(),
        vec![V6E_4X4.topology.to_string()],
        &format!("{what}: the topologies of the nodes its pods run on"),
    );
    let stored = cluster.get(&sub.created.body).await?.unwrap_or_default();
    check_jobset_pods(&mut f, &what, &stored, &pods);
    eprintln!(
        "kueue: {what}: flavour {V6E_ANY} (accelerator only): {} unsuspending UPDATE(s) allowed, {} pods bound, on nodes of topologies {topologies:?}",
        updates.len(),
        pods.len()
    );
    cluster.delete(&object_named(&sub)).await?;
    fleet::remove(cluster, &pools).await?;
    Ok(f)
}

/// G5 on the real Kueue: a queued slice group of two replicated jobs left with five shapes is
/// refused at CREATE, by the validating policy, on the object Kueue's webhook suspended.
pub async fn g5_refused_at_create(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let root = workspace_root();
    let expected = load_yaml(&root.join("test_data/rules/expected.yaml"))?;
    let want = expected["g5-fail"]["message"].as_str().unwrap_or_default();
    let mut object = load_yaml(&root.join("test_data/rules/g5-fail.yaml"))?;
    object["metadata"]["namespace"] = json!("kueue-g5");
    let created = plane.cluster.create(&object, false).await?;
    let message = created.message().unwrap_or_default().to_string();
    f.eq(created.status, 400, "g5-fail: status");
    f.eq(
        message.clone(),
        format!(
            "admission webhook \"{}\" denied the request: {want}",
            plane.webhook_name
        ),
        "g5-fail: message",
    );
    eprintln!("kueue: G5 at CREATE: {} {message}", created.status);
    Ok(f)
}

/// docs/contributing/spec.md §4.7 on the real Kueue: the policy limits JobSet's v6e example, which leaves its slice
/// shape to the queue, to the shapes where 4 hosts of 4 chips make a slice (a required node
/// affinity), and Kueue's flavour assigner skips a flavour whose node labels it does not
/// match. In a queue of 2x4 slices (2 hosts) only, the JobSet stays queued, with Kueue's
/// reason, and no unsuspending UPDATE ever reaches our webhook: the dead end of a flavour
/// admitted only for T4 to refuse its UPDATE is gone.
pub(crate) async fn misfit_flavour_is_skipped(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let namespace = "kueue-misfit";
    let object = fixture_jobset("test_data/jobsets/jobset-v6e-example.yaml", namespace)?;
    let Some(sub) = create_queued(&mut f, plane, &object).await? else {
        return Ok(f);
    };
    let what = format!("JobSet {namespace}/{}", sub.name);
    let (conditions, stored) = check_waits_unfit(&mut f, plane, &sub, &what, &V6E_2X4).await?;
    let reviews = plane.reviews()?;
    let updates = kueue::unsuspending_reviews(&reviews, namespace, &sub.name);
    f.eq(updates.len(), 0, &format!("{what}: unsuspending UPDATEs"));
    let terms = &stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        ["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    eprintln!(
        "kueue: {what}: in a queue of {} only: Workload {conditions:?}, still suspended, 0 pods, {} unsuspending UPDATEs; the policy's required node affinity: {terms}",
        V6E_2X4.name,
        updates.len(),
    );
    waits_then_runs_once_a_flavour_fits(&mut f, plane, &sub, "misfit").await?;
    plane.cluster.delete(&object_named(&sub)).await?;
    Ok(f)
}
