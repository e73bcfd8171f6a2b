//! Every label value the policy writes is one the API server takes (docs/contributing/spec.md
//! §4.1): at most 63 characters, `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`. Where the policy
//! does not judge a JobSet (G1 refuses such a name where it does), a group name that is no
//! label value becomes the pods' group-name annotation but no group-name label, and both the
//! JobSet CREATE (judging role) and the pod admission say so, naming the field.
use crate::common::*;
use multislice_host::controller::{self, as_served, JobSetApi};
use multislice_host::request::{admission_request, Kind};
use serde_json::{json, Value};

const GROUP_NAME: &str = "jobset.sigs.k8s.io/group-name";
const GROUP_REPLICAS: &str = "jobset.sigs.k8s.io/group-replicas";
const JOB_GROUP_INDEX: &str = "jobset.sigs.k8s.io/job-group-index";
const FACTS: &str = "multislice.kubewarden.io/facts";

/// A CPU-only JobSet without the JAX opt-in, as a JobSet CRD before v0.9 serves it (no
/// `groupName`): replicated job "train" is grouped by the template annotation `group`.
fn cpu_jobset(group: &str) -> Value {
    let rjob = |name: &str, replicas: u32, annotations: Value| {
        json!({"name": name, "replicas": replicas, "template": {
            "metadata": {"annotations": annotations},
            "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "python:3.12"}]}}}}})
    };
    as_served(
        &json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "batch", "namespace": "ml"},
            "spec": {"replicatedJobs": [
                rjob("train", 2, json!({GROUP_NAME: group})),
                rjob("eval", 1, json!({})),
            ]}
        }),
        JobSetApi::V08,
    )
}

fn jobset_warning(said: &str) -> String {
    format!(
        "spec.replicatedJobs[0].template.metadata.annotations[\"{GROUP_NAME}\"]: {said}, so its pods get the group-name annotation only"
    )
}

fn pod_warning(said: &str) -> String {
    format!(
        "metadata.labels[\"{GROUP_NAME}\"]: {said}, so the pod gets the group-name annotation only"
    )
}

/// The JobSet with the facts the policy stamps on it.
fn stamped(jobset: &Value, group: &str) -> Value {
    let mut out = jobset.clone();
    let facts = [
        format!(r#"{{"group":{{"name":{group:?},"replicas":2,"offset":0}}}}"#),
        r#"{"group":{"name":"default","replicas":1,"offset":0}}"#.to_string(),
    ];
    for (i, f) in facts.iter().enumerate() {
        out["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["metadata"] =
            json!({"annotations": {FACTS: f}});
    }
    out
}

#[test]
fn a_group_name_that_is_no_label_value_is_written_as_an_annotation_only() {
    let long = "t".repeat(64);
    for (group, said) in [
        (
            "train/eval",
            "\"train/eval\" is not a valid label value".to_string(),
        ),
        (
            "-train",
            "\"-train\" is not a valid label value".to_string(),
        ),
        (long.as_str(), "is longer than 63 characters".to_string()),
    ] {
        let jobset = cpu_jobset(group);
        let request = admission_request(Kind::JobSet, "CREATE", &jobset, None);
        // The judging halves warn; the mutating half stamps the facts and says nothing.
        for (role, warned, patched_to) in [
            ("both", true, Some(stamped(&jobset, group))),
            ("validate", true, None),
            ("mutate", false, Some(stamped(&jobset, group))),
        ] {
            let outcome = validate(&request, &json!({"role": role}));
            assert!(outcome.accepted, "{role}: {:?}", outcome.message);
            let warnings: Vec<String> = if warned {
                vec![jobset_warning(&said)]
            } else {
                Vec::new()
            };
            assert_eq!(outcome.warnings, warnings, "{group} {role}");
            assert_eq!(outcome.mutated_object, patched_to, "{group} {role}");
        }

        // Every pod gets all three annotations and the two numeric labels.
        let admitted = stamped(&jobset, group);
        let pods = controller::jobset_pods(&admitted).unwrap();
        assert_eq!(pods.len(), 3);
        for pod in pods {
            let request = admission_request(Kind::Pod, "CREATE", &pod.object, None);
            let outcome = validate(&request, &no_settings());
            assert!(outcome.accepted, "{:?}", outcome.message);
            let (name, replicas, index) = if pod.replicated_job == "train" {
                (group, "2", pod.job_index.to_string())
            } else {
                ("default", "1", "0".to_string())
            };
            let mut want = pod.object.clone();
            let meta = &mut want["metadata"];
            for (k, v) in [
                (GROUP_NAME, name),
                (GROUP_REPLICAS, replicas),
                (JOB_GROUP_INDEX, &index),
            ] {
                meta["annotations"][k] = json!(v);
                if k != GROUP_NAME || pod.replicated_job == "eval" {
                    meta["labels"][k] = json!(v);
                }
            }
            assert_eq!(patched(&pod.object, &outcome), want, "{}", pod.hostname);
            let warnings: Vec<String> = if pod.replicated_job == "train" {
                vec![pod_warning(&said)]
            } else {
                Vec::new()
            };
            assert_eq!(outcome.warnings, warnings, "{}", pod.hostname);
        }
    }
}

/// A valid label value that is no DNS-1035 label is the user's to choose where the policy does
/// not judge: it is written as both, without a word.
#[test]
fn a_valid_label_value_is_written_as_label_and_annotation() {
    let jobset = cpu_jobset("Train_A.v2");
    let outcome = validate(
        &admission_request(Kind::JobSet, "CREATE", &jobset, None),
        &no_settings(),
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(outcome.warnings, Vec::<String>::new());
    let admitted = patched(&jobset, &outcome);
    let pod = controller::jobset_pods(&admitted).unwrap().remove(0);
    let outcome = validate(
        &admission_request(Kind::Pod, "CREATE", &pod.object, None),
        &no_settings(),
    );
    assert_eq!(outcome.warnings, Vec::<String>::new());
    let pod = patched(&pod.object, &outcome);
    for map in ["labels", "annotations"] {
        assert_eq!(
            pod["metadata"][map][GROUP_NAME],
            json!("Train_A.v2"),
            "{map}"
        );
    }
}

/// A pod without facts that carries the group keys as annotations only (copied there by hand,
/// or by a controller that wrote one twin): the label twin is written only from a valid value.
#[test]
fn copying_an_annotation_to_its_label_twin_takes_only_a_valid_value() {
    let admitted = stamped(&cpu_jobset("train"), "train");
    let mut pod = controller::jobset_pods(&admitted).unwrap().remove(0).object;
    let meta = &mut pod["metadata"];
    meta["annotations"].as_object_mut().unwrap().remove(FACTS);
    for (k, v) in [
        (GROUP_NAME, "train/eval"),
        (GROUP_REPLICAS, "2"),
        (JOB_GROUP_INDEX, "0"),
    ] {
        meta["annotations"][k] = json!(v);
    }
    let outcome = validate(
        &admission_request(Kind::Pod, "CREATE", &pod, None),
        &no_settings(),
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert_eq!(
        outcome.warnings,
        [pod_warning("\"train/eval\" is not a valid label value")]
    );
    let mut want = pod.clone();
    want["metadata"]["labels"][GROUP_REPLICAS] = json!("2");
    want["metadata"]["labels"][JOB_GROUP_INDEX] = json!("0");
    assert_eq!(patched(&pod, &outcome), want);
}

/// Where the policy judges the JobSet (the JAX opt-in), G1 refuses the name as before.
#[test]
fn a_judged_jobset_keeps_g1s_refusal() {
    let mut jobset = cpu_jobset("train/eval");
    jobset["metadata"]["annotations"] = json!({"multislice.kubewarden.io/jax-distributed": "true"});
    let outcome = validate(
        &admission_request(Kind::JobSet, "CREATE", &jobset, None),
        &no_settings(),
    );
    assert!(!outcome.accepted);
    assert_eq!(
        outcome.message.as_deref(),
        Some("[G1] spec.replicatedJobs[0].template.metadata.annotations[\"jobset.sigs.k8s.io/group-name\"] (replicated job \"train\"): \"train/eval\" is not a DNS-1035 label; use lowercase letters, digits and '-', starting with a letter, at most 63 characters, for example \"train-eval\"; see docs/rules.md, G1")
    );
    assert_eq!(outcome.warnings, Vec::<String>::new());
}
