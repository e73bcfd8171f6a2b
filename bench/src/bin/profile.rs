//! One bench case in a loop, for a profiler (BENCHMARKS.md "Profiling").
//!
//! usage: profile CASE CALLS [native|native-baseline|wasm|baseline|OTHER.wasm]
//!   CASE: plain-pod, tpu-pod, job-pod, job-create, create-1x4, update-1x4 (nothing changed),
//!   create-10mb, create-N (N replicated jobs)
//! `wasm` runs policy.wasm with wasmtime's perf map (/tmp/perf-PID.map), so `perf report`
//! names the module's functions where the module keeps its names (a build with
//! `CARGO_PROFILE_RELEASE_STRIP=false`, given as OTHER.wasm).
use anyhow::{bail, Context, Result};
use jobset_multislice_policy::admission::validate;
use multislice_bench::workloads::*;
use multislice_host::{workspace_root, Policy};
use serde_json::Value;
use std::hint::black_box;

fn request(case: &str) -> Result<Value> {
    Ok(match case {
        "tpu-pod" => pod_request(&tpu_pod_with_containers(1)?),
        "plain-pod" => annotated_plain_pod()?,
        "job-pod" => pod_request(&job_pod("jax-gpu-4")?),
        "job-create" => job_create("jax-gpu-4")?,
        "create-1x4" => create(&tpu_jobset()?),
        "update-1x4" => unchanged_update(&tpu_jobset()?),
        // The ~10 MB JobSet of the bench's limits.
        "create-10mb" => create(&jobset_of_size(10 << 20)?),
        other => match other.strip_prefix("create-").map(str::parse) {
            // create-N: a JobSet of N replicated jobs (create-64 is the bench's).
            Some(Ok(n)) => create(&jobset_with_rjobs(n)?),
            _ => bail!("unknown case {other}"),
        },
    })
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let case = args
        .get(1)
        .context("usage: profile CASE CALLS [native|wasm|baseline]")?;
    let calls: u32 = args.get(2).context("CALLS")?.parse()?;
    let payload = payload(&request(case)?);
    let module = match args.get(3).map(String::as_str).unwrap_or("native") {
        "native" => {
            for _ in 0..calls {
                black_box(validate(black_box(&payload))?);
            }
            return Ok(());
        }
        // What the baseline module does, natively: the whole request into a tree.
        "native-baseline" => {
            for _ in 0..calls {
                let request: kubewarden_policy_sdk::request::ValidationRequest<Value> =
                    serde_json::from_slice(black_box(&payload))?;
                black_box(request);
            }
            return Ok(());
        }
        "wasm" => "policy.wasm",
        "baseline" => "bench/baseline.wasm",
        path if path.ends_with(".wasm") => path,
        other => bail!("unknown host {other}"),
    };
    let mut config = wasmtime::Config::new();
    config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    let engine = wasmtime::Engine::new(&config).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let policy = Policy::with_engine(&std::fs::read(workspace_root().join(module))?, engine)?;
    let instance = policy.instance()?;
    for _ in 0..calls {
        black_box(instance.call("validate", &payload)?);
    }
    Ok(())
}
