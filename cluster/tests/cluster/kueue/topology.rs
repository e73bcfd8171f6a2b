//! Kueue's Topology Aware Scheduling on a queued JobSet.
use super::runs::{create_queued, fixture_jobset};
use super::shared::{BOUND, CPU_FLAVOUR, QUEUE, V6E_4X4};
use crate::common::Failures;
use crate::placement::check_nothing_lost_jobset;
use crate::pods::check_jobset_pods;
use crate::shapes::object_named;
use multislice_cluster::fleet::{self, TPU};
use multislice_cluster::kueue::{self};
use multislice_cluster::run::{self};
use multislice_cluster::ControlPlane;
use serde_json::json;
use std::collections::BTreeMap;

pub(crate) const TAS_ANNOTATION: &str = "kueue.x-k8s.io/podset-slice-required-topology";

/// Kueue's Topology Aware Scheduling places a queued two-slice JobSet: a flavour with a
/// Topology of node pools and hosts, each slice of 4 pods required in one node pool
/// (`podset-slice-required-topology`, `podset-slice-size`), no JobSet exclusive placement.
/// Kueue gates the pods, picks a host for each, and ungates them.
pub(crate) async fn topology_aware_scheduling(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let namespace = "kueue-tas";
    let flavour = &V6E_4X4;
    let cluster = &plane.cluster;
    cluster
        .apply(&kueue::topology(
            "tpu-pools",
            &[fleet::NODEPOOL, "kubernetes.io/hostname"],
        ))
        .await?;
    let mut rf = kueue::resource_flavor("tpu-v6e-4x4-tas", &flavour.labels());
    rf["spec"]["topologyName"] = json!("tpu-pools");
    // Kueue places pods before the API server gives them the TPU toleration: the flavour
    // brings it.
    rf["spec"]["tolerations"] = json!([{"key": TPU, "operator": "Exists", "effect": "NoSchedule"}]);
    cluster.apply(&rf).await?;
    cluster
        .apply(&kueue::tpu_cluster_queue(
            "tas",
            "tpu-v6e-4x4-tas",
            256,
            CPU_FLAVOUR,
        ))
        .await?;
    cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}))
        .await?;
    cluster
        .apply(&kueue::local_queue(namespace, QUEUE, "tas"))
        .await?;

    let mut object = fixture_jobset("test_data/jobsets/jobset-v6e-example.yaml", namespace)?;
    object["metadata"]["name"] = json!("v6e-tas");
    if let Some(a) = object["metadata"]["annotations"].as_object_mut() {
        a.remove("alpha.jobset.sigs.k8s.io/exclusive-topology");
    }
    object["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = json!({"annotations": {TAS_ANNOTATION: fleet::NODEPOOL, "kueue.x-k8s.io/podset-slice-size": "4"}});
    // Three node pools of 4 hosts for 2 slices: Kueue chooses.
    let mut pools = fleet::pools_for(
        std::slice::from_ref(&kueue::as_started_in(&object, &flavour.labels())),
        "tas-",
    );
    if let Some(extra) = pools.first().cloned() {
        let mut extra = extra;
        extra.name = "tas-spare".to_string();
        extra
            .labels
            .insert(fleet::NODEPOOL.to_string(), extra.name.clone());
        pools.push(extra);
    }
    fleet::provision(cluster, &pools).await?;
    let Some(sub) = create_queued(&mut f, plane, &object).await? else {
        return Ok(f);
    };
    let what = format!("JobSet {namespace}/{}", sub.name);
    let (complete, pods) = run::wait_bound(cluster, &[(sub.clone(), 8)], BOUND).await?;
    let pods = pods.into_iter().next().unwrap_or_default();
    let workload = kueue::workloads_of(cluster, &sub)
        .await?
        .into_iter()
        .next()
        .unwrap_or_default();
    f.check(complete, || {
        format!(
            "{what}: {} of 8 pods bound; Workload {:?}",
            pods.len(),
            kueue::conditions_text(&workload)
        )
    });
    let assignment = &workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"];
    f.check(!assignment.is_null(), || {
        format!("{what}: the Workload has no topology assignment")
    });
    // Each slice in one node pool, the two in different pools, every pod ungated and pinned.
    let nodes = fleet::nodes_by_name(cluster).await?;
    let mut pools_of_slice: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for p in &pods {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let node = p["spec"]["nodeName"].as_str().unwrap_or_default();
        let pool = nodes
            .get(node)
            .and_then(|n| n["metadata"]["labels"][fleet::NODEPOOL].as_str())
            .unwrap_or("?");
        let slice = p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"]
            .as_str()
            .unwrap_or("?");
        pools_of_slice
            .entry(slice.to_string())
            .or_default()
            .insert(pool.to_string());
        f.check(
            p["spec"]["schedulingGates"]
                .as_array()
                .is_none_or(|g| g.is_empty()),
            || format!("{what}: pod {name} is still gated"),
        );
        f.eq(
            p["spec"]["nodeSelector"]["kubernetes.io/hostname"].as_str(),
            Some(node),
            &format!("{what}: pod {name}: Kueue's hostname selector"),
        );
    }
    let distinct: std::collections::BTreeSet<&String> = pools_of_slice.values().flatten().collect();
    f.check(
        pools_of_slice.len() == 2
            && pools_of_slice.values().all(|p| p.len() == 1)
            && distinct.len() == 2,
        || format!("{what}: node pools by slice {pools_of_slice:?}"),
    );
    let stored = cluster.get(&sub.created.body).await?.unwrap_or_default();
    check_jobset_pods(&mut f, &what, &stored, &pods);
    check_nothing_lost_jobset(&mut f, &what, &object, &pods);
    eprintln!(
        "kueue: TAS: {what}: {} pods bound, node pools by slice {pools_of_slice:?}",
        pods.len()
    );
    cluster.delete(&object_named(&sub)).await?;
    fleet::remove(cluster, &pools).await?;
    Ok(f)
}
