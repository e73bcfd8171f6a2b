//! The Job controller: the pods of an Indexed Job, as it submits them for CREATE, whether the
//! Job is a JobSet's or a plain one.
use anyhow::{anyhow, bail, Result};
use serde_json::{json, Map, Value};

/// The name a JobSet or a Job ends up with: its own, or one the API server generates after
/// admission.
pub fn final_name(object: &Value) -> String {
    let meta = |k: &str| {
        object
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

pub(super) fn count(v: Option<&Value>, default: u64) -> u64 {
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

pub(super) fn merge(target: &mut Map<String, Value>, key: &str, extra: &Map<String, Value>) {
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

/// The Job a pod is made for.
pub(super) struct JobMeta<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// The pod's subdomain, when its hostname is to resolve.
    pub subdomain: Option<&'a str>,
    /// `completionMode: Indexed` (JobSet's default); a NonIndexed Job's pods get no completion
    /// index and no hostname from the Job controller.
    pub indexed: bool,
}

impl JobMeta<'_> {
    /// Whether a Job of `spec` (a Job's or a replicated job's template's) is Indexed:
    /// unless it says NonIndexed, as JobSet defaults it (a plain Job asks for it to be judged).
    pub(super) fn is_indexed(spec: &Value) -> bool {
        spec["completionMode"] != "NonIndexed"
    }
}

/// Pod `k` of an Indexed Job, as the Job controller submits it: the template with the Job's
/// labels and annotations (`extra_*`: the JobSet controller's, for a JobSet's Job), the
/// completion index, hostname `<job>-<k>`, owner reference and tracking finalizer.
pub(super) fn job_pod(
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
    ] {
        labels.insert(key.into(), json!(value));
    }
    if job.indexed {
        let index = json!(k.to_string());
        labels.insert(
            "batch.kubernetes.io/job-completion-index".into(),
            index.clone(),
        );
        annotations.insert("batch.kubernetes.io/job-completion-index".into(), index);
    }
    merge(metadata, "labels", &labels);
    merge(metadata, "annotations", &annotations);
    metadata.remove("name");
    let generate_name = if job.indexed {
        format!("{}-{k}-", job.name)
    } else {
        format!("{}-", job.name)
    };
    metadata.insert("generateName".into(), json!(generate_name));
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
    if job.indexed {
        spec.insert("hostname".into(), json!(format!("{}-{k}", job.name)));
    }
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
        indexed: JobMeta::is_indexed(spec),
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
