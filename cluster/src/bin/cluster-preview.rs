//! make cluster-preview FILE=my.yaml [SETTINGS=settings.yaml]: applies the file's JobSets and
//! Jobs (and Services) to a fresh control plane with fake nodes provisioned to fit them, waits
//! within a bound until every pod the objects will make exists and is bound, and prints one
//! JSON report on stdout (progress goes to stderr). It exits 0 when the bound runs out too,
//! with `"complete": false` and `nodeName: null` where a pod is unbound. The policies are the
//! recommended pair (mutating and validating), both with the settings given.
//!
//! With `--queue-flavor ACCELERATOR:TOPOLOGY[,…]` the control plane runs Kueue, and the file's
//! queued objects go through it: a TPU flavour of each shape, in that order in one resource
//! group of the ClusterQueue, each with quota for everything and fake nodes to match, and a CPU
//! flavour. `--queue-default` adds a LocalQueue `default` to every namespace the file uses, so
//! that Kueue queues what carries no queue label there.
//!
//! usage: cluster-preview FILE [--settings FILE] [--queue-flavor ACCELERATOR:TOPOLOGY[,…]] [--queue-default] [--wait SECONDS]
use anyhow::{bail, Context, Result};
use multislice_cluster::agent::NodeAgent;
use multislice_cluster::{fleet, kueue, run, Binaries, ControlPlane, Options};
use multislice_host::preview::yaml_documents;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

struct Args {
    file: String,
    settings: Option<Value>,
    queue_flavor: Option<String>,
    queue_default: bool,
    wait: Duration,
}

fn parse_args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let mut args = Args {
        file: String::new(),
        settings: None,
        queue_flavor: None,
        queue_default: false,
        wait: Duration::from_secs(180),
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--settings" => {
                let path = it.next().context("--settings needs a file")?;
                if !path.is_empty() {
                    let text = std::fs::read_to_string(&path)
                        .with_context(|| format!("cannot read {path}"))?;
                    args.settings = Some(serde_yaml::from_str(&text)?);
                }
            }
            "--queue-flavor" => {
                let flavor = it
                    .next()
                    .context("--queue-flavor needs ACCELERATOR:TOPOLOGY[,…]")?;
                if !flavor.is_empty() {
                    args.queue_flavor = Some(flavor);
                }
            }
            "--queue-default" => args.queue_default = true,
            "--wait" => args.wait = Duration::from_secs(it.next().context("--wait")?.parse()?),
            _ if args.file.is_empty() => args.file = a,
            other => bail!("unexpected argument {other}"),
        }
    }
    if args.file.is_empty() {
        bail!("usage: cluster-preview FILE [--settings FILE] [--queue-flavor ACCELERATOR:TOPOLOGY[,…]] [--queue-default] [--wait SECONDS]");
    }
    if args.queue_default && args.queue_flavor.is_none() {
        bail!("--queue-default (QUEUE_DEFAULT=1) needs --queue-flavor (QUEUE_FLAVOR): Kueue runs only then");
    }
    Ok(args)
}

async fn preview(args: Args) -> Result<Value> {
    let flavours = args
        .queue_flavor
        .as_deref()
        .map(kueue::preview_flavours)
        .transpose()?
        .unwrap_or_default();
    let queueing = !flavours.is_empty();
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file))?;
    let objects: Vec<Value> = yaml_documents(&text)?
        .into_iter()
        .filter(|d| d.is_object())
        .collect();
    let binaries = Binaries::build()?;
    let plane = ControlPlane::start(
        &binaries,
        Options {
            settings: args.settings,
            lifetime: args.wait + Duration::from_secs(300),
            webhook: true,
            kueue: queueing,
            ..Options::default()
        },
    )
    .await?;
    let _agent = NodeAgent::start(plane.cluster.clone(), plane.remaining());
    // A queued object gets nodes of each flavour's shape, wherever Kueue will start it.
    let (queued, unqueued): (Vec<Value>, Vec<Value>) = objects
        .iter()
        .cloned()
        .partition(|o| queueing && (kueue::queue_name(o).is_some() || args.queue_default));
    let mut pools = fleet::pools_for(&unqueued, "pool-");
    for (i, flavour) in flavours.iter().enumerate() {
        let started: Vec<Value> = queued
            .iter()
            .map(|o| kueue::as_started_in(o, &flavour.node_labels))
            .collect();
        pools.extend(fleet::pools_for(&started, &format!("pool-f{i}-")));
    }
    let nodes = fleet::provision(&plane.cluster, &pools).await?;
    eprintln!("{nodes} fake nodes in {} pools", pools.len());
    if queueing {
        kueue::queue_into(&plane.cluster, &objects, &flavours, args.queue_default).await?;
    }
    let submitted = run::submit(&plane.cluster, &objects).await?;
    let deadline = Instant::now() + args.wait;
    let mut counted = Vec::new();
    for s in &submitted {
        let object = objects
            .iter()
            .find(|o| o["kind"] == json!(s.kind) && names_match(o, &s.name))
            .cloned()
            .unwrap_or_default();
        let mut expected = run::expected_pods(&object);
        // Queued: by its own label, or by the namespace's default LocalQueue.
        if queueing && s.allowed() && kueue::queue_name(&s.created.body).is_some() {
            eprintln!("waiting for Kueue to start {} {}", s.kind, s.name);
            if !started_by_kueue(&plane, s, deadline).await? {
                expected = 0;
            }
        }
        counted.push((s.clone(), expected));
    }
    eprintln!("waiting up to {} s for the pods", args.wait.as_secs());
    let left = deadline.saturating_duration_since(Instant::now());
    let (complete, pods) = run::wait_bound(&plane.cluster, &counted, left).await?;
    let reviews = plane.reviews()?;
    let mut reports = Vec::new();
    for s in &submitted {
        let mut report = run::object_report(s);
        if queueing
            && s.kind == "JobSet"
            && s.created.body["metadata"]["labels"][kueue::QUEUE_LABEL].is_string()
        {
            report["kueue"] = queue_report(&plane, s, &reviews).await?;
        }
        reports.push(report);
    }
    Ok(json!({
        "complete": complete,
        "objects": reports,
        "pods": pods.iter().flatten().map(run::pod_report).collect::<Vec<_>>(),
    }))
}

/// Waits until Kueue has unsuspended a queued JobSet (true), or our webhook has refused the
/// UPDATE that would (false; it makes no pods then), or the deadline passes (false).
async fn started_by_kueue(
    plane: &ControlPlane,
    s: &run::Submitted,
    deadline: Instant,
) -> Result<bool> {
    loop {
        let stored = plane
            .cluster
            .get(&s.created.body)
            .await?
            .unwrap_or_default();
        if stored["spec"]["suspend"] == json!(false) {
            return Ok(true);
        }
        let reviews = plane.reviews()?;
        let refused = kueue::unsuspending_reviews(&reviews, &s.namespace, &s.name)
            .iter()
            .any(|r| r["allowed"] == json!(false));
        if refused || Instant::now() > deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What Kueue did with a queued JobSet: its Workload's conditions, and our verdicts on the
/// UPDATEs that would unsuspend it (the only place, besides Kueue's log, a refusal shows).
async fn queue_report(
    plane: &ControlPlane,
    s: &run::Submitted,
    reviews: &[Value],
) -> Result<Value> {
    let workloads = kueue::workloads_of(&plane.cluster, s).await?;
    let verdicts: Vec<Value> = kueue::unsuspending_reviews(reviews, &s.namespace, &s.name)
        .iter()
        .map(|r| json!({"allowed": r["allowed"], "message": r["message"]}))
        .collect();
    Ok(json!({
        "queue": s.created.body["metadata"]["labels"][kueue::QUEUE_LABEL],
        "workloads": workloads.iter().map(|w| json!({
            "name": w["metadata"]["name"],
            "conditions": kueue::conditions_text(w),
            "flavours": w["status"]["admission"]["podSetAssignments"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| json!({"podSet": a["name"], "flavors": a["flavors"]}))
                .collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "unsuspendingUpdates": verdicts,
    }))
}

fn names_match(object: &Value, name: &str) -> bool {
    match (
        object["metadata"]["name"].as_str(),
        object["metadata"]["generateName"].as_str(),
    ) {
        (Some(n), _) => n == name,
        (None, Some(prefix)) => name.starts_with(prefix),
        _ => false,
    }
}

fn main() -> std::process::ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = parse_args().and_then(|a| runtime.block_on(preview(a)));
    match result {
        Ok(report) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&report).unwrap_or_default()
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cluster-preview: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
