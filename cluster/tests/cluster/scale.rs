//! `make cluster-bench` (part `scale`, never in a default run): how long the real controllers
//! take to create every pod of a 1,024-pod JobSet (64 slices × 16 v5p hosts, on 1,024 fake
//! nodes), with the policy's webhooks in the way and without them (a namespace no cluster-wide
//! policy selects). Rounds alternate, so that a slow moment of the machine falls on both. Two
//! control planes, one after the other: kube-controller-manager at its default 20 requests per
//! second, which paces the Job controller, and at 500, where admission's own cost shows.
use crate::outage::large_slice_jobset;
use crate::shapes::object_named;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PropagationPolicy};
use multislice_cluster::agent::NodeAgent;
use multislice_cluster::fleet;
use multislice_cluster::run::{self, Submitted};
use multislice_cluster::{policies, Binaries, ControlPlane, Options};
use std::time::{Duration, Instant};

const SLICES: u64 = 64;
const HOSTS: u64 = 16;
const ROUNDS: usize = 3;
const BOUND: Duration = Duration::from_secs(600);
const WITH: &str = "scale-policy";
const WITHOUT: &str = "scale-bare";

/// The seconds from the JobSet's CREATE until all its pods exist, and until all are bound.
async fn one_round(plane: &ControlPlane, namespace: &str) -> anyhow::Result<(f64, f64)> {
    let object = large_slice_jobset("scale", namespace, SLICES, HOSTS);
    let expected = SLICES * HOSTS;
    let start = Instant::now();
    let sub = run::submit(&plane.cluster, std::slice::from_ref(&object))
        .await?
        .remove(0);
    anyhow::ensure!(sub.allowed(), "refused: {:?}", sub.created.message());
    let mut created = None;
    loop {
        let pods = run::pods_of(&plane.cluster, &sub).await?;
        if created.is_none() && pods.len() as u64 == expected {
            created = Some(start.elapsed().as_secs_f64());
        }
        let bound = pods
            .iter()
            .filter(|p| p["spec"]["nodeName"].is_string())
            .count();
        if bound as u64 == expected {
            let bound = start.elapsed().as_secs_f64();
            remove(plane, &sub).await?;
            return Ok((created.unwrap_or(bound), bound));
        }
        anyhow::ensure!(
            start.elapsed() < BOUND,
            "{namespace}: {} pods, {bound} bound after {BOUND:?}",
            pods.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Deletes the JobSet, then its Jobs and pods at once (the garbage collector, paced by the
/// controller manager's rate, would take minutes), and waits until they are gone, so that rounds
/// do not overlap and the next round's JobSet, of the same name, lands on the same node pools.
async fn remove(plane: &ControlPlane, sub: &Submitted) -> anyhow::Result<()> {
    let object = object_named(sub);
    plane.cluster.delete(&object).await?;
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    let client = plane.cluster.client.clone();
    Api::<Job>::namespaced(client.clone(), &sub.namespace)
        .delete_collection(&now, &ListParams::default())
        .await?;
    Api::<Pod>::namespaced(client, &sub.namespace)
        .delete_collection(&now, &ListParams::default())
        .await?;
    let deadline = Instant::now() + BOUND;
    while !run::pods_of(&plane.cluster, sub).await?.is_empty()
        || plane.cluster.get(&object).await?.is_some()
    {
        anyhow::ensure!(Instant::now() < deadline, "pods of {} not gone", sub.name);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

pub(crate) async fn creation_time(binaries: &Binaries) -> anyhow::Result<()> {
    for qps in [None, Some(500)] {
        creation_time_at(binaries, qps).await?;
    }
    Ok(())
}

async fn creation_time_at(binaries: &Binaries, qps: Option<u32>) -> anyhow::Result<()> {
    let plane = ControlPlane::start(
        binaries,
        Options {
            controller_qps: qps,
            ..Options::default()
        },
    )
    .await?;
    let rate = qps.map_or(
        "kube-controller-manager at its default 20 requests/s".to_string(),
        |q| format!("kube-controller-manager at {q} requests/s"),
    );
    let _agent = NodeAgent::start(plane.cluster.clone(), plane.remaining());
    policies::namespace(&plane.cluster, WITH, None).await?;
    policies::namespace(&plane.cluster, WITHOUT, Some(policies::NONE)).await?;
    let mut pools = Vec::new();
    for namespace in [WITH, WITHOUT] {
        let object = large_slice_jobset("scale", namespace, SLICES, HOSTS);
        pools.extend(fleet::pools_for(&[object], &format!("{namespace}-")));
    }
    let nodes = fleet::provision(&plane.cluster, &pools).await?;
    eprintln!("scale: {nodes} fake nodes");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        for (namespace, times) in [(WITH, &mut with), (WITHOUT, &mut without)] {
            let (created, bound) = one_round(&plane, namespace).await?;
            println!(
                "scale ({rate}): round {round} {namespace}: {} pods created in {created:.1} s, bound in {bound:.1} s",
                SLICES * HOSTS
            );
            times.push((created, bound));
        }
    }
    let created = |t: &[(f64, f64)]| median(t.iter().map(|x| x.0).collect());
    let bound = |t: &[(f64, f64)]| median(t.iter().map(|x| x.1).collect());
    println!(
        "scale ({rate}): median of {ROUNDS} rounds, {} pods: created in {:.1} s with the policy, {:.1} s without ({:.2}x); bound in {:.1} s with, {:.1} s without ({:.2}x)",
        SLICES * HOSTS,
        created(&with),
        created(&without),
        created(&with) / created(&without),
        bound(&with),
        bound(&without),
        bound(&with) / bound(&without),
    );
    Ok(())
}
