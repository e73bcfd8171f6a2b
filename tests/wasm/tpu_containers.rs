//! Pods with several TPU containers (docs/contributing/spec.md §3, §4.2, §4.3, §4.4): every container's resolved
//! value of every variable the policy may set, through the module and the controller
//! simulation, for each fixture the contract names.
use crate::common::*;
use multislice_host::controller::JobSetApi;
use multislice_host::env::{get, resolve};
use serde_json::{json, Value};

use multislice_host::judges::POLICY_ENV as POLICY_VARS;

/// Every container of every pod, as (pod hostname, container name, container).
fn each_container(pods: &[AdmittedPod]) -> Vec<(String, String, Value, Value)> {
    let mut out = Vec::new();
    for p in pods {
        for list in ["containers", "initContainers"] {
            for c in p.pod["spec"][list].as_array().cloned().unwrap_or_default() {
                let name = c["name"].as_str().unwrap().to_string();
                out.push((p.sim.hostname.clone(), name, c, p.pod.clone()));
            }
        }
    }
    out
}

/// The container's policy variables are exactly `want` (absent ones must be unset).
fn assert_vars(pod: &Value, c: &Value, want: &[(&str, String)], ctx: &str) {
    let env = resolve(pod, c).unwrap();
    for var in POLICY_VARS {
        let expected = want
            .iter()
            .find(|(n, _)| *n == var)
            .map(|(_, v)| v.as_str());
        assert_eq!(get(&env, var), expected, "{ctx}: {var}");
    }
}

fn both_apis() -> [JobSetApi; 2] {
    [JobSetApi::V08, JobSetApi::V09]
}

/// `<name>-<rjob>-<j>-<i>.<name>` for i in 0..hosts, each listed once per port, with ports.
fn host_lists(name: &str, rjob: &str, j: u64, hosts: u64, ports: &[&str]) -> (String, String) {
    let mut hostnames = Vec::new();
    let mut addresses = Vec::new();
    for i in 0..hosts {
        let host = format!("{name}-{rjob}-{j}-{i}.{name}");
        for port in ports {
            hostnames.push(host.clone());
            addresses.push(format!("{host}:{port}"));
        }
    }
    (hostnames.join(","), addresses.join(","))
}

/// (job index, completion index) from a hostname `<name>-<rjob>-<j>-<c>`.
fn indexes(hostname: &str) -> (u64, u64) {
    let mut parts = hostname.rsplit('-');
    let c = parts.next().unwrap().parse().unwrap();
    let j = parts.next().unwrap().parse().unwrap();
    (j, c)
}

#[test]
fn tpu7x_with_two_tpu_containers_gives_each_its_own_ports() {
    for tpu_worker_env in [false, true] {
        for api in both_apis() {
            let settings = json!({"tpuWorkerEnv": tpu_worker_env});
            let (outcome, _, pods) = run(&fixture_request("tpu7x-two-containers", api), &settings);
            assert_eq!(outcome.warnings, Vec::<String>::new());
            for (host, name, c, pod) in each_container(&pods) {
                let (j, ci) = indexes(&host);
                let (hostnames, addresses) =
                    host_lists("ironwood", "slice", j, 2, &["8476", "8477"]);
                let k: u64 = if name == "jax-0" { 0 } else { 1 };
                // Two slices: one would get no MEGASCALE_* at all (docs/contributing/spec.md §4.2).
                let mut want = vec![
                    ("MEGASCALE_NUM_SLICES", "2".to_string()),
                    ("MEGASCALE_SLICE_ID", j.to_string()),
                    (
                        "MEGASCALE_COORDINATOR_ADDRESS",
                        "ironwood-slice-0-0.ironwood:8081".to_string(),
                    ),
                    ("MEGASCALE_PORT", (8081 + k).to_string()),
                ];
                if tpu_worker_env {
                    want.extend([
                        ("TPU_WORKER_ID", (ci * 2 + k).to_string()),
                        ("TPU_WORKER_HOSTNAMES", hostnames.clone()),
                        ("TPU_PROCESS_PORT", (8476 + k).to_string()),
                        ("TPU_PROCESS_ADDRESSES", addresses.clone()),
                        ("TPU_NAME", format!("ironwood-slice-{j}")),
                    ]);
                }
                assert_vars(&pod, &c, &want, &format!("{host} {name} {api:?}"));
            }
        }
    }
}

#[test]
fn a_user_set_tpu_process_port_is_kept_and_listed_in_every_address_list() {
    for api in both_apis() {
        let settings = json!({"tpuWorkerEnv": true});
        let (outcome, _, pods) = run(&fixture_request("tpu7x-user-port", api), &settings);
        assert_eq!(outcome.warnings, Vec::<String>::new());
        for p in &pods {
            assert_eq!(
                p.outcome.warnings,
                Vec::<String>::new(),
                "{}",
                p.sim.hostname
            );
        }
        for (host, name, c, pod) in each_container(&pods) {
            let (j, ci) = indexes(&host);
            let (hostnames, addresses) =
                host_lists("ironwood-port", "slice", j, 2, &["8476", "9000"]);
            let k: u64 = if name == "jax-0" { 0 } else { 1 };
            let want = vec![
                ("MEGASCALE_NUM_SLICES", "2".to_string()),
                ("MEGASCALE_SLICE_ID", j.to_string()),
                (
                    "MEGASCALE_COORDINATOR_ADDRESS",
                    "ironwood-port-slice-0-0.ironwood-port:8081".to_string(),
                ),
                ("MEGASCALE_PORT", (8081 + k).to_string()),
                ("TPU_WORKER_ID", (ci * 2 + k).to_string()),
                ("TPU_WORKER_HOSTNAMES", hostnames),
                ("TPU_PROCESS_PORT", ["8476", "9000"][k as usize].to_string()),
                ("TPU_PROCESS_ADDRESSES", addresses),
                ("TPU_NAME", format!("ironwood-port-slice-{j}")),
            ];
            assert_vars(&pod, &c, &want, &format!("{host} {name} {api:?}"));
            // The user's own entry is the only TPU_PROCESS_PORT of jax-1.
            let ports = c["env"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["name"] == "TPU_PROCESS_PORT")
                .count();
            assert_eq!(ports, 1, "{host} {name}");
        }
    }
}

#[test]
fn a_tpu_init_container_is_the_last_tpu_container() {
    for api in both_apis() {
        let settings = json!({"tpuWorkerEnv": true});
        let (outcome, _, pods) = run(&fixture_request("tpu-init-container", api), &settings);
        assert_eq!(outcome.warnings, Vec::<String>::new());
        for (host, name, c, pod) in each_container(&pods) {
            let (j, ci) = indexes(&host);
            let (hostnames, addresses) = host_lists("warm-start", "slice", j, 2, &["8476", "8477"]);
            // Containers first, then init containers (LeaderWorkerSet's order).
            let k: u64 = if name == "jax" { 0 } else { 1 };
            let want = vec![
                ("MEGASCALE_NUM_SLICES", "2".to_string()),
                ("MEGASCALE_SLICE_ID", j.to_string()),
                (
                    "MEGASCALE_COORDINATOR_ADDRESS",
                    "warm-start-slice-0-0.warm-start:8081".to_string(),
                ),
                ("MEGASCALE_PORT", (8081 + k).to_string()),
                ("TPU_WORKER_ID", (ci * 2 + k).to_string()),
                ("TPU_WORKER_HOSTNAMES", hostnames),
                ("TPU_PROCESS_PORT", (8476 + k).to_string()),
                ("TPU_PROCESS_ADDRESSES", addresses),
                ("TPU_NAME", format!("warm-start-slice-{j}")),
            ];
            assert_vars(&pod, &c, &want, &format!("{host} {name} {api:?}"));
        }
    }
}

#[test]
fn cpu_jax_with_spec_coordinator_listed_last() {
    for api in both_apis() {
        let (_, _, pods) = run(
            &fixture_request("jax-cpu-coordinator-last", api),
            &no_settings(),
        );
        let ids = [
            ("cpu-jax-last-workers-0-0", "4"),
            ("cpu-jax-last-workers-0-1", "1"),
            ("cpu-jax-last-workers-1-0", "2"),
            ("cpu-jax-last-workers-1-1", "3"),
            ("cpu-jax-last-head-0-0", "0"),
        ];
        assert_eq!(pods.len(), ids.len());
        for (host, name, c, pod) in each_container(&pods) {
            let id = ids.iter().find(|(h, _)| *h == host).unwrap().1;
            let want = vec![
                (
                    "JAX_COORDINATOR_ADDRESS",
                    "cpu-jax-last-head-0-0.cpu-jax-last:6666".to_string(),
                ),
                ("JAX_NUM_PROCESSES", "5".to_string()),
                ("JAX_PROCESS_ID", id.to_string()),
            ];
            assert_vars(&pod, &c, &want, &format!("{host} {name} {api:?}"));
        }
    }
}

#[test]
fn gpu_jax_over_two_replicated_jobs() {
    // a100: 2 jobs × 2 pods, then h100: 1 job × 4 pods, each with a metrics sidecar.
    for api in both_apis() {
        let (_, _, pods) = run(&fixture_request("jax-gpu", api), &no_settings());
        assert_eq!(pods.len(), 8);
        for (host, name, c, pod) in each_container(&pods) {
            let (j, ci) = indexes(&host);
            let id = if host.contains("-a100-") {
                j * 2 + ci
            } else {
                4 + ci
            };
            let want = vec![
                (
                    "JAX_COORDINATOR_ADDRESS",
                    "gpu-train-a100-0-0.gpu-train:6666".to_string(),
                ),
                ("JAX_NUM_PROCESSES", "8".to_string()),
                ("JAX_PROCESS_ID", id.to_string()),
            ];
            assert_vars(&pod, &c, &want, &format!("{host} {name} {api:?}"));
        }
    }
}

#[test]
fn tpu_jax_with_a_cpu_driver_named_by_spec_coordinator() {
    for api in both_apis() {
        let (outcome, _, pods) = run(&fixture_request("jax-tpu-cpu-driver", api), &no_settings());
        // libtpu on the slices dials the driver, which runs none (docs/contributing/spec.md §4.2).
        assert_eq!(outcome.warnings, fixture_warnings("jax-tpu-cpu-driver"));
        assert_eq!(outcome.warnings.len(), 1);
        for (host, name, c, pod) in each_container(&pods) {
            if host == "tpu-jax-driver-0-0" {
                // Neither a slice nor a JAX process.
                assert_vars(&pod, &c, &[], &host);
                continue;
            }
            let (j, ci) = indexes(&host);
            let k: u64 = if name == "jax-0" { 0 } else { 1 };
            let want = vec![
                ("MEGASCALE_NUM_SLICES", "2".to_string()),
                ("MEGASCALE_SLICE_ID", j.to_string()),
                // The driver runs no TPU process: its address stays bare.
                (
                    "MEGASCALE_COORDINATOR_ADDRESS",
                    "tpu-jax-driver-0-0.tpu-jax".to_string(),
                ),
                ("MEGASCALE_PORT", (8081 + k).to_string()),
                (
                    "JAX_COORDINATOR_ADDRESS",
                    "tpu-jax-workers-0-0.tpu-jax:6666".to_string(),
                ),
                ("JAX_NUM_PROCESSES", "8".to_string()),
                ("JAX_PROCESS_ID", ((j * 2 + ci) * 2 + k).to_string()),
            ];
            assert_vars(&pod, &c, &want, &format!("{host} {name} {api:?}"));
        }
    }
}

#[test]
fn pathways_keeps_the_bare_address_of_a_head_outside_the_slice_group() {
    for api in both_apis() {
        let (_, _, pods) = run(&fixture_request("pathways-tpu7x", api), &no_settings());
        for (host, name, c, pod) in each_container(&pods) {
            if host.contains("-head-") {
                assert_vars(&pod, &c, &[], &host);
                continue;
            }
            let (j, _) = indexes(&host);
            let k: u64 = if name.ends_with("-0") { 0 } else { 1 };
            let want = vec![
                ("MEGASCALE_NUM_SLICES", "2".to_string()),
                ("MEGASCALE_SLICE_ID", j.to_string()),
                (
                    "MEGASCALE_COORDINATOR_ADDRESS",
                    "pathways-ironwood-head-0-0.pathways-ironwood".to_string(),
                ),
                ("MEGASCALE_PORT", (8081 + k).to_string()),
            ];
            assert_vars(&pod, &c, &want, &format!("{host} {name} {api:?}"));
        }
    }
}

#[test]
fn the_preview_shows_per_container_ports_and_jobset_warnings() {
    use multislice_host::controller::as_served;
    use multislice_host::fixtures::jobset_yaml;
    use multislice_host::preview::run_jobset;
    let mut jobset = jobset_yaml("tpu7x-user-port").unwrap();
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
        ["env"] = json!([{"name": "MEGASCALE_NUM_SLICES", "value": "8"}]);
    let served = as_served(&jobset, JobSetApi::V09);
    let (report, _) = run_jobset(
        policy(),
        &served,
        &json!({"tpuWorkerEnv": true}),
        JobSetApi::V09,
    )
    .unwrap();
    let header = report.lines().find(|l| l.starts_with("POD")).unwrap();
    for column in [
        "MEGASCALE_PORT",
        "TPU_PROCESS_PORT",
        "TPU_PROCESS_ADDRESSES",
        "TPU_NAME",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("ironwood-port-slice-1-1  jax-1")
                && l.contains("8082")
                && l.contains("9000")
                && l.ends_with(" ironwood-port-slice-1")),
        "{report}"
    );
    assert!(report.contains("warning: spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[0]: MEGASCALE_NUM_SLICES keeps \"8\" for pod ironwood-port-slice-0-0, not the \"2\" the policy computed"), "{report}");
}
