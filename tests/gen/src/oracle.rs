//! What SPEC §3 and §4 say each pod must end up with, computed straight from the JobSet the
//! user wrote, independently of the policy's code.
use serde_json::Value;

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

pub fn is_tpu_container(c: &Value) -> bool {
    ["limits", "requests"].iter().any(|k| {
        match c.pointer(&format!("/resources/{k}/google.com~1tpu")) {
            Some(Value::String(s)) => s != "0",
            Some(Value::Number(n)) => n.as_u64() != Some(0),
            _ => false,
        }
    })
}

pub fn is_tpu(r: &Value) -> bool {
    ["containers", "initContainers"].iter().any(|list| {
        r.pointer(&format!("/template/spec/template/spec/{list}"))
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(is_tpu_container))
    })
}

/// The names of a pod template's (or pod's) TPU containers in SPEC §3 order: containers, then
/// init containers.
pub fn tpu_container_names(pod_spec: &Value) -> Vec<String> {
    ["containers", "initContainers"]
        .iter()
        .flat_map(|list| {
            pod_spec[list]
                .as_array()
                .map(|cs| {
                    cs.iter()
                        .filter(|c| is_tpu_container(c))
                        .map(|c| c["name"].as_str().unwrap_or("").to_string())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .collect()
}

/// What one pod must carry.
#[derive(Debug, PartialEq)]
pub struct Expected {
    pub group: String,
    pub group_replicas: u64,
    pub job_group_index: u64,
    /// (NUM_SLICES, SLICE_ID, COORDINATOR) for TPU replicated jobs.
    pub multislice: Option<(u64, u64, String)>,
    /// The pod's TPU containers in SPEC §3 order; with two or more, container k gets
    /// MEGASCALE_PORT 8081 + k.
    pub tpu_containers: Vec<String>,
}

pub fn expected(jobset: &Value, name: &str, rjob: &str, job_index: u64) -> Expected {
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
    let subdomain = jobset
        .pointer("/spec/network/subdomain")
        .and_then(Value::as_str)
        .unwrap_or(name);
    let multislice = is_tpu(&rjobs[me]).then(|| {
        let slices: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| is_tpu(&rjobs[i]))
            .collect();
        let num = sum(&mut slices.iter());
        let id = sum(&mut slices.iter().filter(|&&i| i < me)) + job_index;
        let tpu_containers =
            tpu_container_names(&rjobs[me]["template"]["spec"]["template"]["spec"]);
        let in_group = |rjob: &str| slices.iter().any(|&i| rjobs[i]["name"] == rjob);
        let coordinator = match jobset.pointer("/spec/coordinator") {
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
        // SPEC §4.2: with several TPU containers, a coordinator of the slice group is named
        // with container 0's DCN port; one outside it (a Pathways head) keeps the bare address.
        let coordinator_rjob = jobset
            .pointer("/spec/coordinator/replicatedJob")
            .and_then(Value::as_str)
            .unwrap_or_else(|| rjobs[slices[0]]["name"].as_str().unwrap());
        let coordinator = if tpu_containers.len() >= 2 && in_group(coordinator_rjob) {
            format!("{coordinator}:8081")
        } else {
            coordinator
        };
        (num, id, coordinator)
    });
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
