//! What each rule saves a user from: the JobSet it rejects, run where our webhook does not.
use crate::common::Failures;
use crate::pods::label;
use crate::shapes::object_named;
use multislice_cluster::fleet::{self, Pool};
use multislice_cluster::policies;
use multislice_cluster::run::{self};
use multislice_cluster::ControlPlane;
use multislice_host::fixtures::load_yaml;
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// A TPU node pool of `nodes` v5e hosts (4 chips each) claiming `topology`.
pub(crate) fn v5e_pool(name: &str, topology: &str, nodes: usize) -> Pool {
    Pool {
        name: name.to_string(),
        nodes,
        labels: [
            (
                "cloud.google.com/gke-tpu-accelerator",
                "tpu-v5-lite-podslice",
            ),
            ("cloud.google.com/gke-tpu-topology", topology),
            (fleet::NODEPOOL, name),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        tpu: 4,
        gpu: 0,
        cordoned: false,
        namespaced_job: None,
    }
}

/// What each rule saves a user from: the JobSet it rejects, applied where our webhook does not
/// run (the `kubewarden` namespace, which Kubewarden keeps out of every policy), on a fleet
/// chosen so that the outcome is certain. Every other node is cordoned while they run, and
/// uncordoned after: policy-server's node among them, whose next rollout (a later part's policy
/// change) would stay unscheduled.
pub(crate) async fn unprotected_runs(
    plane: &ControlPlane,
) -> anyhow::Result<Vec<(String, anyhow::Result<Failures>)>> {
    let schedulable: Vec<_> = plane
        .cluster
        .list("v1", "Node", None, None)
        .await?
        .into_iter()
        .filter(|n| n["spec"]["unschedulable"] != json!(true))
        .collect();
    set_unschedulable(plane, &schedulable, true).await?;
    let out = unprotected_cases(plane).await;
    set_unschedulable(plane, &schedulable, false).await?;
    out
}

async fn set_unschedulable(
    plane: &ControlPlane,
    nodes: &[Value],
    cordoned: bool,
) -> anyhow::Result<()> {
    for node in nodes {
        plane
            .cluster
            .patch_merge(node, &json!({"spec": {"unschedulable": cordoned}}))
            .await?;
    }
    Ok(())
}

async fn unprotected_cases(
    plane: &ControlPlane,
) -> anyhow::Result<Vec<(String, anyhow::Result<Failures>)>> {
    let cases: Vec<(&str, Vec<Pool>)> = vec![
        // No topology selector: one slice of 2 hosts lands on a 4x4 pool of 4.
        (
            "t3-fail",
            vec![v5e_pool("u-t3-a", "4x4", 4), v5e_pool("u-t3-b", "2x4", 2)],
        ),
        // parallelism 2 on 4x4 slices of 4 hosts: half of every pool idles.
        (
            "t4-fail",
            vec![v5e_pool("u-t4-a", "4x4", 4), v5e_pool("u-t4-b", "4x4", 4)],
        ),
        // No exclusive placement: 4 pods on pools of 3 and 1 hosts, so a slice spans both.
        (
            "x1-fail",
            vec![v5e_pool("u-x1-a", "2x4", 3), v5e_pool("u-x1-b", "2x4", 1)],
        ),
        // The pinned pool holds one slice; the other three can never be placed.
        (
            "x4-fail",
            vec![
                v5e_pool("tpu-pool-1", "2x4", 2),
                v5e_pool("u-x4-b", "2x4", 2),
                v5e_pool("u-x4-c", "2x4", 2),
                v5e_pool("u-x4-d", "2x4", 2),
            ],
        ),
    ];
    let mut out = Vec::new();
    for (rule, pools) in cases {
        let result = unprotected_run(plane, rule, &pools).await;
        out.push((
            format!("without the policy, {rule}'s JobSet goes wrong"),
            result,
        ));
        fleet::remove(&plane.cluster, &pools).await?;
    }
    Ok(out)
}

pub(crate) async fn unprotected_run(
    plane: &ControlPlane,
    rule: &str,
    pools: &[Pool],
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    fleet::provision(&plane.cluster, pools).await?;
    let mut object = load_yaml(&workspace_root().join(format!("test_data/rules/{rule}.yaml")))?;
    object["metadata"]["namespace"] = json!(policies::KUBEWARDEN_NAMESPACE);
    object["metadata"]["name"] = json!(format!("unprotected-{rule}"));
    let sub = run::submit(&plane.cluster, &[object.clone()])
        .await?
        .remove(0);
    f.check(sub.allowed(), || {
        format!(
            "{rule}: refused without our webhook: {:?}",
            sub.created.message()
        )
    });
    let expect_bound = match rule {
        "x4-fail" => 2,
        _ => 4,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let pods = loop {
        let pods = run::pods_of(&plane.cluster, &sub).await?;
        let bound = pods
            .iter()
            .filter(|p| p["spec"]["nodeName"].is_string())
            .count();
        if bound >= expect_bound || Instant::now() > deadline {
            // Give the scheduler time to bind what it ever will.
            tokio::time::sleep(Duration::from_secs(5)).await;
            break run::pods_of(&plane.cluster, &sub).await?;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let pool_of = |p: &Value| -> Option<String> {
        let node = p["spec"]["nodeName"].as_str()?;
        pools
            .iter()
            .find(|pool| node.starts_with(&format!("{}-", pool.name)))
            .map(|pool| pool.name.clone())
    };
    let bound: Vec<&Value> = pods
        .iter()
        .filter(|p| p["spec"]["nodeName"].is_string())
        .collect();
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    let mut job_pools: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &bound {
        let pool = pool_of(p).unwrap_or_default();
        *used.entry(pool.clone()).or_default() += 1;
        job_pools
            .entry(label(p, "jobset.sigs.k8s.io/job-index").to_string())
            .or_default()
            .insert(pool);
    }
    let idle: usize = pools
        .iter()
        .map(|p| p.nodes - used.get(&p.name).copied().unwrap_or(0))
        .sum();
    let unschedulable = pods
        .iter()
        .filter(|p| {
            p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "PodScheduled" && c["reason"] == "Unschedulable")
        })
        .count();
    eprintln!(
        "unprotected {rule}: {} pods, {} bound, {unschedulable} unschedulable, {idle} hosts idle, pools used {used:?}, Jobs' pools {job_pools:?}",
        pods.len(),
        bound.len()
    );
    match rule {
        "t3-fail" => {
            // One slice sits on the 4x4 pool: 2 of its 4 hosts idle, a topology its 2 hosts
            // are not.
            f.eq(bound.len(), 4, "t3: pods bound");
            f.eq(
                used.get("u-t3-a").copied(),
                Some(2),
                "t3: pods on the 4x4 pool",
            );
            f.eq(idle, 2, "t3: hosts left idle");
        }
        "t4-fail" => {
            f.eq(bound.len(), 4, "t4: pods bound");
            f.eq(idle, 4, "t4: hosts left idle (half of each 4x4 slice)");
        }
        "x1-fail" => {
            f.eq(bound.len(), 4, "x1: pods bound");
            let split = job_pools.values().filter(|p| p.len() > 1).count();
            f.check(split >= 1, || {
                format!("x1: no slice spans two node pools: {job_pools:?}")
            });
        }
        "x4-fail" => {
            f.eq(bound.len(), 2, "x4: pods bound");
            f.eq(
                used.get("tpu-pool-1").copied(),
                Some(2),
                "x4: the pinned pool holds one slice",
            );
            f.check(unschedulable >= 3, || format!("x4: {unschedulable} pods reported Unschedulable, want the 3 other slices' leaders"));
            f.eq(idle, 6, "x4: hosts left idle");
        }
        _ => {}
    }
    plane.cluster.delete(&object_named(&sub)).await?;
    Ok(f)
}
