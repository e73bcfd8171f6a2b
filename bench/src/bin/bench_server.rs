//! make bench-server: the annotated policy, the accept-all baseline and, per case, the floor
//! (a module holding the policy's own answer, [`server_floor`]) in one policy-server, loaded
//! with wrk (short runs, the three in turn so that the box's noise falls on all), then the
//! same requests through `kwctl bench`. Prints markdown tables of medians and ratios.
//!
//! usage: bench-server [--quick]
//!
//! kwctl and policy-server are `KWCTL` and `POLICY_SERVER`, else on PATH, else in
//! ../shared/tools; `make bench-server` skips this, with one line, where either is missing.
// Shared with `make bench`; this binary uses only some of its requests.
#[allow(dead_code)]
use anyhow::{anyhow, bail, Context, Result};
use multislice_bench::server_floor::{self, Floors};
use multislice_bench::workloads::*;
use multislice_host::policy_server_client::{self, find_on_path, PolicyServer, ServedPolicy};
use multislice_host::review::ReviewResponse;
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

struct Plan {
    rounds: usize,
    seconds: u32,
    connections: u32,
    // kwctl takes whole seconds.
    kwctl_warm_up: &'static str,
    kwctl_measure: &'static str,
}

struct Case {
    name: &'static str,
    request: Value,
    body: PathBuf,
    script: PathBuf,
    /// The annotated floor module, served as [`server_floor::id`].
    floor: PathBuf,
    /// The least policy / floor throughput issue 30 asks for.
    target: Option<f64>,
}

/// The bar issue 30 sets the mutation paths: within 10 % of the floor's throughput.
const FLOOR_TARGET: f64 = 0.9;

/// One wrk run: requests per second and the median latency in ms.
#[derive(Clone, Copy)]
struct Run {
    rps: f64,
    p50_ms: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `1.23ms`, `456.00us`, `1.01s` (wrk, and kwctl bench with µ written as u) -> milliseconds.
fn parse_duration_ms(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().ok()?;
    match unit {
        "ns" => Some(n / 1_000_000.0),
        "us" => Some(n / 1000.0),
        "ms" => Some(n),
        "s" => Some(n * 1000.0),
        "m" => Some(n * 60_000.0),
        _ => None,
    }
}

fn wrk(plan: &Plan, case: &Case, url: &str) -> Result<Run> {
    let out = Command::new("wrk")
        .args(["-t1", &format!("-c{}", plan.connections)])
        .arg(format!("-d{}s", plan.seconds))
        .arg("--latency")
        .arg("-s")
        .arg(&case.script)
        .arg(url)
        .output()
        .context("cannot run wrk (make e2e-deps installs it)")?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        bail!("wrk failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    }
    if text.contains("Non-2xx or 3xx responses") {
        bail!("{}: the server answered with errors:\n{text}", case.name);
    }
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow!("no Requests/sec in wrk's output:\n{text}"))?;
    let p50_ms = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("50%"))
        .and_then(|v| parse_duration_ms(v.trim()))
        .ok_or_else(|| anyhow!("no 50% latency in wrk's output:\n{text}"))?;
    Ok(Run { rps, p50_ms })
}

/// kwctl bench colours its figures even with --no-color: drop the `ESC [ … m` sequences.
fn strip_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The median `validate` time `kwctl bench` reports, in µs.
fn kwctl_bench(plan: &Plan, module: &Path, request_file: &Path) -> Result<f64> {
    let kwctl = policy_server_client::kwctl()?;
    let mut command = Command::new(&kwctl);
    command
        .args(["--no-color", "bench"])
        .args(["--warm-up-time", plan.kwctl_warm_up])
        .args(["--measurement-time", plan.kwctl_measure])
        .arg("--request-path")
        .arg(request_file)
        .args(["--settings-json", "{}"]);
    if let Some(trust) = policy_server_client::trust_config(&kwctl) {
        command.arg("--sigstore-trust-config").arg(trust);
    }
    let out = command.arg(module).output().context("cannot run kwctl")?;
    let text = strip_colours(
        &(String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)),
    );
    if !out.status.success() {
        bail!("kwctl bench failed:\n{text}");
    }
    // The `validate` block (after `validate_settings`) ends with "(sample data: med = X, …".
    let block = text
        .rsplit_once("validate [")
        .map(|(_, b)| b)
        .ok_or_else(|| anyhow!("no validate figures in kwctl bench's output:\n{text}"))?;
    let med = block
        .split_once("med = ")
        .and_then(|(_, rest)| rest.split(',').next())
        .and_then(|v| parse_duration_ms(v.trim().replace('µ', "u").as_str()))
        .ok_or_else(|| anyhow!("no median in kwctl bench's output:\n{text}"))?;
    Ok(med * 1000.0)
}

fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let plan = if quick {
        Plan {
            rounds: 3,
            seconds: 1,
            connections: 4,
            kwctl_warm_up: "1",
            kwctl_measure: "1",
        }
    } else {
        Plan {
            rounds: 7,
            seconds: 4,
            connections: 4,
            kwctl_warm_up: "2",
            kwctl_measure: "3",
        }
    };
    // Fail before policy-server starts, not after its first figures.
    if find_on_path("wrk").is_none() {
        bail!("wrk is not installed: make e2e-deps");
    }
    policy_server_client::kwctl()?;
    let root = workspace_root();
    let policy = root.join("annotated-policy.wasm");
    let baseline = root.join("bench/annotated-baseline.wasm");
    let dir = std::env::temp_dir().join(format!("jsp-bench-server-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    let not_jobset_pod = multislice_host::fixtures::load_json(
        &multislice_host::fixtures::pod_request_path("not-a-jobset-pod"),
    )?;
    let named = [
        ("plain pod (not a JobSet's)", not_jobset_pod, None),
        (
            "opted-in Job pod",
            pod_request(&job_pod("jax-gpu-4")?),
            Some(FLOOR_TARGET),
        ),
        (
            "opted-in Job CREATE",
            job_create("jax-gpu-4")?,
            Some(FLOOR_TARGET),
        ),
        (
            "TPU JobSet pod",
            pod_request(&tpu_pod_with_containers(1)?),
            Some(FLOOR_TARGET),
        ),
        (
            "JobSet CREATE, 1 rjob × 4 slices",
            create(&tpu_jobset()?),
            Some(FLOOR_TARGET),
        ),
        (
            "JobSet CREATE, 64 rjobs",
            create(&jobset_with_rjobs(64)?),
            Some(FLOOR_TARGET),
        ),
    ];
    let floors = Floors::new(&dir)?;
    let mut cases = Vec::new();
    for (i, (name, request, target)) in named.into_iter().enumerate() {
        let body = dir.join(format!("review-{i}.json"));
        std::fs::write(&body, PolicyServer::review_body(&request))?;
        let script = dir.join(format!("post-{i}.lua"));
        std::fs::write(
            &script,
            format!(
                "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n\
                 local f = assert(io.open({:?}, \"rb\"))\nwrk.body = f:read(\"*a\")\nf:close()\n",
                body.display().to_string()
            ),
        )?;
        let floor = floors.annotated(i, &request)?;
        cases.push(Case {
            name,
            request,
            body,
            script,
            floor,
            target,
        });
    }

    let served = |id: String, module: PathBuf| ServedPolicy {
        id,
        module,
        settings: json!({}),
        allowed_to_mutate: true,
    };
    let mut policies = vec![
        served("policy".into(), policy.clone()),
        served("baseline".into(), baseline.clone()),
    ];
    for (i, case) in cases.iter().enumerate() {
        policies.push(served(server_floor::id(i), case.floor.clone()));
    }
    let server = PolicyServer::start(&policies, None)?;
    // Every request is accepted by all three, so the figures are of real evaluations, not
    // errors; and the floor's answer is the policy's, patch and all, so the server does the
    // same work on it.
    for (i, case) in cases.iter().enumerate() {
        let floor = server_floor::id(i);
        let mut verdicts = Vec::new();
        for id in ["policy", "baseline", &floor] {
            let verdict = ReviewResponse::from_response(&server.review(id, &case.request)?)?;
            if !verdict.allowed {
                bail!("{} was rejected by {id}: {:?}", case.name, verdict.message);
            }
            verdicts.push(verdict);
        }
        if verdicts[2] != verdicts[0] {
            bail!(
                "{}: {floor} answered {:?}, the policy {:?}; is annotated-policy.wasm older \
                 than policy.wasm (make annotated-policy.wasm)?",
                case.name,
                verdicts[2],
                verdicts[0]
            );
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
        "wrk -t1 -c{} against one policy-server (default workers), {} runs in turn of {} s \
         per module and case; medians.\n",
        plan.connections, plan.rounds, plan.seconds
    );
    println!(
        "A case's floor holds the policy's own answer to it and returns it without reading the \
         request: what is left is policy-server's own work, patch included. Target: the policy \
         at ≥ {}× the floor's throughput on the mutation paths (issue 30).\n",
        FLOOR_TARGET
    );
    println!("| case | review bytes | policy req/s | baseline req/s | floor req/s | policy / baseline | policy / floor | target | policy p50 ms | baseline p50 ms | policy / baseline p50 |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, case) in cases.iter().enumerate() {
        let urls = [
            server.url("policy"),
            server.url("baseline"),
            server.url(&server_floor::id(i)),
        ];
        let mut runs: [Vec<Run>; 3] = Default::default();
        for round in 0..plan.rounds {
            // Rotate which goes first, so none always runs on a warmer or calmer box.
            for k in 0..urls.len() {
                let m = (round + k) % urls.len();
                runs[m].push(wrk(&plan, case, &urls[m])?);
            }
        }
        let [p_rps, b_rps, f_rps] = runs
            .each_ref()
            .map(|r| median(r.iter().map(|r| r.rps).collect()));
        let p_lat = median(runs[0].iter().map(|r| r.p50_ms).collect());
        let b_lat = median(runs[1].iter().map(|r| r.p50_ms).collect());
        let to_floor = p_rps / f_rps;
        let verdict = match case.target {
            Some(t) if to_floor >= t => format!("≥ {t}× ✓"),
            Some(t) => format!("≥ {t}× ✗ MISSED"),
            None => "-".into(),
        };
        println!(
            "| {} | {} | {p_rps:.0} | {b_rps:.0} | {f_rps:.0} | {:.2}× | {to_floor:.2}× | {verdict} \
             | {p_lat:.2} | {b_lat:.2} | {:.2}× |",
            case.name,
            std::fs::metadata(&case.body)?.len(),
            p_rps / b_rps,
            p_lat / b_lat
        );
    }
    drop(server);

    println!("\n## kwctl bench\n");
    println!(
        "`kwctl bench` (warm-up {} s, measurement {} s), median of `validate`:\n",
        plan.kwctl_warm_up, plan.kwctl_measure
    );
    println!("| case | policy µs | baseline µs | floor µs | policy / baseline | policy / floor |");
    println!("|---|---|---|---|---|---|");
    for (i, case) in cases.iter().enumerate() {
        let request_file = dir.join(format!("request-{i}.json"));
        std::fs::write(&request_file, serde_json::to_vec(&case.request)?)?;
        let p = kwctl_bench(&plan, &policy, &request_file)?;
        let b = kwctl_bench(&plan, &baseline, &request_file)?;
        let f = kwctl_bench(&plan, &case.floor, &request_file)?;
        println!(
            "| {} | {p:.1} | {b:.1} | {f:.1} | {:.2}× | {:.2}× |",
            case.name,
            p / b,
            p / f
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
