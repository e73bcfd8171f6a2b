//! Every shape that must run, for real (fixtures.rs says which), applied to the control plane
//! one at a time on fake nodes made to fit it; each object's verdict, warnings and real pods
//! checked (pods.rs, placement.rs).
use crate::common::Failures;
use crate::fixtures::{shapes_that_must_run, Shape};
use crate::placement::{check_exclusive_placement, check_nothing_lost_jobset, check_simulation};
use crate::pods::{check_job_pods, check_jobset_pods, is_opted_in_job};
use multislice_cluster::agent::NodeAgent;
use multislice_cluster::fleet::{self, Pool};
use multislice_cluster::policies::{self, Variant};
use multislice_cluster::run::{self, Submitted};
use multislice_cluster::ControlPlane;
use multislice_gen::oracle;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long the pods of one batch of shapes may take to exist and be bound.
pub(crate) const BOUND: Duration = Duration::from_secs(240);

/// The same object's CREATE as the fast tests send it, as each of our policies received it (the
/// mutating ones first, in the order the API server called them): what they received, and the
/// warnings they answered, must reach the user.
pub(crate) fn reviews_of<'a>(
    reviews: &'a [Value],
    kind: &str,
    namespace: &str,
    name: &str,
) -> Vec<&'a Value> {
    reviews
        .iter()
        .filter(|r| {
            r["kind"] == kind
                && r["operation"] == "CREATE"
                && r["namespace"] == namespace
                && (r["object"]["metadata"]["name"] == name
                    || r["name"] == name
                    || r["object"]["metadata"]["generateName"]
                        .as_str()
                        .is_some_and(|prefix| name.starts_with(prefix)))
        })
        .collect()
}

/// What ran: each case's failures, and each shape's real pods (by shape label).
pub(crate) type ShapesRun = (
    Vec<(String, anyhow::Result<Failures>)>,
    BTreeMap<String, Vec<Value>>,
);

pub(crate) async fn shapes_run(
    plane: &mut ControlPlane,
    agent: &NodeAgent,
) -> anyhow::Result<ShapesRun> {
    let filter = std::env::var("CLUSTER_SHAPES").unwrap_or_default();
    let shapes: Vec<Shape> = shapes_that_must_run()?
        .into_iter()
        .filter(|s| filter.split(',').any(|f| s.label.contains(f)))
        .collect();
    // Each shape's namespace, labelled for the single policy where it rests on a bare queue
    // label; then a moment for the API server's namespace informer to have the labels.
    for s in &shapes {
        let single = s.objects.iter().any(rests_on_bare_label);
        let Some(settings) = &s.settings else {
            policies::namespace(
                &plane.cluster,
                &s.namespace,
                single.then_some(policies::SINGLE),
            )
            .await?;
            continue;
        };
        // Its own policies, with its settings, for it alone; the control plane's see none
        // of it.
        policies::namespace(&plane.cluster, &s.namespace, Some(policies::NONE)).await?;
        let variant = if single {
            Variant::Single
        } else {
            Variant::Pair
        };
        let scope = [
            json!({"key": "kubernetes.io/metadata.name", "operator": "In",
                            "values": [s.namespace]}),
        ];
        plane
            .install_variant(variant, Some(&s.namespace), settings, &scope)
            .await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut results = Vec::new();
    let mut by_shape = BTreeMap::new();
    // A few shapes at a time: JobSet's exclusive placement makes each follower pod wait for its
    // leader, and the Job controller backs off; a small batch keeps that short on 2 cores.
    for (b, batch) in shapes.chunks(BATCH).enumerate() {
        let (r, pods) = run_batch(plane, agent, batch, b).await?;
        results.extend(r);
        by_shape.extend(pods);
    }
    Ok((results, by_shape))
}

/// Shapes run together, then removed with their nodes. One at a time: a shape's pods that
/// select no node pool of their own (no exclusive placement) take any node that fits, and
/// would take another shape's.
pub(crate) const BATCH: usize = 1;

pub(crate) async fn run_batch(
    plane: &ControlPlane,
    agent: &NodeAgent,
    shapes: &[Shape],
    b: usize,
) -> anyhow::Result<ShapesRun> {
    // A shape that rests on a bare queue label leaves its slice shape to a queue: the policy
    // limits it to the shapes where it fits (a required node affinity, docs/contributing/spec.md §4.7), and its
    // nodes are made for the object as stored, once it is.
    let late = |s: &Shape| s.objects.iter().any(rests_on_bare_label);
    let mut pools: Vec<Pool> = shapes
        .iter()
        .enumerate()
        .filter(|(_, s)| !late(s))
        .flat_map(|(i, s)| fleet::pools_for(&s.objects, &format!("b{b}s{i}-")))
        .collect();
    let mut nodes = fleet::provision(&plane.cluster, &pools).await?;
    let mut submitted: Vec<Vec<(Submitted, u64)>> = Vec::new();
    for (i, s) in shapes.iter().enumerate() {
        let mut with_counts = Vec::new();
        // An initializer that others wait for runs to completion, as its program would.
        for object in s.objects.iter().filter(|o| o["kind"] == "JobSet") {
            let rjobs = object["spec"]["replicatedJobs"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for i in (0..rjobs.len()).filter(|&i| oracle::runs_first(&rjobs, i)) {
                agent.succeed_replicated_job(
                    &s.namespace,
                    object["metadata"]["name"].as_str().unwrap_or_default(),
                    rjobs[i]["name"].as_str().unwrap_or_default(),
                );
            }
        }
        let subs = run::submit(&plane.cluster, &s.objects).await?;
        if late(s) {
            let stored: Vec<Value> = subs
                .iter()
                .filter(|sub| sub.allowed())
                .map(|sub| sub.created.body.clone())
                .collect();
            let more = fleet::pools_for(&stored, &format!("b{b}s{i}-"));
            nodes += fleet::provision(&plane.cluster, &more).await?;
            pools.extend(more);
        }
        for sub in subs {
            let object = s
                .objects
                .iter()
                .find(|o| o["kind"] == json!(sub.kind))
                .cloned()
                .unwrap_or_default();
            let mut n = run::expected_pods(&object);
            if object["spec"]["suspend"] == json!(true) && sub.allowed() {
                // What Kueue does once it admits the JobSet: unsuspend it. Without node
                // selectors that UPDATE is refused by T3 (tested in the Kueue cases), so such a
                // JobSet stays suspended and makes no pods.
                if has_tpu_selectors(&object) {
                    plane
                        .cluster
                        .patch_merge(&sub.created.body, &json!({"spec": {"suspend": false}}))
                        .await?;
                } else {
                    n = 0;
                }
            }
            with_counts.push((sub, n));
        }
        submitted.push(with_counts);
    }
    let flat: Vec<(Submitted, u64)> = submitted.iter().flatten().cloned().collect();
    let started = Instant::now();
    let (complete, pods) = run::wait_bound(&plane.cluster, &flat, BOUND).await?;
    eprintln!(
        "batch {b}: {} shapes, {nodes} nodes, {} pods {} in {:.0} s",
        shapes.len(),
        pods.iter().map(Vec::len).sum::<usize>(),
        if complete {
            "all bound"
        } else {
            "NOT all bound"
        },
        started.elapsed().as_secs_f64()
    );
    let reviews = plane.reviews()?;
    let mut results = Vec::new();
    let mut by_shape = BTreeMap::new();
    let mut k = 0;
    for (shape, subs) in shapes.iter().zip(&submitted) {
        let mut f = Failures::default();
        let mut shape_pods = Vec::new();
        for (sub, expected) in subs {
            let object_pods = &pods[k];
            k += 1;
            let made = Made {
                sub,
                expected: *expected,
                pods: object_pods,
            };
            check_submitted(&mut f, plane, shape, &made, &reviews).await;
            shape_pods.extend(object_pods.iter().cloned());
        }
        results.push((format!("runs for real: {}", shape.label), Ok(f)));
        by_shape.insert(shape.label.clone(), shape_pods);
    }
    for (sub, _) in flat.iter().filter(|(s, _)| s.allowed()) {
        plane.cluster.delete(&object_named(sub)).await?;
    }
    fleet::remove(&plane.cluster, &pools).await?;
    Ok((results, by_shape))
}

/// Whether every TPU replicated job selects its accelerator and topology.
pub(crate) fn has_tpu_selectors(jobset: &Value) -> bool {
    jobset["spec"]["replicatedJobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| oracle::is_tpu(r))
        .all(|r| {
            let selector = &r["template"]["spec"]["template"]["spec"]["nodeSelector"];
            selector["cloud.google.com/gke-tpu-topology"].is_string()
        })
}

/// Whether an object's verdict rests on a queue label that no Kueue acts on here: it carries
/// one, is not suspended, and a TPU replicated job leaves T3's selection to a flavour. The
/// single policy (role `both`) takes the label for Kueue's suspend to come; the pair judges
/// the object as stored, unsuspended (the bare-label case). Without Kueue on this control
/// plane, such an object runs, and the rule table (role `both`) judges it, in a namespace of
/// the single policy.
pub(crate) fn rests_on_bare_label(object: &Value) -> bool {
    let queued = ["labels", "annotations"]
        .iter()
        .any(|m| object["metadata"][m]["kueue.x-k8s.io/queue-name"].is_string());
    queued
        && object["spec"]["suspend"] != json!(true)
        && object["spec"]["replicatedJobs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| oracle::is_tpu(r))
            .any(|r| {
                let pod = &r["template"]["spec"]["template"];
                let selector = &pod["spec"]["nodeSelector"];
                !(selector["cloud.google.com/gke-tpu-accelerator"].is_string()
                    && (selector["cloud.google.com/gke-tpu-topology"].is_string()
                        || pod["metadata"]["annotations"]
                            ["cloud.google.com/gke-tpu-slice-topology"]
                            .is_string()))
            })
}

/// One object the case submitted, with the pods it was expected to make and those it made.
pub(crate) struct Made<'a> {
    sub: &'a Submitted,
    expected: u64,
    pods: &'a [Value],
}

pub(crate) async fn check_submitted(
    f: &mut Failures,
    plane: &ControlPlane,
    shape: &Shape,
    made: &Made<'_>,
    reviews: &[Value],
) {
    let Made {
        sub,
        expected,
        pods,
    } = *made;
    let what = format!("{} {}", sub.kind, sub.name);
    f.check(sub.allowed(), || {
        format!("{what}: refused: {:?}", sub.created.message())
    });
    if sub.kind == "Service" {
        return;
    }
    // The warnings our policies answered reach the client as Warning headers.
    let created = reviews_of(reviews, &sub.kind, &shape.namespace, &sub.name);
    if !created.is_empty() {
        check_warnings_reached(f, &what, &created, sub);
    } else if sub.kind == "JobSet" || is_opted_in_job(&sub.created.body) {
        f.0.push(format!("{what}: our webhook never saw its CREATE"));
    }
    f.eq(pods.len() as u64, expected, &format!("{what}: pods"));
    for p in pods {
        f.check(p["spec"]["nodeName"].is_string(), || {
            let why = p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "PodScheduled")
                .and_then(|c| c["message"].as_str())
                .unwrap_or("no scheduling condition yet");
            format!("{what}: pod {} is not bound: {why}", p["metadata"]["name"])
        });
    }
    let template = shape
        .objects
        .iter()
        .find(|o| o["kind"] == json!(sub.kind))
        .cloned()
        .unwrap_or_default();
    match sub.kind.as_str() {
        "JobSet" => {
            let stored = plane
                .cluster
                .get(&sub.created.body)
                .await
                .ok()
                .flatten()
                .unwrap_or(sub.created.body.clone());
            check_jobset_pods(f, &what, &stored, pods);
            check_nothing_lost_jobset(f, &what, &template, pods);
            check_exclusive_placement(f, &what, &stored, pods, &plane.cluster).await;
            if expected > 0 {
                check_simulation(f, &what, &stored, reviews, &shape.namespace);
            }
        }
        "Job" => check_job_pods(f, &what, &sub.created.body, pods),
        _ => {}
    }
}

/// The warnings our policies answered for a CREATE, in the order they were called, are what
/// the client read from the `Warning` headers (the API server sends a text once).
pub(crate) fn check_warnings_reached(
    f: &mut Failures,
    what: &str,
    reviews: &[&Value],
    sub: &Submitted,
) {
    let mut answered: Vec<String> = Vec::new();
    for review in reviews {
        let warnings: Vec<String> =
            serde_json::from_value(review["warnings"].clone()).unwrap_or_default();
        for w in warnings {
            if !answered.contains(&w) {
                answered.push(w);
            }
        }
    }
    f.eq(
        &sub.created.warnings,
        &answered,
        &format!("{what}: Warning headers"),
    );
}

pub(crate) fn object_named(sub: &Submitted) -> Value {
    json!({
        "apiVersion": sub.created.body["apiVersion"], "kind": sub.kind,
        "metadata": {"name": sub.name, "namespace": sub.namespace},
    })
}
