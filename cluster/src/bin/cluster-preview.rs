//! make cluster-preview FILE=my.yaml [SETTINGS=settings.yaml]: applies the file's JobSets and
//! Jobs (and Services) to a fresh control plane with fake nodes provisioned to fit them, waits
//! within a bound until every pod the objects will make exists and is bound, and prints one
//! JSON report on stdout (progress goes to stderr). It exits 0 when the bound runs out too,
//! with `"complete": false` and `nodeName: null` where a pod is unbound.
//!
//! usage: cluster-preview FILE [--settings FILE] [--queue-flavor ACCELERATOR:TOPOLOGY] [--wait SECONDS]
use anyhow::{bail, Context, Result};
use multislice_cluster::agent::NodeAgent;
use multislice_cluster::{fleet, run, Binaries, ControlPlane, Options};
use multislice_host::preview::yaml_documents;
use serde_json::{json, Value};
use std::time::Duration;

struct Args {
    file: String,
    settings: Option<Value>,
    queue_flavor: Option<String>,
    wait: Duration,
}

fn parse_args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let mut args = Args {
        file: String::new(),
        settings: None,
        queue_flavor: None,
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
                    .context("--queue-flavor needs ACCELERATOR:TOPOLOGY")?;
                if !flavor.is_empty() {
                    args.queue_flavor = Some(flavor);
                }
            }
            "--wait" => args.wait = Duration::from_secs(it.next().context("--wait")?.parse()?),
            _ if args.file.is_empty() => args.file = a,
            other => bail!("unexpected argument {other}"),
        }
    }
    if args.file.is_empty() {
        bail!("usage: cluster-preview FILE [--settings FILE] [--queue-flavor ACCELERATOR:TOPOLOGY] [--wait SECONDS]");
    }
    Ok(args)
}

async fn preview(args: Args) -> Result<Value> {
    if args.queue_flavor.is_some() {
        bail!("QUEUE_FLAVOR is not supported yet: Kueue is not part of the control plane yet");
    }
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
            kueue: false,
        },
    )
    .await?;
    let _agent = NodeAgent::start(plane.cluster.clone(), plane.remaining());
    let pools = fleet::pools_for(&objects, "pool-");
    let nodes = fleet::provision(&plane.cluster, &pools).await?;
    eprintln!("{nodes} fake nodes in {} pools", pools.len());
    let submitted = run::submit(&plane.cluster, &objects).await?;
    let counted: Vec<(run::Submitted, u64)> = submitted
        .iter()
        .map(|s| {
            let object = objects
                .iter()
                .find(|o| o["kind"] == json!(s.kind) && names_match(o, &s.name))
                .cloned()
                .unwrap_or_default();
            (s.clone(), run::expected_pods(&object))
        })
        .collect();
    eprintln!("waiting up to {} s for the pods", args.wait.as_secs());
    let (complete, pods) = run::wait_bound(&plane.cluster, &counted, args.wait).await?;
    Ok(json!({
        "complete": complete,
        "objects": submitted.iter().map(run::object_report).collect::<Vec<_>>(),
        "pods": pods.iter().flatten().map(run::pod_report).collect::<Vec<_>>(),
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
