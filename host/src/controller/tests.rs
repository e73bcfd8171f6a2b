//! The JobSet controller's node-selector strategy of exclusive placement.
use super::*;

const KEY: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
const FLAG: &str = "alpha.jobset.sigs.k8s.io/node-selector";

/// A JobSet `js` in `ml` whose replicated job `slice` has 2 Jobs of 1 pod, with these
/// annotations on the JobSet and on the replicated job's Job template.
fn jobset(own: Value, rjob: Value) -> Value {
    json!({"metadata": {"name": "js", "namespace": "ml", "annotations": own},
           "spec": {"replicatedJobs": [{"name": "slice", "replicas": 2, "template": {
               "metadata": {"annotations": rjob},
               "spec": {"template": {"spec": {
                   "nodeSelector": {"pool": "a"},
                   "tolerations": [{"key": "tpu", "operator": "Exists"}],
                   "containers": [{"name": "c"}]}}}}}]}})
}

/// Pod 0 of Job `js-slice-1`: its annotations of the two keys, nodeSelector, tolerations.
fn second_job_pod(jobset: &Value) -> (Value, Value, Value) {
    let pods = jobset_pods(jobset).unwrap();
    let pod = &pods[1].object;
    assert_eq!(pod["spec"]["hostname"], json!("js-slice-1-0"));
    let annotations = &pod["metadata"]["annotations"];
    (
        json!([annotations.get(KEY), annotations.get(FLAG)]),
        pod["spec"]["nodeSelector"].clone(),
        pod["spec"]["tolerations"].clone(),
    )
}

fn placed() -> (Value, Value) {
    (
        json!({"pool": "a", "alpha.jobset.sigs.k8s.io/namespaced-job": "ml_js-slice-1"}),
        json!([{"key": "tpu", "operator": "Exists"},
               {"key": "alpha.jobset.sigs.k8s.io/no-schedule", "operator": "Exists",
                "effect": "NoSchedule"}]),
    )
}

fn unplaced() -> (Value, Value) {
    (
        json!({"pool": "a"}),
        json!([{"key": "tpu", "operator": "Exists"}]),
    )
}

/// JobSet's constructJob: a Job whose annotations hold both the key and the node-selector
/// flag gets `namespaced-job: <namespace>_<job>` and a toleration of the no-schedule
/// taint on its pod template; labelAndAnnotateObject copies the flag onto pods beside a key
/// of the same level.
#[test]
fn the_node_selector_strategy_places_each_job_on_its_own_pool() {
    let flag = json!({KEY: "cloud.google.com/gke-nodepool", FLAG: "true"});
    let key = json!({KEY: "cloud.google.com/gke-nodepool"});
    let (selector, tolerations) = placed();
    let (own_selector, own_tolerations) = unplaced();
    for (what, jobset, annotations, selector, tolerations) in [
        (
            "key and flag on the JobSet",
            jobset(flag.clone(), json!({})),
            json!(["cloud.google.com/gke-nodepool", "true"]),
            &selector,
            &tolerations,
        ),
        (
            "key and flag on the replicated job",
            jobset(json!({}), flag.clone()),
            json!(["cloud.google.com/gke-nodepool", "true"]),
            &selector,
            &tolerations,
        ),
        // The Job has the flag from its template and the key from the JobSet; the pod
        // gets no flag, which goes on pods only beside a key of its own level.
        (
            "key on the JobSet, flag on the replicated job",
            jobset(key.clone(), json!({FLAG: "true"})),
            json!(["cloud.google.com/gke-nodepool", null]),
            &selector,
            &tolerations,
        ),
        (
            "flag without key",
            jobset(json!({FLAG: "true"}), json!({FLAG: "true"})),
            json!([null, null]),
            &own_selector,
            &own_tolerations,
        ),
        (
            "key without flag",
            jobset(key.clone(), json!({})),
            json!(["cloud.google.com/gke-nodepool", null]),
            &own_selector,
            &own_tolerations,
        ),
    ] {
        assert_eq!(
            second_job_pod(&jobset),
            (annotations, selector.clone(), tolerations.clone()),
            "{what}"
        );
    }
}

/// The Job controller numbers only an Indexed Job's pods: a NonIndexed replicated job's pod
/// has no hostname, no completion index and a generateName of its Job's name (seen in
/// `make cluster-test`'s p1-pass, whose batch job `stats` is NonIndexed).
#[test]
fn a_non_indexed_jobs_pod_has_no_hostname_and_no_completion_index() {
    let mut js = jobset(json!({}), json!({}));
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] = json!("NonIndexed");
    let pods = jobset_pods(&js).unwrap();
    let pod = &pods[1].object;
    assert_eq!(pod["spec"].get("hostname"), None);
    assert_eq!(pod["metadata"]["generateName"], json!("js-slice-1-"));
    for map in ["labels", "annotations"] {
        assert_eq!(
            pod["metadata"][map].get("batch.kubernetes.io/job-completion-index"),
            None,
            "{map}"
        );
    }
}
