//! make bench-server: the policy inside one real policy-server, loaded with wrk, beside each
//! case's floor (a module holding the policy's own answer, [`server_floor`]) and, with
//! `--against`, beside another build of the policy (`make bench-server AGAINST=<commit>`).
//! For each it prints requests per second, p50 and p99 latency, and policy-server's CPU per
//! request, read from /proc: what an operator pays for the policy. Medians of rounds that take
//! the modules in turn, so that the machine's drift falls on all of them. Then policy-server's
//! resident memory serving the pair ([`server_memory`]), which docs/operations.md sizes from.
//!
//! usage: bench-server [--quick] [--against <annotated module>]
//!
//! kwctl and policy-server are `KWCTL` and `POLICY_SERVER`, else on PATH, else in
//! ../shared/tools; `make bench-server` skips this, with one line, where either is missing.
use anyhow::{anyhow, bail, Context, Result};
use multislice_bench::server_floor::{self, Floors};
use multislice_bench::server_memory::{self, wrk_ms, Durations};
use multislice_bench::workloads::*;
use multislice_host::policy_server_client::{find_on_path, PolicyServer, ServedPolicy};
use multislice_host::review::ReviewResponse;
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

struct Plan {
    rounds: usize,
    seconds: u32,
    connections: u32,
}

struct Case {
    name: &'static str,
    request: Value,
    script: PathBuf,
    body_bytes: usize,
}

/// One wrk run against one module.
#[derive(Clone, Copy)]
struct Run {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// policy-server's CPU time (user and system, all threads) over the run, per request.
    cpu_us: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A process's CPU time so far, in clock ticks (fields 14 and 15 of /proc/<pid>/stat).
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces; the fields after it are plain.
    let after_name = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow!("unreadable /proc/{pid}/stat"))?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name, field 3 (state) is index 0: utime (14) is index 11, stime (15) index 12.
    let tick = |i: usize| -> Result<u64> {
        Ok(fields
            .get(i)
            .ok_or_else(|| anyhow!("short /proc/{pid}/stat"))?
            .parse()?)
    };
    Ok(tick(11)? + tick(12)?)
}

fn ticks_per_second() -> Result<f64> {
    let out = Command::new("getconf").arg("CLK_TCK").output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}

fn latency(text: &str, percentile: &str) -> Result<f64> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(percentile))
        .and_then(|v| wrk_ms(v.trim()))
        .ok_or_else(|| anyhow!("no {percentile} latency in wrk's output:\n{text}"))
}

fn wrk(plan: &Plan, case: &Case, url: &str, server: &PolicyServer, hz: f64) -> Result<Run> {
    let before = cpu_ticks(server.pid())?;
    let out = Command::new("wrk")
        .args(["-t1", &format!("-c{}", plan.connections)])
        .arg(format!("-d{}s", plan.seconds))
        .arg("--latency")
        .arg("-s")
        .arg(&case.script)
        .arg(url)
        .output()
        .context("cannot run wrk (make e2e-deps installs it)")?;
    let ticks = cpu_ticks(server.pid())? - before;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        bail!("wrk failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    }
    if text.contains("Non-2xx or 3xx responses") {
        bail!("{}: the server answered with errors:\n{text}", case.name);
    }
    let requests: f64 = text
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .and_then(|(n, _)| n.trim().parse().ok())
        .ok_or_else(|| anyhow!("no request count in wrk's output:\n{text}"))?;
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow!("no Requests/sec in wrk's output:\n{text}"))?;
    Ok(Run {
        rps,
        p50_ms: latency(&text, "50%")?,
        p99_ms: latency(&text, "99%")?,
        cpu_us: ticks as f64 / hz * 1e6 / requests.max(1.0),
    })
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let against = args
        .iter()
        .position(|a| a == "--against")
        .map(|i| {
            args.get(i + 1)
                .map(PathBuf::from)
                .ok_or_else(|| anyhow!("--against takes an annotated module"))
        })
        .transpose()?;
    let plan = if quick {
        Plan {
            rounds: 3,
            seconds: 1,
            connections: 4,
        }
    } else {
        Plan {
            rounds: 5,
            seconds: 3,
            connections: 4,
        }
    };
    // Fail before policy-server starts, not after its first figures.
    if find_on_path("wrk").is_none() {
        bail!("wrk is not installed: make e2e-deps");
    }
    let hz = ticks_per_second()?;
    let root = workspace_root();
    let dir = std::env::temp_dir().join(format!("jsp-bench-server-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    let not_jobset_pod = multislice_host::fixtures::load_json(
        &multislice_host::fixtures::pod_request_path("not-a-jobset-pod"),
    )?;
    let named = [
        ("plain pod (not a JobSet's)", not_jobset_pod),
        ("TPU JobSet pod", pod_request(&tpu_pod_with_containers(1)?)),
        ("JobSet CREATE, 1 rjob × 4 slices", create(&tpu_jobset()?)),
        ("opted-in Job pod", pod_request(&job_pod("jax-gpu-4")?)),
        ("opted-in Job CREATE", job_create("jax-gpu-4")?),
        ("JobSet CREATE, 64 rjobs", create(&jobset_with_rjobs(64)?)),
    ];
    let floors = Floors::new(&dir)?;
    let mut cases = Vec::new();
    let served =
        |id: &str, module: PathBuf| ServedPolicy::cluster_wide(id, module, json!({}), true);
    let mut policies = vec![served("policy", root.join("annotated-policy.wasm"))?];
    if let Some(module) = &against {
        policies.push(served("against", module.clone())?);
    }
    for (i, (name, request)) in named.into_iter().enumerate() {
        let body = PolicyServer::review_body(&request);
        let script = server_memory::script(&dir, &format!("case-{i}"), &request)?;
        policies.push(served(
            &server_floor::id(i),
            floors.annotated(i, &request)?,
        )?);
        cases.push(Case {
            name,
            request,
            script,
            body_bytes: body.len(),
        });
    }
    let server = PolicyServer::start(&policies, None)?;

    // Every module accepts every request, so the figures are of real evaluations, not errors;
    // and the floor's answer is the policy's, patch and all, so the server does the same work
    // on it.
    let ids: Vec<&str> = policies.iter().map(|p| p.id.as_str()).collect();
    for (i, case) in cases.iter().enumerate() {
        let floor = server_floor::id(i);
        let ours = ReviewResponse::from_response(&server.review("policy", &case.request)?)?;
        for id in ids
            .iter()
            .filter(|id| !id.starts_with("floor-"))
            .chain([&floor.as_str()])
        {
            let verdict = ReviewResponse::from_response(&server.review(id, &case.request)?)?;
            if !verdict.allowed {
                bail!("{} was rejected by {id}: {:?}", case.name, verdict.message);
            }
            if *id == floor && verdict != ours {
                bail!(
                    "{}: {floor} answered {verdict:?}, the policy {ours:?}; is \
                     annotated-policy.wasm older than policy.wasm (make annotated-policy.wasm)?",
                    case.name
                );
            }
        }
    }

    println!(
        "# policy-server benchmark{}\n",
        if quick {
            " (--quick: short runs, rough figures)"
        } else {
            ""
        }
    );
    println!(
        "wrk -t1 -c{} against one policy-server (default workers) on loopback; {} rounds of {} s \
         per module and case, the modules in turn; medians. CPU is policy-server's (user and \
         system, all threads, from /proc) over a run, per request. The floor holds the policy's \
         own answer and returns it without reading the request: what is left is policy-server's \
         own work, patch included.{}\n",
        plan.connections,
        plan.rounds,
        plan.seconds,
        against
            .as_ref()
            .map_or(String::new(), |m| format!(" `against` is {}.", m.display()))
    );
    println!("| case | review bytes | module | req/s | p50 ms | p99 ms | CPU µs/req | CPU / floor | req/s / against |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (i, case) in cases.iter().enumerate() {
        let mut modules = vec![("policy", server.url("policy"))];
        if against.is_some() {
            modules.push(("against", server.url("against")));
        }
        modules.push(("floor", server.url(&server_floor::id(i))));
        let mut runs: Vec<Vec<Run>> = vec![Vec::new(); modules.len()];
        for round in 0..plan.rounds {
            // Rotate which goes first, so none always runs on a warmer or calmer box.
            for k in 0..modules.len() {
                let m = (round + k) % modules.len();
                runs[m].push(wrk(&plan, case, &modules[m].1, &server, hz)?);
            }
        }
        let med = |m: usize, f: fn(&Run) -> f64| median(runs[m].iter().map(f).collect());
        let floor_cpu = med(modules.len() - 1, |r| r.cpu_us);
        let against_rps = against.is_some().then(|| med(1, |r| r.rps));
        for (m, (label, _)) in modules.iter().enumerate() {
            let rps = med(m, |r| r.rps);
            let cpu = med(m, |r| r.cpu_us);
            println!(
                "| {} | {} | {label} | {rps:.0} | {:.2} | {:.2} | {cpu:.0} | {} | {} |",
                if m == 0 { case.name } else { "" },
                if m == 0 {
                    case.body_bytes.to_string()
                } else {
                    String::new()
                },
                med(m, |r| r.p50_ms),
                med(m, |r| r.p99_ms),
                if *label == "floor" {
                    "-".to_string()
                } else {
                    format!("{:.2}×", cpu / floor_cpu)
                },
                match against_rps {
                    Some(a) if *label != "against" => format!("{:.2}×", rps / a),
                    _ => "-".to_string(),
                },
            );
        }
    }
    drop(server);
    let durations = if quick {
        Durations {
            ordinary: 2,
            large: 1,
        }
    } else {
        Durations {
            ordinary: 20,
            large: 5,
        }
    };
    let rows = server_memory::measure(&root.join("annotated-policy.wasm"), &dir, &durations)?;
    server_memory::print(&rows);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
