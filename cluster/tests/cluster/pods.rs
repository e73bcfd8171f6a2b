//! docs/contributing/spec.md §4 on the real pods: the group labels, the multislice and JAX env of each JobSet's
//! pods against the oracle (tests/gen), and each opted-in Job's JAX processes.
use crate::common::Failures;
use multislice_gen::oracle;
use multislice_host::env::{get, resolve};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

pub(crate) fn label<'a>(pod: &'a Value, key: &str) -> &'a str {
    pod["metadata"]["labels"][key].as_str().unwrap_or_default()
}

/// Whether a Job opts in to the JAX env (docs/contributing/spec.md §4.6).
pub(crate) fn is_opted_in_job(job: &Value) -> bool {
    job["metadata"]["annotations"]["multislice.kubewarden.io/jax-distributed"] == "true"
}

pub(crate) fn containers(pod: &Value) -> Vec<Value> {
    ["containers", "initContainers"]
        .iter()
        .flat_map(|l| pod["spec"][l].as_array().cloned().unwrap_or_default())
        .collect()
}

/// docs/contributing/spec.md §4 on every real pod of a JobSet, against the oracle, and the invariants across pods.
pub(crate) fn check_jobset_pods(f: &mut Failures, what: &str, jobset: &Value, pods: &[Value]) {
    let name = jobset["metadata"]["name"].as_str().unwrap_or_default();
    let subdomain = jobset["spec"]["network"]["subdomain"]
        .as_str()
        .unwrap_or(name)
        .to_string();
    let hosts: BTreeSet<String> = pods
        .iter()
        .map(|p| {
            format!(
                "{}.{subdomain}",
                p["spec"]["hostname"].as_str().unwrap_or("")
            )
        })
        .collect();
    let mut slice_ids: BTreeMap<String, BTreeMap<(String, String), BTreeSet<String>>> =
        BTreeMap::new();
    let mut coordinators: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut jax_ids: Vec<(u64, String)> = Vec::new();
    let mut jax_coordinators = BTreeSet::new();
    let mut jax_counts = BTreeSet::new();
    for p in pods {
        let pod_name = p["metadata"]["name"].as_str().unwrap_or_default();
        let rjob = label(p, "jobset.sigs.k8s.io/replicatedjob-name").to_string();
        let job_index: u64 = label(p, "jobset.sigs.k8s.io/job-index")
            .parse()
            .unwrap_or(0);
        let want = oracle::expected(jobset, name, &rjob, job_index);
        for map in ["labels", "annotations"] {
            let m = &p["metadata"][map];
            f.eq(
                m["jobset.sigs.k8s.io/group-name"].clone(),
                json!(want.group),
                &format!("{what}: {pod_name} {map} group-name"),
            );
            f.eq(
                m["jobset.sigs.k8s.io/group-replicas"].clone(),
                json!(want.group_replicas.to_string()),
                &format!("{what}: {pod_name} {map} group-replicas"),
            );
            f.eq(
                m["jobset.sigs.k8s.io/job-group-index"].clone(),
                json!(want.job_group_index.to_string()),
                &format!("{what}: {pod_name} {map} job-group-index"),
            );
        }
        for c in containers(p) {
            let env = match resolve(p, &c) {
                Ok(env) => env,
                Err(e) => {
                    f.0.push(format!("{what}: {pod_name}: {e:#}"));
                    continue;
                }
            };
            let cname = c["name"].as_str().unwrap_or_default();
            // A variable the template sets itself is the user's and stays (docs/contributing/spec.md §4.5).
            let own = own_env(jobset, &rjob, cname);
            let expect = |f: &mut Failures, var: &str, want: Option<&str>| {
                if !own.contains(var) {
                    f.eq(
                        get(&env, var),
                        want,
                        &format!("{what}: {pod_name}/{cname} {var}"),
                    );
                }
            };
            match (&want.multislice, oracle::is_tpu_container(&c)) {
                (Some((num, id, coordinator)), true) => {
                    expect(f, "MEGASCALE_NUM_SLICES", Some(num.to_string().as_str()));
                    expect(f, "MEGASCALE_SLICE_ID", Some(id.to_string().as_str()));
                    expect(
                        f,
                        "MEGASCALE_COORDINATOR_ADDRESS",
                        Some(coordinator.as_str()),
                    );
                    let k = want.tpu_containers.iter().position(|n| n == cname);
                    let port = (want.tpu_containers.len() >= 2)
                        .then(|| k.map(|k| (8081 + k).to_string()))
                        .flatten();
                    expect(f, "MEGASCALE_PORT", port.as_deref());
                    if let Some(slice) = get(&env, "MEGASCALE_SLICE_ID")
                        .filter(|_| !own.contains("MEGASCALE_SLICE_ID"))
                    {
                        slice_ids
                            .entry(want.group.clone())
                            .or_default()
                            .entry((rjob.clone(), job_index.to_string()))
                            .or_default()
                            .insert(slice.to_string());
                    }
                    if let Some(c) = get(&env, "MEGASCALE_COORDINATOR_ADDRESS")
                        .filter(|_| !own.contains("MEGASCALE_COORDINATOR_ADDRESS"))
                    {
                        coordinators
                            .entry(want.group.clone())
                            .or_default()
                            .insert(c.to_string());
                    }
                }
                _ => {
                    for var in [
                        "MEGASCALE_NUM_SLICES",
                        "MEGASCALE_SLICE_ID",
                        "MEGASCALE_COORDINATOR_ADDRESS",
                    ] {
                        expect(f, var, None);
                    }
                }
            }
            if let Some(id) = get(&env, "JAX_PROCESS_ID").filter(|_| is_jax_process(p, &c)) {
                let host = format!(
                    "{}.{subdomain}",
                    p["spec"]["hostname"].as_str().unwrap_or("")
                );
                jax_ids.push((id.parse().unwrap_or(u64::MAX), host));
                jax_coordinators.insert(
                    get(&env, "JAX_COORDINATOR_ADDRESS")
                        .unwrap_or("")
                        .to_string(),
                );
                jax_counts.insert(get(&env, "JAX_NUM_PROCESSES").unwrap_or("").to_string());
            }
        }
    }
    for (group, jobs) in &slice_ids {
        let ids: Vec<String> = jobs.values().flat_map(|s| s.iter().cloned()).collect();
        f.check(jobs.values().all(|s| s.len() == 1), || {
            format!("{what}: group {group}: pods of one Job disagree on their slice id: {jobs:?}")
        });
        let got: BTreeSet<u64> = ids.iter().filter_map(|s| s.parse().ok()).collect();
        f.eq(
            got,
            (0..jobs.len() as u64).collect(),
            &format!("{what}: group {group}: slice ids"),
        );
        let Some(coordinator) = coordinators.get(group) else {
            continue;
        };
        f.eq(
            coordinator.len(),
            1,
            &format!("{what}: group {group}: coordinators {coordinator:?}"),
        );
        if let Some(c) = coordinator.iter().next() {
            let host = c.strip_suffix(":8081").unwrap_or(c);
            let outside = jobset["spec"]["coordinator"].is_object();
            f.check(hosts.contains(host) || outside, || {
                format!("{what}: group {group}: coordinator {host} is not a pod")
            });
        }
    }
    if !jax_ids.is_empty() {
        jax_ids.sort();
        let ids: Vec<u64> = jax_ids.iter().map(|(i, _)| *i).collect();
        f.eq(
            ids.clone(),
            (0..ids.len() as u64).collect(),
            &format!("{what}: JAX process ids"),
        );
        f.eq(
            jax_counts.len(),
            1,
            &format!("{what}: JAX_NUM_PROCESSES values {jax_counts:?}"),
        );
        f.eq(
            jax_coordinators.len(),
            1,
            &format!("{what}: JAX coordinators {jax_coordinators:?}"),
        );
        if let Some(c) = jax_coordinators.iter().next() {
            let host = c.rsplit_once(':').map(|(h, _)| h).unwrap_or(c);
            f.eq(
                jax_ids[0].1.as_str(),
                host,
                &format!("{what}: process 0 runs on the JAX coordinator"),
            );
        }
    }
}

/// The env names a replicated job's template sets in one of its containers.
pub(crate) fn own_env(jobset: &Value, rjob: &str, container: &str) -> BTreeSet<String> {
    let spec = jobset["spec"]["replicatedJobs"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["name"] == rjob))
        .map(|r| r["template"]["spec"]["template"]["spec"].clone())
        .unwrap_or_default();
    ["containers", "initContainers"]
        .iter()
        .flat_map(|l| spec[l].as_array().cloned().unwrap_or_default())
        .filter(|c| c["name"] == container)
        .flat_map(|c| c["env"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["name"].as_str().map(str::to_string))
        .collect()
}

/// Whether a container is a JAX process of its pod: tests/gen's one rule
/// ([`oracle::jax_process_containers`]), for the checks here and real JAX in jax.rs.
pub(crate) fn is_jax_process(pod: &Value, c: &Value) -> bool {
    oracle::jax_process_containers(&pod["spec"], oracle::TPU_RESOURCE)
        .iter()
        .any(|n| c["name"] == json!(n))
}

/// docs/contributing/spec.md §4.6 on a plain Job's real pods: process ids 0..N-1, one coordinator, process 0 on it.
pub(crate) fn check_job_pods(f: &mut Failures, what: &str, job: &Value, pods: &[Value]) {
    if !is_opted_in_job(job) {
        for p in pods {
            for c in containers(p) {
                let env = resolve(p, &c).unwrap_or_default();
                f.eq(
                    get(&env, "JAX_PROCESS_ID"),
                    None,
                    &format!("{what}: not opted in"),
                );
            }
        }
        return;
    }
    let subdomain = job["spec"]["template"]["spec"]["subdomain"]
        .as_str()
        .unwrap_or_default();
    let mut ids = Vec::new();
    let mut coordinators = BTreeSet::new();
    for p in pods {
        let host = format!(
            "{}.{subdomain}",
            p["spec"]["hostname"].as_str().unwrap_or("")
        );
        for c in containers(p) {
            let env = resolve(p, &c).unwrap_or_default();
            if let Some(id) = get(&env, "JAX_PROCESS_ID").filter(|_| is_jax_process(p, &c)) {
                ids.push((id.parse::<u64>().unwrap_or(u64::MAX), host.clone()));
                coordinators.insert(
                    get(&env, "JAX_COORDINATOR_ADDRESS")
                        .unwrap_or("")
                        .to_string(),
                );
            }
        }
    }
    ids.sort();
    let only: Vec<u64> = ids.iter().map(|(i, _)| *i).collect();
    f.eq(
        only.clone(),
        (0..only.len() as u64).collect(),
        &format!("{what}: JAX process ids"),
    );
    f.check(!only.is_empty(), || format!("{what}: no pod got JAX env"));
    f.eq(
        coordinators.len(),
        1,
        &format!("{what}: coordinators {coordinators:?}"),
    );
    if let (Some(c), Some((_, host0))) = (coordinators.iter().next(), ids.first()) {
        let host = c.rsplit_once(':').map(|(h, _)| h).unwrap_or(c);
        f.eq(
            host0.as_str(),
            host,
            &format!("{what}: process 0 runs on the coordinator"),
        );
    }
}
