//! Real JAX (the pinned jax, tests/jax/processes.py) initialising on the env of real pods.
use crate::common::Failures;
use crate::pods::{containers, is_jax_process};
use multislice_host::env::resolve;
use multislice_host::workspace_root;
use serde_json::{json, Value};

/// Real JAX on the env of a JAX JobSet's real pods: one process per JAX process, each pod's
/// DNS name mapped to a loopback address of its own (tests/jax/processes.py).
pub(crate) fn real_jax(label: &str, pods: &[Value], net: u8) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let python = std::env::var("JAX_PYTHON").map_err(|_| {
        anyhow::anyhow!(
            "JAX_PYTHON is not set: `make cluster-test` installs the pinned jax and sets it"
        )
    })?;
    let mut hosts = serde_json::Map::new();
    let mut processes = Vec::new();
    for (i, p) in pods.iter().enumerate() {
        let host = format!(
            "{}.{}",
            p["spec"]["hostname"].as_str().unwrap_or_default(),
            p["spec"]["subdomain"].as_str().unwrap_or_default()
        );
        let address = format!("127.{net}.{}.{}", i / 200, i % 200 + 1);
        hosts.insert(host.clone(), json!(address));
        for c in containers(p) {
            let env: serde_json::Map<String, Value> = resolve(p, &c)?
                .into_iter()
                .map(|(k, v)| (k, json!(v)))
                .collect();
            if !env.contains_key("JAX_PROCESS_ID") || !is_jax_process(p, &c) {
                continue;
            }
            let pod_name = p["metadata"]["name"].as_str().unwrap_or_default();
            processes.push(json!({
                "name": format!("{pod_name}/{}", c["name"].as_str().unwrap_or_default()),
                "address": address,
                "env": env,
            }));
        }
    }
    let n = processes.len();
    f.check(n > 1, || format!("{label}: {n} JAX processes"));
    let spec =
        json!({"init_seconds": 45, "wall_seconds": 110, "hosts": hosts, "processes": processes});
    let spec_path =
        std::env::temp_dir().join(format!("cluster-jax-{net}-{}.json", std::process::id()));
    std::fs::write(&spec_path, serde_json::to_vec(&spec)?)?;
    let out = std::process::Command::new("timeout")
        .args(["--kill-after=5", "130", &python])
        .arg(workspace_root().join("tests/jax/processes.py"))
        .arg("launch")
        .arg(&spec_path)
        .env("JAX_PLATFORMS", "cpu")
        .output()?;
    let _ = std::fs::remove_file(&spec_path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or(Value::Null);
    let results = summary["results"].as_array().cloned().unwrap_or_default();
    let all: Vec<u64> = (0..n as u64).collect();
    let (mut initialised, mut gathered) = (0, 0);
    for (r, p) in results.iter().zip(&processes) {
        if r["report"]["process_count"] == json!(n) {
            initialised += 1;
        }
        let want: u64 = p["env"]["JAX_PROCESS_ID"]
            .as_str()
            .unwrap_or("")
            .parse()
            .unwrap_or(u64::MAX);
        if r["exit"] == json!(0)
            && r["report"]["process_index"] == json!(want)
            && r["report"]["gathered"] == json!(all)
        {
            gathered += 1;
        } else {
            f.0.push(format!("{label}: {}: {r}", r["name"]));
        }
    }
    eprintln!(
        "real JAX on the real pods of {label}: {} processes started, {initialised} initialised, {gathered} gathered 0..{}",
        results.len(),
        n.saturating_sub(1)
    );
    f.eq(
        results.len(),
        n,
        &format!("{label}: processes that reported"),
    );
    Ok(f)
}
