//! What docs/contributing/spec.md §3 and §4 say each pod must end up with, computed straight from the JobSet the
//! user wrote and the settings, independently of the policy's code.
use serde_json::Value;
use std::collections::BTreeMap;

/// The TPU resource when the setting `tpuResource` is not given (docs/contributing/spec.md §3, §8).
pub const TPU_RESOURCE: &str = "google.com/tpu";

/// The settings the env depends on (docs/contributing/spec.md §8), read from the settings object sent with the
/// request, each with its default.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub multislice_env: bool,
    pub tpu_worker_env: bool,
    /// `annotated`, `always` or `never`.
    pub jax_env: String,
    pub jax_coordinator_port: u64,
    pub tpu_resource: String,
}

impl Settings {
    pub fn from_json(settings: &Value) -> Settings {
        let flag = |key: &str, default: bool| {
            settings
                .get(key)
                .and_then(Value::as_bool)
                .unwrap_or(default)
        };
        Settings {
            multislice_env: flag("multisliceEnv", true),
            tpu_worker_env: flag("tpuWorkerEnv", false),
            jax_env: settings
                .get("jaxEnv")
                .and_then(Value::as_str)
                .unwrap_or("annotated")
                .to_string(),
            jax_coordinator_port: settings
                .get("jaxCoordinatorPort")
                .and_then(Value::as_u64)
                .unwrap_or(6666),
            tpu_resource: settings
                .get("tpuResource")
                .and_then(Value::as_str)
                .unwrap_or(TPU_RESOURCE)
                .to_string(),
        }
    }
}

pub fn replicas(r: &Value) -> u64 {
    r.get("replicas").and_then(Value::as_u64).unwrap_or(1)
}

pub fn group(r: &Value) -> String {
    r.get("groupName")
        .and_then(Value::as_str)
        .or_else(|| {
            r.pointer("/template/metadata/annotations/jobset.sigs.k8s.io~1group-name")
                .and_then(Value::as_str)
        })
        .unwrap_or("default")
        .to_string()
}

/// Whether another replicated job waits for `rjobs[i]` to complete (`dependsOn` with
/// `status: Complete`): it runs before them, and is no slice, JAX process or coordinator of
/// theirs (docs/contributing/spec.md §3).
pub fn runs_first(rjobs: &[Value], i: usize) -> bool {
    rjobs.iter().any(|r| {
        r["dependsOn"].as_array().is_some_and(|deps| {
            deps.iter()
                .any(|d| d["name"] == rjobs[i]["name"] && d["status"] == "Complete")
        })
    })
}

/// `spec.coordinator`, unless it names a replicated job that runs first.
fn running_coordinator(jobset: &Value) -> Option<&Value> {
    let rjobs = jobset["spec"]["replicatedJobs"].as_array()?;
    let c = jobset.pointer("/spec/coordinator")?;
    match rjobs.iter().position(|r| r["name"] == c["replicatedJob"]) {
        Some(i) if runs_first(rjobs, i) => None,
        _ => Some(c),
    }
}

/// The TPU replicated jobs with pods whose slice group has more than one slice: the ones
/// that get `MEGASCALE_*` env (docs/contributing/spec.md §4.2).
pub fn tpu_rjobs_in_multislices(jobset: &Value, resource: &str) -> usize {
    let rjobs = jobset["spec"]["replicatedJobs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let slices_of = |g: &str| -> u64 {
        rjobs
            .iter()
            .enumerate()
            .filter(|(i, r)| is_tpu_of(r, resource) && !runs_first(&rjobs, *i) && group(r) == g)
            .map(|(_, r)| replicas(r))
            .sum()
    };
    rjobs
        .iter()
        .enumerate()
        .filter(|(i, r)| is_tpu_of(r, resource) && !runs_first(&rjobs, *i) && replicas(r) > 0)
        .filter(|(_, r)| slices_of(&group(r)) > 1)
        .count()
}

/// The slice groups of more than one slice whose coordinator, named by `spec.coordinator`,
/// runs no TPU container while their pods run JAX (the opt-in annotation, default settings):
/// each earns the JobSet CREATE warning of docs/contributing/spec.md §4.2, unless every TPU
/// container of the group sets `MEGASCALE_COORDINATOR_ADDRESS` itself.
pub fn groups_with_a_coordinator_without_tpus(jobset: &Value, resource: &str) -> usize {
    let jax =
        jobset["metadata"]["annotations"]["multislice.kubewarden.io/jax-distributed"] == "true";
    let Some(rjobs) = jobset["spec"]["replicatedJobs"].as_array() else {
        return 0;
    };
    let Some(c) = running_coordinator(jobset) else {
        return 0;
    };
    let named = rjobs.iter().find(|r| r["name"] == c["replicatedJob"]);
    if !jax || named.is_none_or(|r| is_tpu_of(r, resource)) {
        return 0;
    }
    let sets_its_own = |r: &Value| {
        let spec = &r["template"]["spec"]["template"]["spec"];
        ["containers", "initContainers"]
            .iter()
            .flat_map(|l| spec[l].as_array().into_iter().flatten())
            .filter(|c| is_tpu_container_of(c, resource))
            .all(|c| {
                own_entries(c)
                    .iter()
                    .any(|e| e["name"] == "MEGASCALE_COORDINATOR_ADDRESS")
            })
    };
    let mut groups: Vec<(String, u64, bool)> = Vec::new();
    for (i, r) in rjobs.iter().enumerate() {
        if !is_tpu_of(r, resource) || runs_first(rjobs, i) {
            continue;
        }
        let g = group(r);
        match groups.iter_mut().find(|(name, _, _)| *name == g) {
            Some(entry) => {
                entry.1 += replicas(r);
                entry.2 &= sets_its_own(r);
            }
            None => groups.push((g, replicas(r), sets_its_own(r))),
        }
    }
    groups
        .iter()
        .filter(|(_, slices, own)| *slices > 1 && !own)
        .count()
}

/// Whether the container holds a non-zero quantity of the default TPU resource (docs/contributing/spec.md §3).
pub fn is_tpu_container(c: &Value) -> bool {
    is_tpu_container_of(c, TPU_RESOURCE)
}

/// Whether the container holds a non-zero quantity of `resource` (the setting `tpuResource`).
pub fn is_tpu_container_of(c: &Value, resource: &str) -> bool {
    ["limits", "requests"].iter().any(|k| {
        match c
            .get("resources")
            .and_then(|r| r.get(k))
            .and_then(|q| q.get(resource))
        {
            Some(Value::String(s)) => s != "0",
            Some(Value::Number(n)) => n.as_u64() != Some(0),
            _ => false,
        }
    })
}

pub fn is_tpu(r: &Value) -> bool {
    is_tpu_of(r, TPU_RESOURCE)
}

/// Whether the replicated job's pod template holds a container of `resource`.
pub fn is_tpu_of(r: &Value, resource: &str) -> bool {
    !tpu_container_names_of(&r["template"]["spec"]["template"]["spec"], resource).is_empty()
}

/// The names of a pod template's (or pod's) TPU containers in docs/contributing/spec.md §3 order: containers, then
/// init containers.
pub fn tpu_container_names(pod_spec: &Value) -> Vec<String> {
    tpu_container_names_of(pod_spec, TPU_RESOURCE)
}

/// [`tpu_container_names`] for the TPU resource `resource`.
pub fn tpu_container_names_of(pod_spec: &Value, resource: &str) -> Vec<String> {
    ["containers", "initContainers"]
        .iter()
        .flat_map(|list| {
            pod_spec[list]
                .as_array()
                .map(|cs| {
                    cs.iter()
                        .filter(|c| is_tpu_container_of(c, resource))
                        .map(|c| c["name"].as_str().unwrap_or("").to_string())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .collect()
}

/// The containers of a pod (or pod template) that are its JAX processes (docs/contributing/spec.md §4.4, §4.6), by
/// name, in docs/contributing/spec.md §3 order: each container of the TPU resource `resource` when the pod has any,
/// else the pod's first container (the one process of a pod without TPU containers). Which
/// containers *receive* the JAX env is each object's own rule; this says which of them run a
/// JAX process, for tests/gen's oracle and Job property and for the cluster tests alike.
pub fn jax_process_containers(pod_spec: &Value, resource: &str) -> Vec<String> {
    let tpu = tpu_container_names_of(pod_spec, resource);
    if !tpu.is_empty() {
        return tpu;
    }
    ["containers", "initContainers"]
        .iter()
        .find_map(|list| pod_spec[list].as_array()?.first())
        .map(|c| vec![c["name"].as_str().unwrap_or("").to_string()])
        .unwrap_or_default()
}

/// What one pod must carry.
#[derive(Debug, PartialEq)]
pub struct Expected {
    pub group: String,
    pub group_replicas: u64,
    pub job_group_index: u64,
    /// (NUM_SLICES, SLICE_ID, COORDINATOR) for TPU replicated jobs.
    pub multislice: Option<(u64, u64, String)>,
    /// The pod's TPU containers in docs/contributing/spec.md §3 order; with two or more, container k gets
    /// MEGASCALE_PORT 8081 + k.
    pub tpu_containers: Vec<String>,
}

pub fn expected(jobset: &Value, name: &str, rjob: &str, job_index: u64) -> Expected {
    expected_of(jobset, name, rjob, job_index, TPU_RESOURCE)
}

/// [`expected`] where the TPU resource is `resource`.
pub fn expected_of(
    jobset: &Value,
    name: &str,
    rjob: &str,
    job_index: u64,
    resource: &str,
) -> Expected {
    let is_tpu = |r: &Value| is_tpu_of(r, resource);
    let tpu_container_names = |spec: &Value| tpu_container_names_of(spec, resource);
    let rjobs = jobset["spec"]["replicatedJobs"].as_array().unwrap();
    let me = rjobs.iter().position(|r| r["name"] == rjob).unwrap();
    let my_group = group(&rjobs[me]);
    let members: Vec<usize> = (0..rjobs.len())
        .filter(|&i| group(&rjobs[i]) == my_group)
        .collect();
    let sum =
        |idx: &mut dyn Iterator<Item = &usize>| idx.map(|&i| replicas(&rjobs[i])).sum::<u64>();
    let group_replicas = sum(&mut members.iter());
    let job_group_index = sum(&mut members.iter().filter(|&&i| i < me)) + job_index;
    let subdomain = subdomain(jobset, name);
    let running = |i: usize| !runs_first(rjobs, i);
    let multislice = (is_tpu(&rjobs[me]) && running(me)).then(|| {
        let subdomain = subdomain.as_str();
        let slices: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| is_tpu(&rjobs[i]) && running(i))
            .collect();
        let num = sum(&mut slices.iter());
        let id = sum(&mut slices.iter().filter(|&&i| i < me)) + job_index;
        let tpu_containers =
            tpu_container_names(&rjobs[me]["template"]["spec"]["template"]["spec"]);
        let in_group = |rjob: &str| slices.iter().any(|&i| rjobs[i]["name"] == rjob);
        let coordinator = match running_coordinator(jobset) {
            Some(c) => format!(
                "{name}-{}-{}-{}.{subdomain}",
                c["replicatedJob"].as_str().unwrap(),
                c.get("jobIndex").and_then(Value::as_u64).unwrap_or(0),
                c.get("podIndex").and_then(Value::as_u64).unwrap_or(0)
            ),
            // Pod 0 of job 0 of the first slice with replicas > 0: `replicas: 0` has no pods.
            None => {
                let first = slices
                    .iter()
                    .copied()
                    .find(|&i| replicas(&rjobs[i]) > 0)
                    .unwrap_or(slices[0]);
                format!(
                    "{name}-{}-0-0.{subdomain}",
                    rjobs[first]["name"].as_str().unwrap()
                )
            }
        };
        // docs/contributing/spec.md §4.2: a coordinator of the slice group is named with the DCN port its
        // first TPU container sets itself, else, with several TPU containers, with container
        // 0's (8081); one outside it (a Pathways head) keeps the bare address.
        let coordinator_rjob = running_coordinator(jobset)
            .and_then(|c| c["replicatedJob"].as_str())
            .unwrap_or_else(|| rjobs[slices[0]]["name"].as_str().unwrap());
        let own_port = rjobs
            .iter()
            .find(|r| r["name"] == coordinator_rjob)
            .and_then(|r| {
                let spec = &r["template"]["spec"]["template"]["spec"];
                let first = tpu_container_names(spec).into_iter().next()?;
                let c = ["containers", "initContainers"]
                    .iter()
                    .flat_map(|l| spec[l].as_array().into_iter().flatten())
                    .find(|c| c["name"] == first.as_str())?;
                own_entries(c)
                    .into_iter()
                    .rev()
                    .find(|e| e["name"] == "MEGASCALE_PORT")?
                    .get("value")?
                    .as_str()
                    .map(str::to_string)
            });
        let coordinator = match own_port {
            Some(port) if in_group(coordinator_rjob) => format!("{coordinator}:{port}"),
            _ if tpu_containers.len() >= 2 && in_group(coordinator_rjob) => {
                format!("{coordinator}:8081")
            }
            _ => coordinator,
        };
        (num, id, coordinator)
    });
    // One slice has no DCN peers: no multislice env (docs/contributing/spec.md §4.2).
    let multislice = multislice.filter(|(num, _, _)| *num > 1);
    let tpu_containers = if multislice.is_some() {
        tpu_container_names(&rjobs[me]["template"]["spec"]["template"]["spec"])
    } else {
        Vec::new()
    };
    Expected {
        group: my_group,
        group_replicas,
        job_group_index,
        multislice,
        tpu_containers,
    }
}

/// `spec.network.subdomain`, or the JobSet's name when it is unset or empty (docs/contributing/spec.md §2).
pub fn subdomain(jobset: &Value, name: &str) -> String {
    jobset
        .pointer("/spec/network/subdomain")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(name)
        .to_string()
}

fn parallelism(r: &Value) -> u64 {
    r.pointer("/template/spec/parallelism")
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

/// The pods a replicated job makes: replicas × parallelism.
fn pods_of(r: &Value) -> u64 {
    replicas(r) * parallelism(r)
}

/// Where a pod is in its JobSet, as the controllers made it.
#[derive(Debug, Clone, Copy)]
pub struct PodAt<'a> {
    pub rjob: &'a str,
    pub job_index: u64,
    pub completion_index: u64,
}

/// Each container's variables from the policy (docs/contributing/spec.md §4.2 multislice, §4.3 TPU host, §4.4
/// JAX), by container name, every container of the pod listed: what its env holds before the
/// user's own entries. A variable the container sets itself is not there: the user's entry
/// stays as it is (§4.2), and a `TPU_PROCESS_PORT` of the user's is the one the address lists
/// name (§4.3).
pub fn policy_env(
    jobset: &Value,
    name: &str,
    settings: &Settings,
    at: PodAt,
) -> BTreeMap<String, BTreeMap<String, String>> {
    let resource = settings.tpu_resource.as_str();
    let rjobs = jobset["spec"]["replicatedJobs"].as_array().unwrap();
    let me = rjobs.iter().position(|r| r["name"] == at.rjob).unwrap();
    let rjob = &rjobs[me];
    let pod_spec = &rjob["template"]["spec"]["template"]["spec"];
    let all: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|list| pod_spec[list].as_array().into_iter().flatten())
        .collect();
    let container_name = |c: &Value| c["name"].as_str().unwrap_or("").to_string();
    let mut out: BTreeMap<String, BTreeMap<String, String>> = all
        .iter()
        .map(|c| (container_name(c), BTreeMap::new()))
        .collect();
    // TPU container k of n, in docs/contributing/spec.md §3 order.
    let tpu = tpu_container_names_of(pod_spec, resource);
    let n = tpu.len() as u64;
    let subdomain = subdomain(jobset, name);
    let host = |rjob: &str, job: u64, pod: u64| format!("{name}-{rjob}-{job}-{pod}.{subdomain}");
    let mut give = |container: &str, var: &str, value: String| {
        out.get_mut(container)
            .unwrap()
            .insert(var.to_string(), value);
    };

    // §4.2: the multislice env of each TPU container.
    if n > 0 && settings.multislice_env {
        let want = expected_of(jobset, name, at.rjob, at.job_index, resource);
        for (k, c) in (0u64..).zip(&tpu) {
            let Some((num, id, coordinator)) = &want.multislice else {
                break;
            };
            give(c, "MEGASCALE_NUM_SLICES", num.to_string());
            give(c, "MEGASCALE_SLICE_ID", id.to_string());
            give(c, "MEGASCALE_COORDINATOR_ADDRESS", coordinator.clone());
            if n >= 2 {
                give(c, "MEGASCALE_PORT", (8081 + k).to_string());
            }
        }
    }

    // §4.3: the TPU host env, the slice being the pod's own Job.
    if n > 0 && settings.tpu_worker_env {
        let hosts: Vec<String> = (0..parallelism(rjob))
            .map(|i| host(at.rjob, at.job_index, i))
            .collect();
        // Container k's port: its own literal TPU_PROCESS_PORT, else 8476 + k.
        let ports: Vec<String> = (0u64..)
            .zip(&tpu)
            .map(|(k, c)| {
                let container = all.iter().find(|x| x["name"] == c.as_str()).unwrap();
                own_entries(container)
                    .into_iter()
                    .rev()
                    .find(|e| e["name"] == "TPU_PROCESS_PORT")
                    .and_then(|e| e.get("value").and_then(Value::as_str).map(str::to_string))
                    .unwrap_or_else(|| (8476 + k).to_string())
            })
            .collect();
        let hostnames: Vec<&str> = hosts
            .iter()
            .flat_map(|h| std::iter::repeat_n(h.as_str(), tpu.len()))
            .collect();
        let addresses: Vec<String> = hosts
            .iter()
            .flat_map(|h| ports.iter().map(move |p| format!("{h}:{p}")))
            .collect();
        for (k, c) in (0u64..).zip(&tpu) {
            give(
                c,
                "TPU_WORKER_ID",
                (at.completion_index * n + k).to_string(),
            );
            give(c, "TPU_WORKER_HOSTNAMES", hostnames.join(","));
            give(c, "TPU_PROCESS_PORT", ports[k as usize].clone());
            give(c, "TPU_PROCESS_ADDRESSES", addresses.join(","));
            give(
                c,
                "TPU_NAME",
                format!("{name}-{}-{}", at.rjob, at.job_index),
            );
        }
    }

    // §4.4: the JAX env, over the pod's slice group in a TPU JobSet, else its replica group.
    let opted_in = jobset
        .pointer("/metadata/annotations/multislice.kubewarden.io~1jax-distributed")
        .and_then(Value::as_str)
        == Some("true");
    let jax_on = match settings.jax_env.as_str() {
        "always" => true,
        "never" => false,
        _ => opted_in,
    };
    // Replicated jobs that run first are no JAX processes of the others (docs/contributing/spec.md §3).
    let running = |i: usize| !runs_first(rjobs, i);
    let tpu_jobset = (0..rjobs.len()).any(|i| is_tpu_of(&rjobs[i], resource) && running(i));
    let my_group = group(rjob);
    let batch = batch_beside_jax(jobset, settings);
    let members: Vec<usize> = (0..rjobs.len())
        .filter(|&i| group(&rjobs[i]) == my_group && running(i))
        .filter(|&i| !tpu_jobset || is_tpu_of(&rjobs[i], resource))
        .filter(|&i| !batch[i])
        .collect();
    if jax_on && members.contains(&me) {
        // Each member's first pod number: the pods of the members before it.
        let start = |m: usize| -> u64 {
            members
                .iter()
                .take_while(|&&i| i != m)
                .map(|&i| pods_of(&rjobs[i]))
                .sum()
        };
        let total: u64 = members.iter().map(|&i| pods_of(&rjobs[i])).sum();
        let number = |m: usize, job: u64, pod: u64| start(m) + job * parallelism(&rjobs[m]) + pod;
        // Process 0: spec.coordinator when it names a member, else the first member's first pod.
        let named = jobset.pointer("/spec/coordinator").and_then(|c| {
            let m = members
                .iter()
                .copied()
                .find(|&i| rjobs[i]["name"] == c["replicatedJob"])?;
            let job = c.get("jobIndex").and_then(Value::as_u64).unwrap_or(0);
            let pod = c.get("podIndex").and_then(Value::as_u64).unwrap_or(0);
            Some((
                host(rjobs[m]["name"].as_str().unwrap(), job, pod),
                number(m, job, pod),
            ))
        });
        let first = members
            .iter()
            .find(|&&i| pods_of(&rjobs[i]) > 0)
            .map(|&i| (host(rjobs[i]["name"].as_str().unwrap(), 0, 0), 0));
        let (coordinator, coordinator_number) = named.or(first).expect("the pod's group has pods");
        let address = format!("{coordinator}:{}", settings.jax_coordinator_port);
        let id = match number(me, at.job_index, at.completion_index) {
            x if x == coordinator_number => 0,
            0 => coordinator_number,
            x => x,
        };
        // The pod's JAX processes: its TPU containers in a TPU JobSet (every member is a TPU
        // replicated job), else its first container, whose env every container shares.
        let processes = jax_process_containers(pod_spec, resource);
        let per_pod = processes.len() as u64;
        if tpu_jobset {
            for (k, c) in (0u64..).zip(&processes) {
                give(c, "JAX_COORDINATOR_ADDRESS", address.clone());
                give(c, "JAX_NUM_PROCESSES", (total * per_pod).to_string());
                give(c, "JAX_PROCESS_ID", (id * per_pod + k).to_string());
            }
        } else {
            for c in &all {
                let c = container_name(c);
                give(&c, "JAX_COORDINATOR_ADDRESS", address.clone());
                give(&c, "JAX_NUM_PROCESSES", (total * per_pod).to_string());
                give(&c, "JAX_PROCESS_ID", id.to_string());
            }
        }
    }

    // A variable the container sets itself is the user's (docs/contributing/spec.md §4.2, and §4.4 by reference).
    for c in &all {
        let own: Vec<Value> = own_entries(c);
        let vars = out.get_mut(&container_name(c)).unwrap();
        vars.retain(|var, _| !own.iter().any(|e| e["name"] == var.as_str()));
    }
    out
}

/// Which replicated jobs are batch jobs beside the JAX run (docs/rules.md, P1–P3), by index: a
/// non-TPU member of a JAX group that is not Indexed, does not run every pod at once, or holds
/// `spec.coordinator` at or past its parallelism, has pods, and either the JAX env is on by
/// `jaxEnv: always` alone, or it is alone in its group (no other member has pods) while another
/// group has pods and only members that keep all three. Such a job gets no JAX env.
pub fn batch_beside_jax(jobset: &Value, settings: &Settings) -> Vec<bool> {
    let resource = settings.tpu_resource.as_str();
    let rjobs = jobset["spec"]["replicatedJobs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let opted_in =
        jobset["metadata"]["annotations"]["multislice.kubewarden.io/jax-distributed"] == "true";
    let on = match settings.jax_env.as_str() {
        "always" => true,
        "never" => false,
        _ => opted_in,
    };
    let running = |i: usize| !runs_first(&rjobs, i);
    let tpu_jobset = (0..rjobs.len()).any(|i| is_tpu_of(&rjobs[i], resource) && running(i));
    let candidate = |i: usize| on && running(i) && (!tpu_jobset || is_tpu_of(&rjobs[i], resource));
    let coordinator = running_coordinator(jobset);
    let keeps = |i: usize| {
        let spec = &rjobs[i]["template"]["spec"];
        let p = parallelism(&rjobs[i]);
        let named_past = coordinator.is_some_and(|c| {
            c["replicatedJob"] == rjobs[i]["name"]
                && c.get("podIndex").and_then(Value::as_u64).unwrap_or(0) >= p
        });
        replicas(&rjobs[i]) == 0
            || (spec["completionMode"]
                .as_str()
                .is_none_or(|m| m == "Indexed")
                && spec["completions"].as_u64() == Some(p)
                && !named_past)
    };
    let in_group = |g: &str| {
        (0..rjobs.len())
            .filter(|&i| candidate(i) && group(&rjobs[i]) == g)
            .collect::<Vec<_>>()
    };
    let a_group_keeps = (0..rjobs.len()).filter(|&i| candidate(i)).any(|i| {
        let members = in_group(&group(&rjobs[i]));
        members.iter().any(|&m| replicas(&rjobs[m]) > 0) && members.iter().all(|&m| keeps(m))
    });
    (0..rjobs.len())
        .map(|i| {
            let alone = in_group(&group(&rjobs[i]))
                .iter()
                .all(|&o| o == i || replicas(&rjobs[o]) == 0);
            candidate(i)
                && !is_tpu_of(&rjobs[i], resource)
                && !keeps(i)
                && (!opted_in || (alone && a_group_keeps))
        })
        .collect()
}

/// The container's own `env` entries.
pub fn own_entries(container: &Value) -> Vec<Value> {
    container["env"].as_array().cloned().unwrap_or_default()
}
