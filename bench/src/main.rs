//! make bench: jobset-multislice-policy against an accept-all baseline built with the same SDK
//! and profile, both in one process through the same wapc + wasmtime-provider host.
//!
//! usage: bench [--quick]
//!        bench [--quick] --against OTHER.wasm   (this policy.wasm against another build,
//!                                                rounds interleaved)
mod lookup;
mod memory;

use anyhow::{Context, Result};
use jobset_multislice_policy::admission::validate;
use memory::{tracking_engine, PeakTracker};
use multislice_bench::workloads::*;
use multislice_bench::{floor, host_work};
use multislice_host::{workspace_root, Instance, Policy};
use serde_json::Value;
use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Timing {
    rounds: usize,
    round: Duration,
}

/// Median time per call: warm up, size a round to `round`, then take the median round.
fn per_call(timing: &Timing, mut call: impl FnMut()) -> Duration {
    let warm_until = Instant::now() + timing.round;
    let mut calls = 0u32;
    while Instant::now() < warm_until || calls < 5 {
        call();
        calls += 1;
    }
    let per_round = calls.max(1);
    let mut samples: Vec<Duration> = (0..timing.rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_round {
                call();
            }
            start.elapsed() / per_round
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

/// Median time per call of `a` and of `b`, their rounds interleaved so that drift in the
/// machine's speed (the other core's load, frequency) falls on both alike.
fn per_call_pair(
    timing: &Timing,
    mut a: impl FnMut(),
    mut b: impl FnMut(),
) -> (Duration, Duration) {
    let per_round = {
        let until = Instant::now() + timing.round;
        let mut calls = 0u32;
        while Instant::now() < until || calls < 5 {
            a();
            b();
            calls += 1;
        }
        calls.max(1)
    };
    let round = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        for _ in 0..per_round {
            f();
        }
        start.elapsed() / per_round
    };
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    for i in 0..timing.rounds {
        // Alternate which goes first, so neither always runs on a warmer cache.
        if i % 2 == 0 {
            sa.push(round(&mut a));
            sb.push(round(&mut b));
        } else {
            sb.push(round(&mut b));
            sa.push(round(&mut a));
        }
    }
    sa.sort();
    sb.sort();
    (sa[sa.len() / 2], sb[sb.len() / 2])
}

/// `--against OTHER.wasm`: this build against another, in one process: the fast paths, the
/// mutations with targets, and an xpk JobSet as xpk writes its command.
fn against(other: &Path, timing: &Timing) -> Result<()> {
    let root = workspace_root();
    let this = Policy::from_bytes(&std::fs::read(root.join("policy.wasm"))?)?.instance()?;
    let other_bytes =
        std::fs::read(other).with_context(|| format!("cannot read {}", other.display()))?;
    let other = Policy::from_bytes(&other_bytes)?.instance()?;
    println!("| case | this µs | other µs | this / other |");
    println!("|---|---|---|---|");
    let plain = multislice_host::fixtures::load_json(
        &multislice_host::fixtures::pod_request_path("not-a-jobset-pod"),
    )?;
    let cases = [
        ("non-JobSet pod (fast path)", plain),
        (
            "non-JobSet pod with 5 annotations (fast path)",
            annotated_plain_pod()?,
        ),
        (
            "pod of a Job not opted in (fast path)",
            pod_request(&job_pod("not-opted-in")?),
        ),
        ("Job CREATE, not opted in", job_create("not-opted-in")?),
        (
            "JobSet TPU pod (mutation)",
            pod_request(&tpu_pod_with_containers(1)?),
        ),
        (
            "JobSet TPU pod, as the API server defaults it",
            pod_request(&defaulted_tpu_pod()?),
        ),
        (
            "opted-in Job pod (mutation)",
            pod_request(&job_pod("jax-gpu-4")?),
        ),
        ("opted-in Job CREATE", job_create("jax-gpu-4")?),
        ("JobSet CREATE, 1 rjob × 4 slices", create(&tpu_jobset()?)),
        ("JobSet CREATE, 64 rjobs", create(&jobset_with_rjobs(64)?)),
        (
            "JobSet CREATE, xpk v6e with a 2 KB launch script",
            create(&xpk_jobset_with_script()?),
        ),
    ];
    for (name, request) in cases {
        let payload = payload(&request);
        let (a, b) = per_call_pair(
            timing,
            wasm_call(&this, &payload),
            wasm_call(&other, &payload),
        );
        println!(
            "| {name} | {} | {} | {:.2}× |",
            micros(a),
            micros(b),
            a.as_secs_f64() / b.as_secs_f64()
        );
    }
    Ok(())
}

fn wasm_call<'a>(instance: &'a Instance, payload: &'a [u8]) -> impl FnMut() + 'a {
    move || {
        black_box(instance.call("validate", payload).expect("policy call"));
    }
}

/// The same entry point compiled for this machine: request bytes in, response bytes out.
fn native_call(payload: &[u8]) -> impl FnMut() + '_ {
    move || {
        black_box(validate(black_box(payload)).expect("response"));
    }
}

fn micros(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

struct Bench {
    policy: Instance,
    baseline: Instance,
    timing: Timing,
}

impl Bench {
    fn row(&self, name: &str, request: &Value) -> Result<String> {
        let payload = payload(request);
        let object = request.get("object").cloned().unwrap_or(Value::Null);
        let answer = self.policy.call("validate", &payload)?;
        let floor = Policy::from_bytes(&floor::module(&answer)?)?.instance()?;
        // Both modules' rounds interleaved, as in `--against`, so that the machine's drift over
        // a row (seconds) falls on both alike.
        let (p, b) = per_call_pair(
            &self.timing,
            wasm_call(&self.policy, &payload),
            wasm_call(&self.baseline, &payload),
        );
        let f = per_call(&self.timing, wasm_call(&floor, &payload));
        let n = per_call(&self.timing, native_call(&payload));
        let (p_host, f_host) = per_call_pair(
            &self.timing,
            with_host_work(&self.policy, &payload, &object),
            with_host_work(&floor, &payload, &object),
        );
        let ratio = p.as_secs_f64() / b.as_secs_f64();
        Ok(format!(
            "| {name} | {} | {} | {} | {} | {ratio:.2}× | {:.2}× | {} | {} | {:.2}× | {} |",
            payload.len(),
            micros(p),
            micros(b),
            micros(f),
            f.as_secs_f64() / p.as_secs_f64(),
            micros(p_host),
            micros(f_host),
            f_host.as_secs_f64() / p_host.as_secs_f64(),
            micros(n)
        ))
    }
}

/// A module's call followed by policy-server's work on its answer ([`host_work`]).
fn with_host_work<'a>(
    instance: &'a Instance,
    payload: &'a [u8],
    object: &'a Value,
) -> impl FnMut() + 'a {
    move || {
        let answer = instance.call("validate", payload).expect("module call");
        black_box(host_work::patch_for(&answer, object).expect("an answer policy-server reads"));
    }
}

fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let timing = if quick {
        Timing {
            rounds: 5,
            round: Duration::from_millis(20),
        }
    } else {
        Timing {
            rounds: 21,
            round: Duration::from_millis(200),
        }
    };
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--against") {
        let other = args.get(i + 1).context("--against needs a .wasm path")?;
        return against(Path::new(other), &timing);
    }
    let root = workspace_root();
    let policy_bytes =
        std::fs::read(root.join("policy.wasm")).context("policy.wasm: run make policy.wasm")?;
    let baseline_bytes = std::fs::read(root.join("bench/baseline.wasm"))
        .context("bench/baseline.wasm: run make bench")?;
    let policy = Policy::from_bytes(&policy_bytes)?;
    let baseline = Policy::from_bytes(&baseline_bytes)?;
    let bench = Bench {
        policy: policy.instance()?,
        baseline: baseline.instance()?,
        timing,
    };

    println!(
        "# jobset-multislice-policy benchmark{}\n",
        if quick {
            " (--quick: few rounds, rough figures)"
        } else {
            ""
        }
    );
    println!("Median time per `validate` call on a reused instance, wasm through wapc + wasmtime-provider;");
    println!("the baseline is an accept-all policy with the same SDK and release profile that deserializes");
    println!("the whole request. Native is the same policy code compiled for this machine.\n");
    println!(
        "The floor is a module that holds the policy's answer to the case and returns it without"
    );
    println!(
        "reading the request. \"With policy-server's work\" adds what policy-server does with an"
    );
    println!(
        "answer: read it and diff the mutated object into a base64 JSON patch (`json-patch`).\n"
    );
    println!("| case | request bytes | policy µs | baseline µs | floor µs | policy / baseline | floor / policy | with policy-server's work: policy µs | floor µs | floor / policy | native µs |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let js = tpu_jobset()?;
    let not_jobset_pod = multislice_host::fixtures::load_json(
        &multislice_host::fixtures::pod_request_path("not-a-jobset-pod"),
    )?;
    let rows = [
        ("non-JobSet pod (fast path)", not_jobset_pod),
        (
            "non-JobSet pod with 5 annotations (fast path)",
            annotated_plain_pod()?,
        ),
        (
            "pod of a Job not opted in (fast path)",
            pod_request(&job_pod("not-opted-in")?),
        ),
        (
            "Job CREATE, not opted in (fast path)",
            job_create("not-opted-in")?,
        ),
        (
            "opted-in Job pod (mutation)",
            pod_request(&job_pod("jax-gpu-4")?),
        ),
        ("opted-in Job CREATE", job_create("jax-gpu-4")?),
        (
            "JobSet TPU pod (mutation)",
            pod_request(&tpu_pod_with_containers(1)?),
        ),
        ("JobSet CREATE, 1 rjob × 4 slices", create(&js)),
        ("JobSet CREATE, 64 rjobs", create(&jobset_with_rjobs(64)?)),
        ("JobSet UPDATE, nothing changed", unchanged_update(&js)),
        (
            "JobSet rejected, 10 violations",
            create(&jobset_with_violations(10)?),
        ),
    ];
    for (name, request) in rows {
        println!("{}", bench.row(name, &request)?);
    }

    println!("\n## Scaling\n");
    println!(
        "| replicated jobs | policy µs | µs per rjob | baseline µs per rjob | native µs per rjob |"
    );
    println!("|---|---|---|---|---|");
    for n in [1usize, 16, 256, 4096] {
        let payload = payload(&create(&jobset_with_rjobs(n)?));
        let (p, b) = per_call_pair(
            &bench.timing,
            wasm_call(&bench.policy, &payload),
            wasm_call(&bench.baseline, &payload),
        );
        let native = per_call(&bench.timing, native_call(&payload));
        let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
        println!(
            "| {n} | {} | {:.2} | {:.2} | {:.2} |",
            micros(p),
            per(p),
            per(b),
            per(native)
        );
    }
    println!(
        "\n| containers in the pod | policy µs | µs per container | native µs per container |"
    );
    println!("|---|---|---|---|");
    for n in [1usize, 10, 50, 200] {
        let payload = payload(&pod_request(&tpu_pod_with_containers(n)?));
        let p = per_call(&bench.timing, wasm_call(&bench.policy, &payload));
        let native = per_call(&bench.timing, native_call(&payload));
        println!(
            "| {n} | {} | {:.2} | {:.2} |",
            micros(p),
            p.as_secs_f64() * 1e6 / n as f64,
            native.as_secs_f64() * 1e6 / n as f64
        );
    }

    println!("\n## The queue check's lookups, answered at once by a recorded session\n");
    lookup::section(&policy, &bench.timing, &lookup::cases()?)?;

    println!("\n## Size and start-up\n");
    size_and_startup(&root, &policy_bytes, &baseline_bytes)?;

    println!("\n## Limits (one request each, wasm; peak linear memory of the instance)\n");
    println!("| request | request bytes | time ms | peak wasm memory MiB | verdict |");
    println!("|---|---|---|---|---|");
    let limits = [
        ("JobSet of ~10 MB", create(&jobset_of_size(10 << 20)?)),
        ("JobSet of 5,000 rjobs", create(&jobset_with_rjobs(5000)?)),
        (
            "pod of 200 containers",
            pod_request(&tpu_pod_with_containers(200)?),
        ),
    ];
    for (name, request) in limits {
        limit_row(&policy_bytes, name, &request)?;
    }
    Ok(())
}

fn wasm_error(e: wasmtime::Error) -> anyhow::Error {
    anyhow::anyhow!("{e:#}")
}

fn kib(bytes: usize) -> String {
    format!("{:.0} KiB", bytes as f64 / 1024.0)
}

fn size_and_startup(root: &Path, policy: &[u8], baseline: &[u8]) -> Result<()> {
    let annotated = std::fs::metadata(root.join("annotated-policy.wasm"))
        .map(|m| kib(m.len() as usize))
        .unwrap_or_else(|_| "not built (kwctl is not installed)".into());
    let engine = wasmtime::Engine::default();
    let compile = |bytes: &[u8]| -> Result<Duration> {
        let mut samples = Vec::new();
        for _ in 0..3 {
            let start = Instant::now();
            black_box(engine.precompile_module(bytes).map_err(wasm_error)?);
            samples.push(start.elapsed());
        }
        samples.sort();
        Ok(samples[1])
    };
    let initial_memory = |bytes: &[u8]| -> Result<String> {
        let tracker = Arc::new(PeakTracker::default());
        let policy =
            Policy::with_engine(bytes, tracking_engine(tracker.clone()).map_err(wasm_error)?)?;
        let _instance = policy.instance()?;
        Ok(kib(tracker.peak.load(Ordering::Relaxed)))
    };
    println!("| | policy | baseline |");
    println!("|---|---|---|");
    println!(
        "| policy.wasm | {} ({} bytes) | {} |",
        kib(policy.len()),
        policy.len(),
        kib(baseline.len())
    );
    println!("| annotated-policy.wasm | {annotated} | - |");
    println!(
        "| precompile_module (as policy-server at start) | {:.0} ms | {:.0} ms |",
        compile(policy)?.as_secs_f64() * 1e3,
        compile(baseline)?.as_secs_f64() * 1e3
    );
    println!(
        "| linear memory after instantiation | {} | {} |",
        initial_memory(policy)?,
        initial_memory(baseline)?
    );
    Ok(())
}

fn limit_row(policy_bytes: &[u8], name: &str, request: &Value) -> Result<()> {
    let tracker = Arc::new(PeakTracker::default());
    let policy = Policy::with_engine(
        policy_bytes,
        tracking_engine(tracker.clone()).map_err(wasm_error)?,
    )?;
    let instance = policy.instance()?;
    let payload = payload(request);
    let start = Instant::now();
    let out = instance.call("validate", &payload)?;
    let elapsed = start.elapsed();
    let response: Value = serde_json::from_slice(&out)?;
    let verdict = if response["accepted"] == Value::Bool(true) {
        if response["mutated_object"].is_null() {
            "accepted"
        } else {
            "accepted, mutated"
        }
    } else {
        "rejected"
    };
    println!(
        "| {name} | {} | {:.1} | {:.1} | {verdict} |",
        payload.len(),
        elapsed.as_secs_f64() * 1e3,
        tracker.peak.load(Ordering::Relaxed) as f64 / (1 << 20) as f64
    );
    Ok(())
}
