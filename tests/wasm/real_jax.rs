//! Real JAX on the env the policy injected (docs/contributing/spec.md §4.3, §4.4). After the controller simulation
//! resolved every pod's env, one real JAX process runs per JAX process, and JAX's own GKE TPU
//! cluster detection reads every TPU container's env. `make test` (and `make jax-test`, these
//! tests alone) installs the pinned jax into a venv outside the clone and names its Python in
//! JAX_PYTHON; without it these tests fail, they are never skipped.
use crate::common::*;
use multislice_gen::oracle;
use multislice_host::controller::{self, JobSetApi};
use multislice_host::env::resolve;
use multislice_host::workspace_root;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Seconds JAX waits for every process to join; a broken env fails after this.
const INIT_SECONDS: u64 = 45;
/// Wall-clock bound of one fixture, after which its whole process group is killed.
const WALL: Duration = Duration::from_secs(120);

fn python() -> PathBuf {
    std::env::var_os("JAX_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        panic!("JAX_PYTHON is not set: run `make test` or `make jax-test`, which install the pinned jax and set it")
    })
}

/// Runs a script of tests/jax on a spec, in a process group of its own that is killed
/// whole at the deadline; returns its stdout.
fn run_python(script: &str, spec: &Value, tag: &str) -> String {
    let spec_path = std::env::temp_dir().join(format!("jsp-{tag}-{}.json", std::process::id()));
    std::fs::write(&spec_path, serde_json::to_vec(spec).unwrap()).unwrap();
    let script = workspace_root().join("tests/jax").join(script);
    let mut args: Vec<std::ffi::OsString> = vec![script.into()];
    if tag.starts_with("processes") {
        args.push("launch".into());
    }
    args.push(spec_path.clone().into());
    let mut child = Command::new(python())
        .args(&args)
        .env("JAX_PLATFORMS", "cpu")
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", python()));
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let deadline = Instant::now() + WALL;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!("{tag}: still running after {WALL:?}; its process group was killed");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = reader.join().unwrap();
    let _ = std::fs::remove_file(&spec_path);
    assert!(status.success(), "{tag}: {status}\n{out}");
    out
}

/// Every pod's DNS name, mapped to a loopback address of its own: 127.<net>.x.y stands in
/// for the cluster DNS answer.
fn addresses(pods: &[AdmittedPod], subdomain: &str, net: u8) -> Map<String, Value> {
    pods.iter()
        .enumerate()
        .map(|(i, p)| {
            let ip = format!("127.{net}.{}.{}", i / 200, i % 200 + 1);
            (format!("{}.{subdomain}", p.sim.hostname), json!(ip))
        })
        .collect()
}

fn subdomain_of(admitted: &Value) -> String {
    admitted
        .pointer("/spec/network/subdomain")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| controller::final_name(admitted))
}

fn env_map(pod: &Value, c: &Value) -> Map<String, Value> {
    resolve(pod, c)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, json!(v)))
        .collect()
}

/// The containers of a pod in docs/contributing/spec.md §3 order (containers, then init containers).
fn containers(pod: &Value) -> Vec<Value> {
    ["containers", "initContainers"]
        .iter()
        .flat_map(|l| pod["spec"][l].as_array().cloned().unwrap_or_default())
        .collect()
}

/// One real JAX process per JAX process of the fixture's JobSet.
fn jax_processes(fixture: &str, net: u8) -> (Value, usize) {
    let (_, admitted, pods) = run(&fixture_request(fixture, JobSetApi::V09), &no_settings());
    jax_processes_of(&pods, &subdomain_of(&admitted), net)
}

/// One real JAX process per JAX process of the admitted pods that carries the JAX env: each
/// TPU container of a TPU pod, else the pod's first container (tests/gen's one rule).
fn jax_processes_of(pods: &[AdmittedPod], subdomain: &str, net: u8) -> (Value, usize) {
    let hosts = addresses(pods, subdomain, net);
    let mut processes = Vec::new();
    for p in pods {
        let host = format!("{}.{subdomain}", p.sim.hostname);
        let jax = oracle::jax_process_containers(&p.pod["spec"], oracle::TPU_RESOURCE);
        for c in containers(&p.pod) {
            let env = env_map(&p.pod, &c);
            if !env.contains_key("JAX_PROCESS_ID") || !jax.iter().any(|n| c["name"] == json!(n)) {
                continue;
            }
            processes.push(json!({
                "name": format!("{}/{}", p.sim.hostname, c["name"].as_str().unwrap()),
                "address": hosts[&host],
                "env": env,
            }));
        }
    }
    let n = processes.len();
    let spec = json!({
        "init_seconds": INIT_SECONDS,
        "wall_seconds": WALL.as_secs() - 10,
        "hosts": hosts,
        "processes": processes,
    });
    (spec, n)
}

/// Starts the processes of `fixture` and checks that each completes and sees exactly 0..N-1.
fn initialize_for_real(fixture: &str, net: u8) {
    let (spec, n) = jax_processes(fixture, net);
    run_processes(fixture, &spec, n);
}

fn run_processes(fixture: &str, spec: &Value, n: usize) {
    assert!(n > 1, "{fixture}: {n} JAX processes");
    let out = run_python("processes.py", spec, &format!("processes-{fixture}"));
    let summary: Value = serde_json::from_str(out.lines().last().unwrap_or("")).unwrap();
    let results = summary["results"].as_array().unwrap();
    let all: Vec<u64> = (0..n as u64).collect();
    let mut initialised = 0;
    let mut gathered = 0;
    let mut failures = Vec::new();
    for (r, p) in results.iter().zip(spec["processes"].as_array().unwrap()) {
        let report = &r["report"];
        if report["process_count"] == json!(n) {
            initialised += 1;
        }
        let want_id: u64 = p["env"]["JAX_PROCESS_ID"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let ok = r["exit"] == json!(0)
            && report["process_index"] == json!(want_id)
            && report["gathered"] == json!(all);
        if ok {
            gathered += 1;
        } else {
            failures.push(format!("{}: {r}", r["name"]));
        }
    }
    println!(
        "real JAX {fixture}: {} processes started, {initialised} initialised, {gathered} gathered 0..{}",
        results.len(),
        n - 1
    );
    assert_eq!(results.len(), n);
    assert!(failures.is_empty(), "{fixture}:\n{}", failures.join("\n"));
}

#[test]
fn real_jax_initializes_on_the_injected_env() {
    // One fixture at a time, its processes in parallel: 2 cores run 5 + 5 + 8 + 8 processes.
    for (i, fixture) in [
        "jax-cpu-coordinator-last",
        "jax-cpu-two-members",
        "jax-gpu",
        "jax-tpu-cpu-driver",
        "trainer-initializer",
    ]
    .iter()
    .enumerate()
    {
        initialize_for_real(fixture, 100 + i as u8);
    }
}

/// docs/contributing/spec.md §4.6: the 4 pods of an opted-in plain Indexed Job, as the Job controller makes them,
/// initialise one JAX run on nothing but the env the policy injected.
#[test]
fn real_jax_initializes_on_a_plain_indexed_job() {
    let (_, admitted, pods) = run_job(&crate::jobs::job_request("jax-gpu-4"), &no_settings());
    let subdomain = admitted["spec"]["template"]["spec"]["subdomain"]
        .as_str()
        .unwrap()
        .to_string();
    let (spec, n) = jax_processes_of(&pods, &subdomain, 120);
    assert_eq!(n, 4);
    run_processes("job-jax-gpu-4", &spec, n);
}

/// Feeds every TPU container's env of `fixture` under tpuWorkerEnv to JAX's GkeTpuCluster.
fn gke_tpu_cluster(fixture: &str, net: u8) {
    let settings = json!({"tpuWorkerEnv": true});
    let (_, admitted, pods) = run(&fixture_request(fixture, JobSetApi::V09), &settings);
    let subdomain = subdomain_of(&admitted);
    let hosts = addresses(&pods, &subdomain, net);
    let mut owners = Vec::new();
    let mut list = Vec::new();
    for p in &pods {
        let tpu = oracle::tpu_container_names(&p.pod["spec"]);
        for c in containers(&p.pod) {
            if tpu.iter().any(|n| c["name"] == json!(n)) {
                owners.push(format!("{}.{subdomain}", p.sim.hostname));
                list.push(json!({
                    "name": format!("{}/{}", p.sim.hostname, c["name"].as_str().unwrap()),
                    "env": env_map(&p.pod, &c),
                }));
            }
        }
    }
    let out = run_python(
        "gke_tpu_cluster.py",
        &json!({"hosts": hosts, "containers": list}),
        &format!("gke-{fixture}"),
    );
    let got: Vec<Value> = serde_json::from_str(out.lines().last().unwrap_or("")).unwrap();
    let n = list.len() as u64;
    let ids: BTreeSet<u64> = got
        .iter()
        .map(|g| g["process_id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        ids,
        (0..n).collect(),
        "{fixture}: ids are exactly 0..N-1: {got:?}"
    );
    for g in &got {
        assert_eq!(g["process_count"], json!(n), "{fixture}: {g}");
    }
    let zero = got
        .iter()
        .position(|g| g["process_id"] == json!(0))
        .unwrap();
    let coordinators: BTreeSet<&str> = got
        .iter()
        .map(|g| g["coordinator_host"].as_str().unwrap())
        .collect();
    assert_eq!(
        coordinators,
        BTreeSet::from([owners[zero].as_str()]),
        "{fixture}: process 0 runs on the coordinator's host"
    );
    println!(
        "GkeTpuCluster {fixture}: {n} TPU containers, ids 0..{}, process 0 on {}",
        n - 1,
        owners[zero]
    );
}

#[test]
fn jax_gke_tpu_cluster_numbers_every_tpu_container() {
    for (i, fixture) in [
        "tpu-worker-v5e-4x4",
        "tpu-worker-v5p-multislice",
        "tpu7x-two-containers",
        "tpu7x-user-port",
        "tpu-init-container",
    ]
    .iter()
    .enumerate()
    {
        gke_tpu_cluster(fixture, 110 + i as u8);
    }
}
