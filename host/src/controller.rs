//! The controller simulation: what the API server, the JobSet controller and the Job
//! controller (`controller/job.rs`) do between `kubectl apply` and a pod reaching admission
//! (docs/contributing/spec.md §2), so tests can admit real-looking pods. This file holds the API server's serving
//! of a JobSet and the JobSet controller's Jobs.
mod job;

pub use job::{final_name, indexed_job_pods, SimPod};

use anyhow::{anyhow, Result};
use job::{count, job_pod, merge, JobMeta};
use serde_json::{json, Map, Value};

/// Which JobSet CRD the API server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobSetApi {
    /// Before v0.9: `groupName` is pruned from the object before admission.
    V08,
    /// v0.9+: the CRD defaults `groupName` to `default`, and the controller stamps group keys.
    V09,
}

/// The JobSet as the API server hands it to admission under `api`.
pub fn as_served(jobset: &Value, api: JobSetApi) -> Value {
    let mut out = jobset.clone();
    if let Some(rjobs) = out
        .pointer_mut("/spec/replicatedJobs")
        .and_then(Value::as_array_mut)
    {
        for rjob in rjobs.iter_mut().filter_map(Value::as_object_mut) {
            match api {
                JobSetApi::V08 => {
                    rjob.remove("groupName");
                }
                JobSetApi::V09 => {
                    rjob.entry("groupName").or_insert_with(|| json!("default"));
                }
            }
        }
    }
    out
}

const EXCLUSIVE_TOPOLOGY: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
/// The flag of JobSet's node-selector strategy of exclusive placement (`NodeSelectorStrategyKey`).
const NODE_SELECTOR: &str = "alpha.jobset.sigs.k8s.io/node-selector";
/// The node label and the taint that strategy places each Job's pods by.
const NAMESPACED_JOB: &str = "alpha.jobset.sigs.k8s.io/namespaced-job";
const NO_SCHEDULE: &str = "alpha.jobset.sigs.k8s.io/no-schedule";

/// Every pod of an admitted JobSet, in spec order, as the controllers would create them.
pub fn jobset_pods(jobset: &Value) -> Result<Vec<SimPod>> {
    let name = final_name(jobset);
    let namespace = jobset
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let spec = jobset
        .get("spec")
        .ok_or_else(|| anyhow!("JobSet has no spec"))?;
    let rjobs = spec
        .get("replicatedJobs")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("JobSet has no replicatedJobs"))?;
    let subdomain = spec
        .pointer("/network/subdomain")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(&name)
        .to_string();
    let dns = spec
        .pointer("/network/enableDNSHostnames")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let coordinator = spec.get("coordinator").map(|c| {
        format!(
            "{name}-{}-{}-{}.{subdomain}",
            c.get("replicatedJob").and_then(Value::as_str).unwrap_or(""),
            count(c.get("jobIndex"), 0),
            count(c.get("podIndex"), 0)
        )
    });
    let replicas: Vec<u64> = rjobs.iter().map(|r| count(r.get("replicas"), 1)).collect();
    let global_replicas: u64 = replicas.iter().sum();
    let group_of = |r: &Value| {
        r.get("groupName")
            .and_then(Value::as_str)
            .map(str::to_string)
    };

    let mut pods = Vec::new();
    let mut global_offset = 0u64;
    for (i, rjob) in rjobs.iter().enumerate() {
        let rjob_name = rjob
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("replicatedJobs[{i}] has no name"))?;
        // v0.9 semantics: group replicas and this rjob's offset within its group.
        let group = group_of(rjob);
        let (group_replicas, group_offset) = match &group {
            Some(g) => {
                let members: Vec<usize> = (0..rjobs.len())
                    .filter(|&k| group_of(&rjobs[k]).as_deref() == Some(g.as_str()))
                    .collect();
                let total: u64 = members.iter().map(|&k| replicas[k]).sum();
                let offset: u64 = members
                    .iter()
                    .filter(|&&k| k < i)
                    .map(|&k| replicas[k])
                    .sum();
                (total, offset)
            }
            None => (0, 0),
        };
        let job_spec = rjob
            .pointer("/template/spec")
            .ok_or_else(|| anyhow!("replicatedJobs[{i}] has no template.spec"))?;
        let parallelism = count(job_spec.get("parallelism"), 1);
        let completions = count(job_spec.get("completions"), parallelism);
        let template = job_spec
            .get("template")
            .cloned()
            .ok_or_else(|| anyhow!("replicatedJobs[{i}] has no pod template"))?;

        for j in 0..replicas[i] {
            let job_name = format!("{name}-{rjob_name}-{j}");
            let mut jobset_keys = Map::new();
            let mut put = |k: &str, v: String| {
                jobset_keys.insert(format!("jobset.sigs.k8s.io/{k}"), Value::String(v));
            };
            put("jobset-name", name.clone());
            put("replicatedjob-name", rjob_name.to_string());
            put("replicatedjob-replicas", replicas[i].to_string());
            put("job-index", j.to_string());
            put("job-global-index", (global_offset + j).to_string());
            put("global-replicas", global_replicas.to_string());
            // jobHashKey: the SHA-1 of "<namespace>/<job name>", in hex.
            put(
                "job-key",
                sha1_smol::Sha1::from(format!("{namespace}/{job_name}"))
                    .digest()
                    .to_string(),
            );
            put("restart-attempt", "0".into());
            if let Some(g) = &group {
                put("group-name", g.clone());
                put("group-replicas", group_replicas.to_string());
                put("job-group-index", (group_offset + j).to_string());
            }
            // The coordinator goes on as a label and an annotation (labelAndAnnotateObject).
            if let Some(c) = &coordinator {
                jobset_keys.insert("jobset.sigs.k8s.io/coordinator".into(), json!(c));
            }
            let mut jobset_annotations = jobset_keys.clone();
            // Exclusive placement goes on as annotations only: the JobSet's, then the
            // replicated job's over it (labelAndAnnotateObject).
            for meta in [&jobset["metadata"], &rjob["template"]["metadata"]] {
                if let Some(topology) = meta["annotations"].get(EXCLUSIVE_TOPOLOGY) {
                    jobset_annotations.insert(EXCLUSIVE_TOPOLOGY.into(), topology.clone());
                    if let Some(flag) = meta["annotations"].get(NODE_SELECTOR) {
                        jobset_annotations.insert(NODE_SELECTOR.into(), flag.clone());
                    }
                }
            }
            // constructJob: the Job's annotations are its template's with the same ones over
            // them; with the key and the flag among them, its pods go to the node pool
            // labelled and tainted for this Job.
            let on_job = |k: &str| {
                jobset_annotations.contains_key(k)
                    || rjob["template"]["metadata"]["annotations"].get(k).is_some()
            };
            let mut template = template.clone();
            if on_job(EXCLUSIVE_TOPOLOGY) && on_job(NODE_SELECTOR) {
                place_on_own_pool(&mut template, &format!("{namespace}_{job_name}"))?;
            }
            let job = JobMeta {
                name: &job_name,
                namespace: &namespace,
                subdomain: dns.then_some(subdomain.as_str()),
                indexed: JobMeta::is_indexed(job_spec),
            };
            for k in 0..completions {
                let object = job_pod(&template, &job, k, &jobset_keys, &jobset_annotations)
                    .map_err(|e| anyhow!("replicatedJobs[{i}]: {e}"))?;
                pods.push(SimPod {
                    hostname: format!("{job_name}-{k}"),
                    replicated_job: rjob_name.to_string(),
                    job_index: j,
                    completion_index: k,
                    object,
                });
            }
        }
        global_offset += replicas[i];
    }
    Ok(pods)
}

/// constructJob under the node-selector strategy: the pod template selects the nodes labelled
/// `namespaced-job: <pool>` and tolerates their `no-schedule` taint.
fn place_on_own_pool(template: &mut Value, pool: &str) -> Result<()> {
    let spec = template
        .as_object_mut()
        .ok_or_else(|| anyhow!("pod template is not an object"))?
        .entry("spec")
        .or_insert_with(|| json!({}));
    let spec = spec
        .as_object_mut()
        .ok_or_else(|| anyhow!("pod template spec is not an object"))?;
    merge(
        spec,
        "nodeSelector",
        &Map::from_iter([(NAMESPACED_JOB.into(), json!(pool))]),
    );
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if !tolerations.is_array() {
        *tolerations = json!([]);
    }
    if let Some(list) = tolerations.as_array_mut() {
        list.push(json!({"key": NO_SCHEDULE, "operator": "Exists", "effect": "NoSchedule"}));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
