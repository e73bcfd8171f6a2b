//! docs/contributing/spec.md §4.7 through the module: a queued TPU JobSet that leaves its slice shape to the Kueue
//! flavour gets a required node affinity that admits exactly the shapes where it fits, the
//! author's own terms kept in every term made from them, and nothing where GKE's slice
//! controller or Kueue TAS places the slice.
use crate::common::*;
use multislice_host::controller::JobSetApi;
use multislice_host::request::{admission_request, Kind};
use serde_json::{json, Value};

const ACC: &str = "cloud.google.com/gke-tpu-accelerator";
const TOPO: &str = "cloud.google.com/gke-tpu-topology";

/// JobSet's v6e example (queued, no selectors), with `pod_spec` merged into its pod spec.
fn v6e_example_with(pod_spec: Value) -> Value {
    let mut jobset = fixture_request("jobset-v6e-example", JobSetApi::V09)["object"].clone();
    let spec = &mut jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"];
    for (k, v) in pod_spec.as_object().unwrap() {
        spec[k] = v.clone();
    }
    jobset
}

fn pod_spec_of(jobset: &Value) -> &Value {
    &jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
}

fn expr(key: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": "In", "values": values})
}

/// The author's two terms, each ANDed with the one pair left (v6e 4x4, since the accelerator
/// is pinned): every expression and field of a user term is in every term made from it, and a
/// second admission changes nothing.
#[test]
fn the_authors_terms_are_kept_in_every_term_made_from_them() {
    let zone = json!({"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east5-a", "us-east5-b"]});
    let spot = json!({"key": "cloud.google.com/gke-spot", "operator": "DoesNotExist"});
    let jobset = v6e_example_with(json!({
        "nodeSelector": {ACC: "tpu-v6e-slice"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [zone.clone()]},
                {"matchExpressions": [spot.clone()], "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad-node"]}]}
            ]}}}
    }));
    let outcome = create(&jobset, &no_settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    let admitted = patched(&jobset, &outcome);
    let pair = [expr(ACC, &["tpu-v6e-slice"]), expr(TOPO, &["4x4"])];
    assert_eq!(
        pod_spec_of(&admitted)["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
        json!([
            {"matchExpressions": [zone, pair[0], pair[1]]},
            {"matchExpressions": [spot, pair[0], pair[1]], "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad-node"]}]}
        ])
    );
    assert_eq!(
        outcome.warnings,
        ["spec.replicatedJobs[0].template.spec.template.spec.affinity: replicated job \"slice\" leaves its slice shape open, so a required node affinity limits it to slices of 4 hosts of 4 chips: tpu-v6e-slice 4x4"]
    );
    let again = create(&admitted, &no_settings());
    assert_eq!((again.patch, again.warnings), (None, vec![]));
}

/// A topology the author pins narrows to the accelerators where it fits.
#[test]
fn a_pinned_topology_leaves_the_accelerators_where_it_fits() {
    let jobset = v6e_example_with(json!({"nodeSelector": {TOPO: "4x4"}}));
    let outcome = create(&jobset, &no_settings());
    let admitted = patched(&jobset, &outcome);
    assert_eq!(
        pod_spec_of(&admitted)["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
        json!([
            {"matchExpressions": [expr(ACC, &["tpu-v5-lite-podslice"]), expr(TOPO, &["4x4"])]},
            {"matchExpressions": [expr(ACC, &["tpu-v6e-slice"]), expr(TOPO, &["4x4"])]},
            any_accelerator_but_the_table(),
        ])
    );
}

/// `narrowQueuedJobSets: false` leaves the affinity alone, and says nothing.
#[test]
fn the_setting_turns_it_off() {
    let jobset = fixture_request("jobset-v6e-example", JobSetApi::V09)["object"].clone();
    let outcome = create(&jobset, &json!({"narrowQueuedJobSets": false}));
    assert!(outcome.accepted);
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
    assert_eq!(
        pod_spec_of(&patched(&jobset, &outcome))["affinity"],
        Value::Null
    );
}

/// GKE's slice controller and Kueue TAS place their slices: a super-slice's topology is never
/// a node label, so nothing is narrowed there.
#[test]
fn slices_that_gke_or_kueue_tas_places_are_left_alone() {
    for name in ["xpk-sub-slice", "xpk-super-slice", "xpk-super-slice-placed"] {
        let jobset = fixture_request(name, JobSetApi::V09)["object"].clone();
        let outcome = create(&jobset, &no_settings());
        assert!(outcome.accepted, "{name}: {:?}", outcome.message);
        let admitted = patched(&jobset, &outcome);
        assert_eq!(
            pod_spec_of(&admitted)["affinity"],
            pod_spec_of(&jobset)["affinity"],
            "{name}"
        );
        assert_eq!(outcome.warnings, fixture_warnings(name), "{name}");
    }
}

/// The unsuspend of a narrowed JobSet (docs/contributing/spec.md §4.7): T3 reads the pairs Kueue's flavour labels
/// leave. One topology left is a selection; two are not.
#[test]
fn t3_at_the_unsuspend_reads_what_the_flavour_leaves_of_the_pairs() {
    let jobset = v6e_example_with(json!({"nodeSelector": {TOPO: "4x4"}}));
    let mut stored = patched(&jobset, &create(&jobset, &no_settings()));
    stored["spec"]["suspend"] = json!(true);
    let mut resumed = stored.clone();
    resumed["spec"]["suspend"] = json!(false);
    // The flavour labels the accelerator only: v6e 4x4 is left.
    resumed["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"]
        [ACC] = json!("tpu-v6e-slice");
    let outcome = validate(
        &admission_request(Kind::JobSet, "UPDATE", &resumed, Some(&stored)),
        &no_settings(),
    );
    assert!(outcome.accepted, "{:?}", outcome.message);
    // The same JobSet narrowed to every accelerator, unsuspended by a flavour with no TPU
    // labels: 4x4 and 2x2x4 are left, so no topology is selected.
    let open = fixture_request("jobset-v6e-example", JobSetApi::V09)["object"].clone();
    let mut stored = patched(&open, &create(&open, &no_settings()));
    stored["spec"]["suspend"] = json!(true);
    let mut resumed = stored.clone();
    resumed["spec"]["suspend"] = json!(false);
    let outcome = validate(
        &admission_request(Kind::JobSet, "UPDATE", &resumed, Some(&stored)),
        &no_settings(),
    );
    assert_eq!(outcome.code, Some(400));
    let path = "spec.replicatedJobs[0].template.spec.template.spec.nodeSelector";
    assert_eq!(
        outcome.message.unwrap(),
        format!(
            "[T3] {path} (replicated job \"slice\"): does not select {ACC}, so the pods may land on any TPU node; add {ACC} to the nodeSelector, or a required node affinity with one In value, set to the accelerator of your TPU nodes (\"tpu-v4-podslice\" or \"tpu-v5p-slice\" or \"tpu-v5-lite-podslice\" or \"tpu-v6e-slice\" or \"tpu7x\" or \"tpu7\" fit 4 hosts with 4 chips per pod); see docs/rules.md, T3\n\
             [T3] {path} (replicated job \"slice\"): does not select {TOPO}, so the pods may land on any TPU node; add {TOPO} to the nodeSelector, or a required node affinity with one In value, set to the topology of your accelerator that fits 4 hosts with 4 chips per pod: \"2x2x4\" on tpu-v4-podslice, \"2x2x4\" on tpu-v5p-slice, \"4x4\" on tpu-v5-lite-podslice, \"4x4\" on tpu-v6e-slice, \"2x2x4\" on tpu7x, \"2x2x4\" on tpu7; see docs/rules.md, T3"
        )
    );
}

/// The NotIn term that leaves a flavour of an accelerator the table lacks open.
fn any_accelerator_but_the_table() -> Value {
    json!({"matchExpressions": [{"key": ACC, "operator": "NotIn", "values": [
        "tpu-v4-podslice", "tpu-v5p-slice", "tpu-v5-lite-device", "tpu-v5-lite-podslice",
        "tpu-v6e-slice", "tpu7x", "tpu7"]}]})
}

/// A queued one-host JobSet of 8 chips that leaves its shape to the queue: GKE's single-host v5e
/// (`tpu-v5-lite-device` 2x4, ct5l-hightpu-8t) is one of its shapes, and a flavour of an
/// accelerator the table lacks is left open, in a term of its own; the warning says both.
#[test]
fn a_one_host_jobset_fits_v5e_device_and_unknown_accelerators_are_left_open() {
    let mut jobset = fixture_request("jobset-v6e-example", JobSetApi::V09)["object"].clone();
    let job = &mut jobset["spec"]["replicatedJobs"][0]["template"]["spec"];
    job["parallelism"] = json!(1);
    job["completions"] = json!(1);
    job["template"]["spec"]["containers"][0]["resources"]["limits"]["google.com/tpu"] = json!(8);
    let outcome = create(&jobset, &no_settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    let admitted = patched(&jobset, &outcome);
    assert_eq!(
        pod_spec_of(&admitted)["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
        json!([
            {"matchExpressions": [expr(ACC, &["tpu-v5-lite-device"]), expr(TOPO, &["2x4"])]},
            {"matchExpressions": [expr(ACC, &["tpu-v5-lite-podslice"]), expr(TOPO, &["2x4"])]},
            {"matchExpressions": [expr(ACC, &["tpu-v6e-slice"]), expr(TOPO, &["2x4"])]},
            any_accelerator_but_the_table(),
        ])
    );
    assert_eq!(
        outcome.warnings,
        ["spec.replicatedJobs[0].template.spec.template.spec.affinity: replicated job \"slice\" leaves its slice shape open, so a required node affinity limits it to slices of 1 host of 8 chips (or an unknown accelerator): tpu-v5-lite-device 2x4, tpu-v5-lite-podslice…"]
    );
    let again = create(&admitted, &no_settings());
    assert_eq!((again.patch, again.warnings), (None, vec![]));
}

/// Kueue unsuspends the narrowed JobSet into a flavour of an accelerator the table lacks: T3
/// and T4 let it run, whether the flavour labels the topology too or the accelerator alone,
/// and T4 says that it could not check the shape.
#[test]
fn t3_and_t4_let_a_flavour_of_an_unknown_accelerator_run() {
    let open = fixture_request("jobset-v6e-example", JobSetApi::V09)["object"].clone();
    let mut stored = patched(&open, &create(&open, &no_settings()));
    stored["spec"]["suspend"] = json!(true);
    for labels in [
        json!({ACC: "tpu-v9-slice", TOPO: "4x4"}),
        json!({ACC: "tpu-v9-slice"}),
    ] {
        let mut resumed = stored.clone();
        resumed["spec"]["suspend"] = json!(false);
        resumed["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            ["nodeSelector"] = labels.clone();
        let outcome = validate(
            &admission_request(Kind::JobSet, "UPDATE", &resumed, Some(&stored)),
            &no_settings(),
        );
        assert!(outcome.accepted, "{labels}: {:?}", outcome.message);
        assert_eq!(
            outcome.warnings,
            ["spec.replicatedJobs[0].template.spec.template.spec.nodeSelector[\"cloud.google.com/gke-tpu-accelerator\"]: accelerator \"tpu-v9-slice\" is not in the accelerator table, so its topology was not checked; add it to the accelerators setting"],
            "{labels}"
        );
    }
}

/// Where the policy refuses what it does not know (`rejectUnknownAccelerators`), or the
/// author pins a known accelerator, no term is left open.
#[test]
fn no_term_is_left_open_where_the_accelerator_is_known_or_unknown_ones_are_refused() {
    let open = fixture_request("jobset-v6e-example", JobSetApi::V09)["object"].clone();
    let outcome = create(&open, &json!({"rejectUnknownAccelerators": true}));
    let terms = pod_spec_of(&patched(&open, &outcome))["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .clone();
    assert!(!terms
        .as_array()
        .unwrap()
        .contains(&any_accelerator_but_the_table()));
    // All six shapes, and no word of an unknown accelerator: cut at 256 characters.
    let full =
        "spec.replicatedJobs[0].template.spec.template.spec.affinity: replicated job \"slice\" \
                leaves its slice shape open, so a required node affinity limits it to slices of 4 \
                hosts of 4 chips: tpu-v4-podslice 2x2x4, tpu-v5-lite-podslice 4x4, tpu-v5p-slice \
                2x2x4, tpu-v6e-slice 4x4, tpu7 2x2x4, tpu7x 2x2x4";
    let mut cut: String = full.chars().take(255).collect();
    cut.push('…');
    assert_eq!(outcome.warnings, [cut]);
    let pinned = v6e_example_with(json!({"nodeSelector": {ACC: "tpu-v6e-slice"}}));
    let outcome = create(&pinned, &no_settings());
    assert_eq!(
        pod_spec_of(&patched(&pinned, &outcome))["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
        json!([{"matchExpressions": [expr(ACC, &["tpu-v6e-slice"]), expr(TOPO, &["4x4"])]}])
    );
}

/// `requireTpuNodeSelectors: false` is a cluster without GKE's labels: no node affinity at all.
#[test]
fn no_affinity_without_gke_labels() {
    let jobset = fixture_request("jobset-v6e-example", JobSetApi::V09)["object"].clone();
    let outcome = create(&jobset, &json!({"requireTpuNodeSelectors": false}));
    assert!(outcome.accepted, "{:?}", outcome.message);
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
    assert_eq!(
        pod_spec_of(&patched(&jobset, &outcome))["affinity"],
        Value::Null
    );
}
