//! Structured JobSets and pods, built from fuzzer input so that most of them get past JSON
//! parsing and exercise the view, the rules, the groups and the mutation.
#![no_main]
use arbitrary::Arbitrary;
use jobset_multislice_policy::admission::evaluate;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

#[derive(Arbitrary, Debug)]
enum Num {
    Small(u8),
    Any(i64),
    Float(f64),
    Text(String),
    Null,
}

impl Num {
    fn json(&self) -> Value {
        match self {
            Num::Small(n) => json!(n),
            Num::Any(n) => json!(n),
            Num::Float(f) => json!(f),
            Num::Text(s) => json!(s),
            Num::Null => Value::Null,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Container {
    name: String,
    tpu: Option<Num>,
    in_init: bool,
    env: Vec<(String, Option<String>)>,
}

#[derive(Arbitrary, Debug)]
struct Rjob {
    name: String,
    group_field: Option<String>,
    group_annotation: Option<String>,
    replicas: Num,
    parallelism: Num,
    completions: Option<Num>,
    completion_mode: Option<String>,
    selector: Vec<(String, String)>,
    exclusive: Option<String>,
    node_selector_flag: bool,
    containers: Vec<Container>,
    facts: Option<String>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    name: String,
    generate_name: bool,
    suspend: Option<bool>,
    dns: Option<bool>,
    subdomain: Option<String>,
    jax: bool,
    exclusive: Option<String>,
    coordinator: Option<(String, Num, Num)>,
    rjobs: Vec<Rjob>,
    operation: u8,
    settings: u8,
    /// Which pod to admit after the JobSet, as (rjob, job index, completion index) labels.
    pod: Option<(String, Num, Num, Option<String>)>,
}

fn rjob_json(r: &Rjob) -> Value {
    let (init, regular): (Vec<&Container>, Vec<&Container>) = r.containers.iter().partition(|c| c.in_init);
    let container = |c: &&Container| {
        let mut v = json!({"name": c.name, "env": c.env.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>()});
        if let Some(t) = &c.tpu {
            v["resources"] = json!({"limits": {"google.com/tpu": t.json()}});
        }
        v
    };
    let mut job_annotations = serde_json::Map::new();
    if let Some(g) = &r.group_annotation {
        job_annotations.insert("jobset.sigs.k8s.io/group-name".into(), json!(g));
    }
    if let Some(e) = &r.exclusive {
        job_annotations.insert("alpha.jobset.sigs.k8s.io/exclusive-topology".into(), json!(e));
    }
    if r.node_selector_flag {
        job_annotations.insert("alpha.jobset.sigs.k8s.io/node-selector".into(), json!("true"));
    }
    let mut pod_annotations = serde_json::Map::new();
    if let Some(f) = &r.facts {
        pod_annotations.insert("multislice.kubewarden.io/facts".into(), json!(f));
    }
    let mut v = json!({
        "name": r.name,
        "replicas": r.replicas.json(),
        "template": {
            "metadata": {"annotations": job_annotations},
            "spec": {
                "parallelism": r.parallelism.json(),
                "template": {
                    "metadata": {"annotations": pod_annotations},
                    "spec": {
                        "nodeSelector": r.selector.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<String, Value>>(),
                        "initContainers": init.iter().map(container).collect::<Vec<_>>(),
                        "containers": regular.iter().map(container).collect::<Vec<_>>()
                    }
                }
            }
        }
    });
    if let Some(c) = &r.completions {
        v["template"]["spec"]["completions"] = c.json();
    }
    if let Some(m) = &r.completion_mode {
        v["template"]["spec"]["completionMode"] = json!(m);
    }
    if let Some(g) = &r.group_field {
        v["groupName"] = json!(g);
    }
    v
}

fn settings(choice: u8) -> Value {
    match choice % 5 {
        0 => json!({}),
        1 => json!({"tpuWorkerEnv": true, "jaxEnv": "always"}),
        2 => json!({"rejectUnknownAccelerators": true, "requireExclusiveTopology": false}),
        3 => json!({"jaxEnv": "never", "multisliceEnv": false}),
        _ => json!({"accelerators": {"tpu-x": {"dims": 2, "chipsPerHost": [4], "topologies": ["2x2", "4x4"]}}}),
    }
}

fuzz_target!(|input: Input| {
    let mut metadata = json!({"namespace": "ml", "annotations": {}});
    if input.generate_name {
        metadata["generateName"] = json!(input.name);
    } else {
        metadata["name"] = json!(input.name);
    }
    if input.jax {
        metadata["annotations"]["multislice.kubewarden.io/jax-distributed"] = json!("true");
    }
    if let Some(e) = &input.exclusive {
        metadata["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] = json!(e);
    }
    let mut spec = json!({"replicatedJobs": input.rjobs.iter().map(rjob_json).collect::<Vec<_>>()});
    if let Some(s) = input.suspend {
        spec["suspend"] = json!(s);
    }
    spec["network"] = json!({});
    if let Some(d) = input.dns {
        spec["network"]["enableDNSHostnames"] = json!(d);
    }
    if let Some(s) = &input.subdomain {
        spec["network"]["subdomain"] = json!(s);
    }
    if let Some((r, j, p)) = &input.coordinator {
        spec["coordinator"] = json!({"replicatedJob": r, "jobIndex": j.json(), "podIndex": p.json()});
    }
    let jobset = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": metadata, "spec": spec});
    let operation = ["CREATE", "UPDATE", "DELETE"][usize::from(input.operation % 3)];
    let request = json!({
        "uid": "fuzz", "operation": operation,
        "kind": {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"},
        "object": jobset, "oldObject": jobset,
    });
    let settings = settings(input.settings);
    let payload = serde_json::to_vec(&json!({"request": request, "settings": settings})).expect("json");
    let verdict = evaluate(&payload);

    // Admitting the admitted JobSet again changes nothing.
    if operation == "CREATE" {
        if let Some(mutated) = &verdict.mutated_object {
            let mut again = request.clone();
            again["object"] = mutated.clone();
            let payload = serde_json::to_vec(&json!({"request": again, "settings": settings})).expect("json");
            assert!(evaluate(&payload).mutated_object.is_none(), "JobSet admission is not idempotent");
        }
    }

    // A pod of this JobSet, with whatever labels the input gives it.
    if let (Some((rjob, job, completion, facts)), Some(first)) = (&input.pod, input.rjobs.first()) {
        let spec = rjob_json(first)["template"]["spec"]["template"]["spec"].clone();
        let mut annotations = json!({"batch.kubernetes.io/job-completion-index": completion.json()});
        if let Some(f) = facts {
            annotations["multislice.kubewarden.io/facts"] = json!(f);
        }
        let pod = json!({
            "metadata": {
                "labels": {"jobset.sigs.k8s.io/jobset-name": input.name, "jobset.sigs.k8s.io/replicatedjob-name": rjob, "jobset.sigs.k8s.io/job-index": job.json()},
                "annotations": annotations
            },
            "spec": spec
        });
        let request = json!({"operation": "CREATE", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "object": pod});
        let payload = serde_json::to_vec(&json!({"request": request, "settings": settings})).expect("json");
        let verdict = evaluate(&payload);
        if let Some(mutated) = verdict.mutated_object {
            let mut again = request.clone();
            again["object"] = mutated;
            let payload = serde_json::to_vec(&json!({"request": again, "settings": settings})).expect("json");
            assert!(evaluate(&payload).mutated_object.is_none(), "pod admission is not idempotent");
        }
    }
});
