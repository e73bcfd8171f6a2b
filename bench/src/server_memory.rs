//! make bench-server's memory table: the resident memory of one policy-server serving the
//! recommended pair (examples/ rendered, each half with its settings, as the v1.35 controller
//! writes `policies.yml`), read from `/proc/<pid>/status` (VmRSS, and VmHWM, its peak since
//! start): once ready (and how long that took), after ordinary traffic (TPU pods and small
//! JobSet CREATEs), and after JobSet CREATEs of growing size, 4 at a time (2 to each half).
//! docs/operations.md sizes the PolicyServer's memory limit from these figures.
use crate::workloads::{create, jobset_of_size, pod_request, tpu_jobset, tpu_pod_with_containers};
use anyhow::{anyhow, bail, Context, Result};
use multislice_host::kustomization::render;
use multislice_host::policy_server_client::{PolicyServer, ServedPolicy};
use multislice_host::review::ReviewResponse;
use multislice_host::workspace_root;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// How long each load runs, in seconds.
pub struct Durations {
    pub ordinary: u32,
    pub large: u32,
}

/// policy-server's memory at one moment, in KiB.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub rss: u64,
    pub hwm: u64,
}

/// VmRSS and VmHWM of a process.
pub fn memory(pid: u32) -> Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| anyhow!("no {name} in /proc/{pid}/status"))
    };
    Ok(Memory {
        rss: field("VmRSS:")?,
        hwm: field("VmHWM:")?,
    })
}

/// `1.23ms`, `456.00us`, `1.01s` (wrk's units) -> milliseconds.
pub fn wrk_ms(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().ok()?;
    match unit {
        "us" => Some(n / 1000.0),
        "ms" => Some(n),
        "s" => Some(n * 1000.0),
        "m" => Some(n * 60_000.0),
        _ => None,
    }
}

/// One row of the table.
pub struct Row {
    pub workers: usize,
    pub when: String,
    pub memory: Memory,
    /// wrk's p99 latency over the load, if there was one: at 2 s an evaluation is cut.
    pub p99_ms: Option<f64>,
}

/// The pair as policy-server serves it: (id, policy).
fn pair(module: &Path) -> Result<Vec<ServedPolicy>> {
    render(&workspace_root().join("examples"))?
        .iter()
        .map(|p| {
            let id = p["metadata"]["name"]
                .as_str()
                .context("a policy without a name")?;
            ServedPolicy::cluster_wide(
                id,
                module.to_path_buf(),
                p["spec"]["settings"].clone(),
                p["spec"]["mutating"] == Value::Bool(true),
            )
        })
        .collect()
}

/// A wrk script that POSTs the AdmissionReview of `request`, written into `dir`.
pub fn script(dir: &Path, name: &str, request: &Value) -> Result<PathBuf> {
    let body = dir.join(format!("{name}.json"));
    std::fs::write(&body, PolicyServer::review_body(request))?;
    let script = dir.join(format!("{name}.lua"));
    std::fs::write(
        &script,
        format!(
            "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n\
             local f = assert(io.open({:?}, \"rb\"))\nwrk.body = f:read(\"*a\")\nf:close()\n",
            body.display().to_string()
        ),
    )?;
    Ok(script)
}

fn wrk(url: &str, script: &Path, seconds: u32, connections: u32) -> Result<Child> {
    Command::new("wrk")
        .args(["-t1", &format!("-c{connections}"), &format!("-d{seconds}s")])
        .arg("--latency")
        .arg("-s")
        .arg(script)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run wrk (make e2e-deps installs it)")
}

/// Waits for wrk runs started together; the worst p99 of them.
fn finish(runs: Vec<Child>) -> Result<f64> {
    let mut worst: f64 = 0.0;
    for run in runs {
        let out = run.wait_with_output()?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if !out.status.success() || text.contains("Non-2xx or 3xx responses") {
            bail!("wrk: {text}{}", String::from_utf8_lossy(&out.stderr));
        }
        let p99 = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("99%"))
            .and_then(|v| wrk_ms(v.trim()))
            .ok_or_else(|| anyhow!("no p99 in wrk's output:\n{text}"))?;
        worst = worst.max(p99);
    }
    Ok(worst)
}

/// Each half accepts the request, in time (not cut at the deadline).
fn accepted(server: &PolicyServer, ids: &[&str], request: &Value, what: &str) -> Result<()> {
    for id in ids {
        let answer = ReviewResponse::from_response(&server.review(id, request)?)?;
        if !answer.allowed {
            bail!("{what}: {id} answered {:?}", answer.message);
        }
    }
    Ok(())
}

/// Starts policy-server with the pair and `workers`; the row of its start.
fn start(module: &Path, workers: usize) -> Result<(PolicyServer, Row)> {
    let started = Instant::now();
    let server = PolicyServer::start(&pair(module)?, Some(workers))?;
    let seconds = started.elapsed().as_secs_f64();
    let row = Row {
        workers,
        when: format!("ready, {seconds:.1} s after start"),
        memory: memory(server.pid())?,
        p99_ms: None,
    };
    Ok((server, row))
}

/// The sizes of the large JobSets, in bytes of the review.
const LARGE: [(&str, usize); 3] = [
    ("0.1 MB", 100_000),
    ("0.5 MB", 500_000),
    ("2.0 MB", 2_000_000),
];
const MUTATE: &str = "jobset-multislice-mutate";
const VALIDATE: &str = "jobset-multislice-validate";

/// Every row: the start with 1, 2 and 4 workers; with 2, ordinary traffic then the large
/// reviews in growing size; with 4, the largest review again.
pub fn measure(module: &Path, dir: &Path, d: &Durations) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for workers in [1, 4] {
        rows.push(start(module, workers)?.1);
    }
    let (server, ready) = start(module, 2)?;
    rows.insert(1, ready);
    let halves = [MUTATE, VALIDATE];

    let pod = pod_request(&tpu_pod_with_containers(1)?);
    let small = create(&tpu_jobset()?);
    accepted(&server, &[MUTATE], &pod, "a TPU pod")?;
    accepted(&server, &halves, &small, "a JobSet CREATE")?;
    let pods = script(dir, "memory-pod", &pod)?;
    let creates = script(dir, "memory-create", &small)?;
    let p99 = finish(vec![
        wrk(&server.url(MUTATE), &pods, d.ordinary, 2)?,
        wrk(&server.url(VALIDATE), &creates, d.ordinary, 1)?,
        wrk(&server.url(MUTATE), &creates, d.ordinary, 1)?,
    ])?;
    rows.push(Row {
        workers: 2,
        when: format!("after {} s of TPU pods and JobSet CREATEs", d.ordinary),
        memory: memory(server.pid())?,
        p99_ms: Some(p99),
    });
    for size in LARGE {
        rows.push(large(&server, 2, dir, size, d.large)?);
    }
    drop(server);
    let (server, _) = start(module, 4)?;
    rows.push(large(&server, 4, dir, LARGE[2], d.large)?);
    Ok(rows)
}

/// JobSet CREATEs of `(label, bytes)`, 2 at a time to each half.
fn large(
    server: &PolicyServer,
    workers: usize,
    dir: &Path,
    (label, bytes): (&str, usize),
    seconds: u32,
) -> Result<Row> {
    let request = create(&jobset_of_size(bytes)?);
    let size = PolicyServer::review_body(&request).len();
    accepted(server, &[MUTATE, VALIDATE], &request, label)?;
    let script = script(dir, &format!("memory-large-{bytes}"), &request)?;
    let p99 = finish(vec![
        wrk(&server.url(MUTATE), &script, seconds, 2)?,
        wrk(&server.url(VALIDATE), &script, seconds, 2)?,
    ])?;
    accepted(server, &[MUTATE, VALIDATE], &request, label)?;
    Ok(Row {
        workers,
        when: format!("after {seconds} s of JobSet CREATEs of {label} ({size} bytes), 4 at a time"),
        memory: memory(server.pid())?,
        p99_ms: Some(p99),
    })
}

/// The table, in markdown, and what a busy worker adds at the largest review.
pub fn print(rows: &[Row]) {
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "\n## Memory\n\npolicy-server serving the pair (examples/ rendered), VmRSS and VmHWM (the \
         peak since start) from /proc/<pid>/status.\n"
    );
    println!("| workers | when | VmRSS MiB | VmHWM MiB | p99 ms |");
    println!("|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {:.0} | {:.0} | {} |",
            r.workers,
            r.when,
            mib(r.memory.rss),
            mib(r.memory.hwm),
            r.p99_ms.map_or("-".into(), |p| format!("{p:.0}"))
        );
    }
    let base = rows.iter().find(|r| r.workers == 2).map(|r| r.memory.rss);
    let peak = rows
        .iter()
        .rev()
        .find(|r| r.workers == 2)
        .map(|r| r.memory.hwm);
    if let (Some(base), Some(peak)) = (base, peak) {
        println!(
            "\nAt the largest review, each of the 2 busy workers adds about {:.0} MiB to the \
             ready server's.",
            mib(peak.saturating_sub(base)) / 2.0
        );
    }
}
