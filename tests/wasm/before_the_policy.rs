//! Pods of a JobSet admitted before the policy was installed carry no facts (docs/design.md, "A
//! JobSet admitted before the policy was installed"): the controller's coordinator annotation
//! counts as inside the pod's own replicated job only when it names one of that job's pods,
//! `<jobset>-<rjob>-<n>-<n>.<subdomain>`, exactly.
use crate::common::*;
use multislice_host::env::resolve;
use multislice_host::fixtures::{load_json, pod_request_path};
use serde_json::{json, Value};

/// test_data/pods/tpu7x-two-containers-pod (JobSet "ironwood", replicated job "slice", two TPU
/// containers) as a pod of a JobSet the policy never saw, with the controller's coordinator.
fn pod_without_facts(coordinator: &str) -> Value {
    let mut request = load_json(&pod_request_path("tpu7x-two-containers-pod")).unwrap();
    let annotations = request["object"]["metadata"]["annotations"]
        .as_object_mut()
        .unwrap();
    annotations.remove("multislice.kubewarden.io/facts");
    annotations.insert("jobset.sigs.k8s.io/coordinator".into(), json!(coordinator));
    request
}

#[test]
fn the_controllers_coordinator_is_inside_only_when_it_names_a_pod_of_the_replicated_job() {
    for (coordinator, inside) in [
        ("ironwood-slice-0-0.ironwood", true),
        ("ironwood-slice-1-3.ironwood", true),
        // A replicated job whose name starts with "slice-": a Pathways head, say.
        ("ironwood-slice-head-0-0.ironwood", false),
        ("ironwood-slice-2-0-0.ironwood", false),
        ("ironwood-slice-0-x.ironwood", false),
        ("ironwood-slice-0-0", false),
    ] {
        let request = pod_without_facts(coordinator);
        let outcome = validate(&request, &no_settings());
        assert!(outcome.accepted, "{:?}", outcome.message);
        assert_eq!(
            outcome.warnings,
            [format!(
                "pod of JobSet \"ironwood\": its JobSet was admitted before this policy, so replicated job \"slice\" was taken as its whole slice group (2 slices, coordinator {coordinator})"
            )],
        );
        let pod = patched(&request["object"], &outcome);
        let address = if inside {
            format!("{coordinator}:8081")
        } else {
            coordinator.to_string()
        };
        for (k, c) in pod["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            let port = (8081 + k).to_string();
            let want: Vec<(String, String)> = [
                ("MEGASCALE_NUM_SLICES", "2"),
                ("MEGASCALE_SLICE_ID", "0"),
                ("MEGASCALE_COORDINATOR_ADDRESS", address.as_str()),
                ("MEGASCALE_PORT", port.as_str()),
            ]
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
            assert_eq!(resolve(&pod, c).unwrap(), want, "{coordinator}");
        }
    }
}
