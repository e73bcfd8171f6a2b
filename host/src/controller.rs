//! What the API server, the JobSet controller and the Job controller do between
//! `kubectl apply` and a pod reaching admission (SPEC §2), so tests can admit real-looking pods.
use anyhow::{anyhow, bail, Result};
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

/// The name a JobSet ends up with: its own, or one the API server generates after admission.
pub fn final_name(jobset: &Value) -> String {
    let meta = |k: &str| {
        jobset
            .pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    if meta("name").is_empty() {
        format!("{}x7k2p", meta("generateName"))
    } else {
        meta("name").to_string()
    }
}

/// A pod as the Job controller submits it for CREATE.
#[derive(Debug, Clone)]
pub struct SimPod {
    /// `<jobset>-<rjob>-<jobIndex>-<completionIndex>`, the pod's hostname.
    pub hostname: String,
    pub replicated_job: String,
    pub job_index: u64,
    pub completion_index: u64,
    pub object: Value,
}

const EXCLUSIVE_TOPOLOGY: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
const NODE_SELECTOR_STRATEGY: &str = "alpha.jobset.sigs.k8s.io/node-selector-strategy";

fn count(v: Option<&Value>, default: u64) -> u64 {
    v.and_then(Value::as_u64).unwrap_or(default)
}

fn digest(s: &str) -> String {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = String::new();
    for round in 0..5u64 {
        for b in s.bytes() {
            h = (h ^ u64::from(b) ^ round).wrapping_mul(0x0100_0000_01b3);
        }
        out.push_str(&format!("{:08x}", h >> 32));
    }
    out
}

fn merge(target: &mut Map<String, Value>, key: &str, extra: &Map<String, Value>) {
    let slot = target.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    if let Some(m) = slot.as_object_mut() {
        for (k, v) in extra {
            m.insert(k.clone(), v.clone());
        }
    }
}

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
                    if let Some(strategy) = meta["annotations"].get(NODE_SELECTOR_STRATEGY) {
                        jobset_annotations.insert(NODE_SELECTOR_STRATEGY.into(), strategy.clone());
                    }
                }
            }
            let job = JobMeta {
                name: &job_name,
                namespace: &namespace,
                subdomain: dns.then_some(subdomain.as_str()),
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

/// The Job a pod is made for.
struct JobMeta<'a> {
    name: &'a str,
    namespace: &'a str,
    /// The pod's subdomain, when its hostname is to resolve.
    subdomain: Option<&'a str>,
}

/// Pod `k` of an Indexed Job, as the Job controller submits it: the template with the Job's
/// labels and annotations (`extra_*`: the JobSet controller's, for a JobSet's Job), the
/// completion index, hostname `<job>-<k>`, owner reference and tracking finalizer.
fn job_pod(
    template: &Value,
    job: &JobMeta,
    k: u64,
    extra_labels: &Map<String, Value>,
    extra_annotations: &Map<String, Value>,
) -> Result<Value> {
    let controller_uid = digest(&format!("uid/{}/{}", job.namespace, job.name));
    let uid = format!(
        "{}-{}-{}-{}-{}",
        &controller_uid[0..8],
        &controller_uid[8..12],
        &controller_uid[12..16],
        &controller_uid[16..20],
        &controller_uid[20..32]
    );
    let mut pod = template.clone();
    let pod_obj = pod
        .as_object_mut()
        .ok_or_else(|| anyhow!("pod template is not an object"))?;
    let metadata = pod_obj.entry("metadata").or_insert_with(|| json!({}));
    let metadata = metadata
        .as_object_mut()
        .ok_or_else(|| anyhow!("pod template metadata is not an object"))?;
    let mut labels = extra_labels.clone();
    let mut annotations = extra_annotations.clone();
    for (key, value) in [
        ("batch.kubernetes.io/controller-uid", uid.clone()),
        ("batch.kubernetes.io/job-name", job.name.to_string()),
        ("controller-uid", uid.clone()),
        ("job-name", job.name.to_string()),
        ("batch.kubernetes.io/job-completion-index", k.to_string()),
    ] {
        labels.insert(key.into(), json!(value));
    }
    annotations.insert(
        "batch.kubernetes.io/job-completion-index".into(),
        json!(k.to_string()),
    );
    merge(metadata, "labels", &labels);
    merge(metadata, "annotations", &annotations);
    metadata.remove("name");
    metadata.insert("generateName".into(), json!(format!("{}-{k}-", job.name)));
    metadata.insert("namespace".into(), json!(job.namespace));
    metadata.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": "batch/v1", "kind": "Job", "name": job.name, "uid": uid,
            "controller": true, "blockOwnerDeletion": true
        }]),
    );
    metadata.insert(
        "finalizers".into(),
        json!(["batch.kubernetes.io/job-tracking"]),
    );
    let spec = pod_obj.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        bail!("pod template spec is not an object");
    };
    spec.insert("hostname".into(), json!(format!("{}-{k}", job.name)));
    if let Some(subdomain) = job.subdomain {
        spec.insert("subdomain".into(), json!(subdomain));
    }
    Ok(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": pod_obj["metadata"], "spec": pod_obj["spec"]}),
    )
}

/// Every pod of a plain Indexed Job, as the Job controller creates them: `<job>-<k>` for
/// k in 0..completions. The pod keeps the template's own subdomain, if any.
pub fn indexed_job_pods(job: &Value) -> Result<Vec<SimPod>> {
    let name = final_name(job);
    let namespace = job
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let spec = job.get("spec").ok_or_else(|| anyhow!("Job has no spec"))?;
    let parallelism = count(spec.get("parallelism"), 1);
    let completions = count(spec.get("completions"), parallelism);
    let template = spec
        .get("template")
        .ok_or_else(|| anyhow!("Job has no pod template"))?;
    let meta = JobMeta {
        name: &name,
        namespace,
        subdomain: None,
    };
    (0..completions)
        .map(|k| {
            Ok(SimPod {
                hostname: format!("{name}-{k}"),
                replicated_job: String::new(),
                job_index: 0,
                completion_index: k,
                object: job_pod(template, &meta, k, &Map::new(), &Map::new())?,
            })
        })
        .collect()
}
