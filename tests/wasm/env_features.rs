//! TPU host env (docs/contributing/spec.md §4.3) and JAX distributed env (§4.4) through the real module and the
//! controller simulation: every pod's resolved values, computed here from first principles.
use crate::common::*;
use multislice_host::controller::{self, JobSetApi};
use multislice_host::env::{get, resolve};
use rstest::rstest;
use serde_json::{json, Value};
use std::collections::BTreeSet;

fn containers(pod: &Value) -> Vec<(String, &Value)> {
    ["initContainers", "containers"]
        .iter()
        .flat_map(|list| {
            pod["spec"][list]
                .as_array()
                .map(|a| a.iter().map(|c| (list.to_string(), c)).collect::<Vec<_>>())
                .unwrap_or_default()
        })
        .collect()
}

fn is_tpu(c: &Value) -> bool {
    c.pointer("/resources/limits/google.com~1tpu").is_some()
}

#[rstest]
#[case::v5e_4x4("tpu-worker-v5e-4x4", "v5e-single", 4)]
#[case::v5p_multislice("tpu-worker-v5p-multislice", "v5p-hosts", 2)]
#[case::tpu7x_two_containers("tpu7x-two-containers", "ironwood", 2)]
fn tpu_worker_env_names_each_host_of_the_slice(
    #[case] fixture: &str,
    #[case] subdomain: &str,
    #[case] hosts: u64,
    #[values(JobSetApi::V08, JobSetApi::V09)] api: JobSetApi,
) {
    let settings = json!({"tpuWorkerEnv": true});
    let (_, admitted, pods) = run(&fixture_request(fixture, api), &settings);
    let name = controller::final_name(&admitted);
    let mut ids_per_job: std::collections::BTreeMap<u64, BTreeSet<u64>> = Default::default();
    for p in &pods {
        let tpu: Vec<&Value> = containers(&p.pod)
            .into_iter()
            .filter(|(list, c)| list == "containers" && is_tpu(c))
            .map(|(_, c)| c)
            .collect();
        let n = tpu.len() as u64;
        let hostnames: Vec<String> = (0..hosts)
            .flat_map(|i| {
                let host = format!("{name}-slice-{}-{i}.{subdomain}", p.sim.job_index);
                std::iter::repeat_n(host, n as usize)
            })
            .collect();
        for (k, c) in tpu.iter().enumerate() {
            let env = resolve(&p.pod, c).unwrap();
            let id = p.sim.completion_index * n + k as u64;
            assert_eq!(
                get(&env, "TPU_WORKER_ID"),
                Some(id.to_string().as_str()),
                "{}",
                p.sim.hostname
            );
            assert_eq!(
                get(&env, "TPU_WORKER_HOSTNAMES"),
                Some(hostnames.join(",").as_str())
            );
            ids_per_job.entry(p.sim.job_index).or_default().insert(id);
        }
    }
    // Within each slice the worker ids are exactly 0..hosts×n-1.
    for ids in ids_per_job.values() {
        assert_eq!(*ids, (0..ids.len() as u64).collect::<BTreeSet<_>>());
    }
}

#[test]
fn tpu_worker_env_is_off_by_default() {
    let (_, _, pods) = run(
        &fixture_request("tpu-worker-v5e-4x4", JobSetApi::V09),
        &no_settings(),
    );
    for p in &pods {
        let env = resolve(&p.pod, &p.pod["spec"]["containers"][0]).unwrap();
        assert_eq!(
            (
                get(&env, "TPU_WORKER_ID"),
                get(&env, "TPU_WORKER_HOSTNAMES")
            ),
            (None, None)
        );
    }
}

/// What a JAX JobSet's pods must get: JAX_NUM_PROCESSES, the coordinator host and port, and
/// the replicated jobs of the JAX group.
struct JaxWanted<'a> {
    num: u64,
    coordinator: &'a str,
    port: u16,
    only_rjobs: &'a [&'a str],
}

/// (JAX_NUM_PROCESSES, coordinator host, port) of a JAX JobSet, and each pod's process id:
/// the pods of earlier replicated jobs of the group + job index × parallelism + completion
/// index, with the coordinator pod's id swapped with 0 (docs/contributing/spec.md §4.4). In TPU pods each TPU
/// container is a process: id × n + k among num × n, and other containers get nothing.
fn check_jax(fixture: &str, settings: &Value, want: &JaxWanted) {
    let JaxWanted {
        num,
        coordinator,
        port,
        only_rjobs,
    } = *want;
    for api in [JobSetApi::V08, JobSetApi::V09] {
        let (_, admitted, pods) = run(&fixture_request(fixture, api), settings);
        let name = controller::final_name(&admitted);
        let rjobs = admitted["spec"]["replicatedJobs"].as_array().unwrap();
        let address = format!("{name}-{coordinator}.{name}:{port}");
        let natural = |rjob: &str, job_index: u64, completion_index: u64| {
            let mut offset = 0;
            for r in rjobs {
                if r["name"] == json!(rjob) {
                    break;
                }
                if only_rjobs.contains(&r["name"].as_str().unwrap()) {
                    offset += r["replicas"].as_u64().unwrap()
                        * r["template"]["spec"]["parallelism"].as_u64().unwrap();
                }
            }
            let me = rjobs.iter().find(|r| r["name"] == json!(rjob)).unwrap();
            let parallelism = me["template"]["spec"]["parallelism"].as_u64().unwrap();
            offset + job_index * parallelism + completion_index
        };
        let coordinator_pod = pods
            .iter()
            .find(|p| p.sim.hostname == format!("{name}-{coordinator}"))
            .map(|p| {
                natural(
                    &p.sim.replicated_job,
                    p.sim.job_index,
                    p.sim.completion_index,
                )
            })
            .expect("the coordinator is a pod");
        let mut ids = BTreeSet::new();
        let mut processes = num;
        for p in &pods {
            let in_group = only_rjobs.contains(&p.sim.replicated_job.as_str());
            let n = multislice_gen::oracle::tpu_container_names(&p.pod["spec"]);
            let pod_id = match natural(
                &p.sim.replicated_job,
                p.sim.job_index,
                p.sim.completion_index,
            ) {
                id if id == coordinator_pod => 0,
                0 => coordinator_pod,
                id => id,
            };
            for (_, c) in containers(&p.pod) {
                let env = resolve(&p.pod, c).unwrap();
                let k = n.iter().position(|x| c["name"] == json!(x));
                let expected = match (in_group, n.len() as u64, k) {
                    (false, _, _) | (true, 1.., None) => None,
                    (true, 0, _) => Some((num, pod_id)),
                    (true, n, Some(k)) => Some((num * n, pod_id * n + k as u64)),
                };
                let Some((count, id)) = expected else {
                    assert_eq!(
                        get(&env, "JAX_NUM_PROCESSES"),
                        None,
                        "{} {} is not a JAX process",
                        p.sim.hostname,
                        c["name"]
                    );
                    continue;
                };
                processes = count;
                assert_eq!(
                    get(&env, "JAX_NUM_PROCESSES"),
                    Some(count.to_string().as_str()),
                    "{}",
                    p.sim.hostname
                );
                assert_eq!(
                    get(&env, "JAX_PROCESS_ID"),
                    Some(id.to_string().as_str()),
                    "{} {}",
                    p.sim.hostname,
                    c["name"]
                );
                assert_eq!(get(&env, "JAX_COORDINATOR_ADDRESS"), Some(address.as_str()));
                if n.is_empty() {
                    // Every container of a CPU or GPU pod carries the pod's one process id.
                    ids.insert(id);
                } else {
                    assert!(ids.insert(id), "process id {id} repeats");
                }
            }
        }
        assert_eq!(
            ids,
            (0..processes).collect::<BTreeSet<_>>(),
            "ids are exactly 0..N-1"
        );
    }
}

#[test]
fn gpu_jax_group_spans_replicated_jobs_of_different_parallelism() {
    check_jax(
        "jax-gpu",
        &no_settings(),
        &JaxWanted {
            num: 8,
            coordinator: "a100-0-0",
            port: 6666,
            only_rjobs: &["a100", "h100"],
        },
    );
}

#[test]
fn the_coordinator_port_is_a_setting() {
    check_jax(
        "jax-gpu",
        &json!({"jaxCoordinatorPort": 1234}),
        &JaxWanted {
            num: 8,
            coordinator: "a100-0-0",
            port: 1234,
            only_rjobs: &["a100", "h100"],
        },
    );
}

#[test]
fn cpu_jax_uses_spec_coordinator_and_init_containers_get_the_env_too() {
    check_jax(
        "jax-cpu-coordinator",
        &no_settings(),
        &JaxWanted {
            num: 7,
            coordinator: "head-0-0",
            port: 6666,
            only_rjobs: &["head", "workers"],
        },
    );
}

#[test]
fn in_a_tpu_jobset_the_jax_group_is_the_slice_group() {
    // jaxEnv: always, without the annotation: the CPU driver is not a JAX process, nor is the
    // log shipper beside the TPU containers. The TPU init container is TPU container 1 of 2
    // (docs/contributing/spec.md §3), so 8 pods run 16 processes.
    check_jax(
        "cpu-driver-default",
        &json!({"jaxEnv": "always"}),
        &JaxWanted {
            num: 8,
            coordinator: "workers-0-0",
            port: 6666,
            only_rjobs: &["workers"],
        },
    );
}

#[test]
fn jax_env_never_wins_over_the_annotation() {
    let settings = json!({"jaxEnv": "never"});
    let (outcome, _, pods) = run(&fixture_request("jax-gpu", JobSetApi::V09), &settings);
    assert_eq!(
        outcome.mutated_object, None,
        "nothing to stamp on a v0.9 GPU JobSet"
    );
    for p in &pods {
        assert_eq!(p.outcome.mutated_object, None, "{}", p.sim.hostname);
    }
}

#[test]
fn without_the_annotation_annotated_mode_injects_nothing() {
    let mut request = fixture_request("jax-gpu", JobSetApi::V09);
    request["object"]["metadata"]["annotations"] = json!({});
    let (outcome, _, pods) = run(&request, &no_settings());
    assert_eq!(outcome.mutated_object, None);
    assert!(pods.iter().all(|p| p.outcome.mutated_object.is_none()));
}

#[test]
fn cpu_jax_makes_the_coordinator_listed_last_process_0() {
    // The head comes after 2 × 2 workers: numbered 4, it swaps ids with workers-0-0.
    check_jax(
        "jax-cpu-coordinator-last",
        &no_settings(),
        &JaxWanted {
            num: 5,
            coordinator: "head-0-0",
            port: 6666,
            only_rjobs: &["workers", "head"],
        },
    );
}

#[test]
fn cpu_jax_over_two_members_numbers_from_the_first_pod_of_the_first() {
    // No spec.coordinator: head-0-0 is process 0, the 2 × 2 workers 1..4.
    check_jax(
        "jax-cpu-two-members",
        &no_settings(),
        &JaxWanted {
            num: 5,
            coordinator: "head-0-0",
            port: 6666,
            only_rjobs: &["head", "workers"],
        },
    );
}

#[test]
fn tpu_jax_with_a_cpu_driver_as_spec_coordinator_starts_at_the_slice_group() {
    // The driver is outside the JAX group (the slice group), so the group's own first pod is
    // process 0; each of the two TPU containers per pod is a process: 4 pods, 8 processes.
    check_jax(
        "jax-tpu-cpu-driver",
        &no_settings(),
        &JaxWanted {
            num: 4,
            coordinator: "workers-0-0",
            port: 6666,
            only_rjobs: &["workers"],
        },
    );
}

#[test]
fn an_initializer_the_nodes_wait_for_is_no_jax_process_of_theirs() {
    // Kubeflow Trainer's shape: the nodes wait for the dataset initializer to complete, so by
    // the time they start it has exited. The JAX group is the two node pods, and the
    // initializer gets no JAX env (docs/contributing/spec.md §3).
    check_jax(
        "trainer-initializer",
        &no_settings(),
        &JaxWanted {
            num: 2,
            coordinator: "node-0-0",
            port: 6666,
            only_rjobs: &["node"],
        },
    );
    let (outcome, _, pods) = run(
        &fixture_request("trainer-initializer", JobSetApi::V09),
        &no_settings(),
    );
    assert_eq!(outcome.warnings, Vec::<String>::new());
    let initializer = pods
        .iter()
        .find(|p| p.sim.replicated_job == "dataset-initializer")
        .unwrap();
    assert_eq!(initializer.outcome.mutated_object, None, "nothing to add");
    let node_1 = pods
        .iter()
        .find(|p| p.sim.hostname == "tj-node-0-1")
        .unwrap();
    let env = resolve(&node_1.pod, &node_1.pod["spec"]["containers"][0]).unwrap();
    assert_eq!(
        get(&env, "JAX_COORDINATOR_ADDRESS"),
        Some("tj-node-0-0.tj:6666")
    );
    assert_eq!(get(&env, "JAX_NUM_PROCESSES"), Some("2"));
    assert_eq!(get(&env, "JAX_PROCESS_ID"), Some("1"));
}

#[test]
fn a_ready_dependency_runs_together_and_counts() {
    // With `status: Ready` the nodes start once the initializer's pods are ready, and both run:
    // the initializer is then JAX process 0 of 3, as without dependsOn.
    let mut request = fixture_request("trainer-initializer", JobSetApi::V09);
    request["object"]["spec"]["replicatedJobs"][1]["dependsOn"][0]["status"] = json!("Ready");
    let (_, _, pods) = run(&request, &no_settings());
    for (host, id) in [
        ("tj-dataset-initializer-0-0", "0"),
        ("tj-node-0-0", "1"),
        ("tj-node-0-1", "2"),
    ] {
        let p = pods.iter().find(|p| p.sim.hostname == host).unwrap();
        let env = resolve(&p.pod, &p.pod["spec"]["containers"][0]).unwrap();
        assert_eq!(get(&env, "JAX_NUM_PROCESSES"), Some("3"), "{host}");
        assert_eq!(get(&env, "JAX_PROCESS_ID"), Some(id), "{host}");
        assert_eq!(
            get(&env, "JAX_COORDINATOR_ADDRESS"),
            Some("tj-dataset-initializer-0-0.tj:6666"),
            "{host}"
        );
    }
}
