//! K1–K3 on the shapes Kueue's Topology Aware Scheduling meets (docs/kueue-gke-xpk.md,
//! "Topology-aware scheduling"), each JobSet CREATE through the native `admission::evaluate`
//! under the role given: the exact verdict, and for the role `both` the patch's slice size.
//! What Kueue itself does with each shape is the Kueue record (`make cluster-test`, part `tas`).
use jobset_multislice_policy::admission::evaluate;
use multislice_host::request::{admission_request, Kind};
use rstest::rstest;
use serde_json::{json, Map, Value};

const REQUIRED: &str = "kueue.x-k8s.io/podset-required-topology";
const PREFERRED: &str = "kueue.x-k8s.io/podset-preferred-topology";
const UNCONSTRAINED: &str = "kueue.x-k8s.io/podset-unconstrained-topology";
const SLICE: &str = "kueue.x-k8s.io/podset-slice-required-topology";
const SIZE: &str = "kueue.x-k8s.io/podset-slice-size";
const LAYERS: &str = "kueue.x-k8s.io/podset-slice-required-topology-constraints";
const SLICE_TOPOLOGY: &str = "cloud.google.com/gke-tpu-slice-topology";
const POOL: &str = "cloud.google.com/gke-nodepool";
const BLOCK: &str = "cloud.google.com/gce-topology-block";
const HOST: &str = "kubernetes.io/hostname";
const CUBE: &str = "cloud.google.com/gke-tpu-partition-4x4x4-id";
const SUB_SLICE: &str = "cloud.google.com/gke-tpu-slice-4x4-id";

/// A queued JobSet of `replicas` slices of `parallelism` hosts of `accelerator`, `chips` per pod,
/// selecting `topology` (none for a super-slice), with these pod template annotations.
fn jobset(
    replicas: u32,
    parallelism: u32,
    (accelerator, topology, chips): (&str, Option<&str>, u32),
    annotations: &[(&str, &str)],
) -> Value {
    let mut selector = Map::new();
    selector.insert(
        "cloud.google.com/gke-tpu-accelerator".into(),
        json!(accelerator),
    );
    if let Some(t) = topology {
        selector.insert("cloud.google.com/gke-tpu-topology".into(), json!(t));
    }
    let annotations: Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "tas", "namespace": "ml",
                     "labels": {"kueue.x-k8s.io/queue-name": "multislice-queue"}},
        "spec": {"replicatedJobs": [{"name": "slice", "replicas": replicas, "template": {"spec": {
            "parallelism": parallelism, "completions": parallelism,
            "template": {"metadata": {"annotations": annotations}, "spec": {
                "restartPolicy": "Never", "nodeSelector": selector,
                "containers": [{"name": "jax", "image": "jax",
                                "resources": {"limits": {"google.com/tpu": chips}}}]}}}}}]}
    })
}

const V6E: (&str, Option<&str>, u32) = ("tpu-v6e-slice", Some("4x4"), 4);
const V6E_ONE_HOST: (&str, Option<&str>, u32) = ("tpu-v6e-slice", Some("2x2"), 4);
const V6E_8X8_POOL: (&str, Option<&str>, u32) = ("tpu-v6e-slice", Some("8x8"), 4);
const TPU7X_SUPER: (&str, Option<&str>, u32) = ("tpu7x", None, 4);

fn answer(object: &Value, role: &str) -> (bool, Option<String>, Vec<String>, Option<Value>) {
    let request = admission_request(Kind::JobSet, "CREATE", object, None);
    let payload = json!({"request": request, "settings": {"role": role}});
    let verdict = evaluate(&serde_json::to_vec(&payload).unwrap());
    (
        verdict.accepted,
        verdict.message,
        verdict.warnings,
        verdict.mutated_object,
    )
}

// The exact refusals, one per case.
const K1_TWO_SLICES_IN_ONE_POOL: &str = concat!(
    "[K1] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-required-topology\"] (replicated job \"slice\"): is \"cloud.google.com/gke-nodepool\", which puts all 8 pods (2 slices of 4 hosts) in one cloud.google.com/gke-nodepool domain of 4 hosts, so Kueue never admits the Workload and it stays pending; ",
    "set kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" instead, so that each slice gets a domain of its own, and leave kueue.x-k8s.io/podset-required-topology out or set it to a level above, such as cloud.google.com/gce-topology-block; ",
    "see docs/rules.md, K1"
);
const K1_XPK_SUB_SLICE_TWO_SLICES: &str = concat!(
    "[K1] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-required-topology\"] (replicated job \"slice\"): is \"cloud.google.com/gke-tpu-slice-4x4-id\", which puts all 8 pods (2 slices of 4 hosts) in one cloud.google.com/gke-tpu-slice-4x4-id domain of 4 hosts, so Kueue never admits the Workload and it stays pending; ",
    "set kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-tpu-slice-4x4-id with kueue.x-k8s.io/podset-slice-size: \"4\" instead, so that each slice gets a domain of its own, and leave kueue.x-k8s.io/podset-required-topology out or set it to a level above, such as cloud.google.com/gke-tpu-slice-8x8-id; ",
    "see docs/rules.md, K1"
);
const K1_EVERY_POD_ON_ONE_HOST: &str = concat!(
    "[K1] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-required-topology\"] (replicated job \"slice\"): is \"kubernetes.io/hostname\", which puts all 8 pods (2 slices of 4 hosts) in one kubernetes.io/hostname domain of 1 host, so Kueue never admits the Workload and it stays pending; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K1"
);
const K2_SIZE_GATES_PODS: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-size\"] (replicated job \"slice\"): is \"3\", which does not divide the 8 pods (2 slices of 4 hosts), so Kueue admits the Workload and its pods stay gated (kueue#15277); ",
    "set it to \"4\", the hosts of one slice; ",
    "see docs/rules.md, K2"
);
const K2_SIZE_BELOW_A_SLICE: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-size\"] (replicated job \"slice\"): is \"2\", which cuts a slice of 4 hosts, so Kueue may place one slice in two cloud.google.com/gke-nodepool domains; ",
    "set it to \"4\", the hosts of one slice; ",
    "see docs/rules.md, K2"
);
const K2_SIZE_ABOVE_A_POOL: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-size\"] (replicated job \"slice\"): is \"8\", more than the 4 hosts of one cloud.google.com/gke-nodepool domain, so Kueue never admits the Workload and it stays pending; ",
    "set it to \"4\", the hosts of one slice; ",
    "see docs/rules.md, K2"
);
const K2_SIZE_ABOVE_THE_PODS: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-size\"] (replicated job \"slice\"): is \"16\", more than the 8 pods (2 slices of 4 hosts), and Kueue refuses it; ",
    "set it to \"4\", the hosts of one slice; ",
    "see docs/rules.md, K2"
);
const K2_SIZE_NOT_A_NUMBER: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-size\"] (replicated job \"slice\"): is \"four\", no whole number of pods, and Kueue refuses it; ",
    "set it to \"4\", the hosts of one slice; ",
    "see docs/rules.md, K2"
);
const K2_CUBE_SIZE_CUTS_A_CUBE: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-size\"] (replicated job \"slice\"): is \"8\", which cuts a cube of 16 hosts, so a super-slice may take parts of cubes; ",
    "set it to \"16\", the hosts of one cube; ",
    "see docs/rules.md, K2"
);
const K2_LAYERS_NOT_A_LIST: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-required-topology-constraints\"] (replicated job \"slice\"): is no JSON list of 1 to 3 {\"topology\", \"size\"} with sizes from 1, and Kueue refuses it; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K2"
);
const K2_TWO_SINGLE_HOST_SLICES_PER_JOB: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-size\"] (replicated job \"slice\"): is \"2\", more than the 1 pods of one Job, so Kueue's webhook refuses every child Job and none starts; ",
    "set it to \"1\", the hosts of one slice; ",
    "see docs/rules.md, K2"
);
const K2_OUTER_LAYER_OVER_A_JOB: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-required-topology-constraints\"] (replicated job \"slice\"): layer 0 (cloud.google.com/gce-topology-block): its size is \"8\", more than the 4 pods of one Job, so Kueue's webhook refuses every child Job and none starts; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K2"
);
const K2_K3_SLICES_BY_BLOCK_OVER_A_JOB: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-size\"] (replicated job \"slice\"): is \"8\", more than the 4 pods of one Job, so Kueue's webhook refuses every child Job and none starts; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K2\n[K3] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-required-topology\"] (replicated job \"slice\"): is \"cloud.google.com/gce-topology-block\", a domain of many slices, so Kueue may place a slice's 4 hosts across node pools; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K3"
);
const K2_OUTER_OVER_A_JOB_INNER_BELOW_A_SLICE: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-required-topology-constraints\"] (replicated job \"slice\"): layer 0 (cloud.google.com/gce-topology-block): its size is \"8\", more than the 4 pods of one Job, so Kueue's webhook refuses every child Job and none starts; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K2\n[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-required-topology-constraints\"] (replicated job \"slice\"): layer 1 (cloud.google.com/gke-nodepool): its size is \"2\", which cuts a slice of 4 hosts, so Kueue may place one slice in two cloud.google.com/gke-nodepool domains; ",
    "set it to \"4\", the hosts of one slice; ",
    "see docs/rules.md, K2"
);
const K3_SLICES_BY_HOST: &str = concat!(
    "[K3] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-required-topology\"] (replicated job \"slice\"): is \"kubernetes.io/hostname\": one pod per host, but nothing keeps a slice's 4 hosts in one node pool, so Kueue may place a slice across node pools; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K3"
);
const K3_ONLY_THE_BLOCK: &str = concat!(
    "[K3] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-required-topology\"] (replicated job \"slice\"): is \"cloud.google.com/gce-topology-block\", a domain of many slices, so Kueue may place a slice's 4 hosts across node pools; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K3"
);
const K3_SLICES_BY_BLOCK: &str = concat!(
    "[K3] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-required-topology\"] (replicated job \"slice\"): is \"cloud.google.com/gce-topology-block\", a domain of many slices, so Kueue may place a slice's 4 hosts across node pools; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K3"
);
const K3_A_PREFERENCE: &str = concat!(
    "[K3] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-preferred-topology\"] (replicated job \"slice\"): is \"cloud.google.com/gke-nodepool\", a preference only, so Kueue may place a slice's 4 hosts across node pools; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K3"
);
const K3_UNCONSTRAINED: &str = concat!(
    "[K3] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-unconstrained-topology\"] (replicated job \"slice\"): asks for no topology, so Kueue may place a slice's 4 hosts across node pools; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K3"
);
const K3_CUBES_WITHOUT_A_BLOCK: &str = concat!(
    "[K3] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-required-topology\"] (replicated job \"slice\"): is \"cloud.google.com/gke-tpu-partition-4x4x4-id\": each cube of 16 hosts whole, but nothing keeps a slice's 2 cubes in one block; ",
    "add kueue.x-k8s.io/podset-required-topology: cloud.google.com/gce-topology-block; ",
    "see docs/rules.md, K3"
);
const K3_SUB_SLICES_OF_THE_POOL_BY_POOL: &str = concat!(
    "[K3] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-required-topology\"] (replicated job \"slice\"): is \"cloud.google.com/gke-nodepool\", domains of 16 hosts, each more than one slice of 4, so Kueue may place a slice on the hosts of two; ",
    "slice at the slice's own domain, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-tpu-slice-4x4-id with kueue.x-k8s.io/podset-slice-size: \"4\"; ",
    "see docs/rules.md, K3"
);
const K2_NO_SIZE_UNDER_VALIDATE: &str = concat!(
    "[K2] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-size\"] (replicated job \"slice\"): is not set, and Kueue refuses kueue.x-k8s.io/podset-slice-required-topology without it; ",
    "set it to \"4\", the hosts of one slice; ",
    "see docs/rules.md, K2"
);
const K3_SLICES_BY_BLOCK_WITHOUT_SIZE: &str = concat!(
    "[K3] spec.replicatedJobs[0].template.spec.template.metadata.annotations[\"kueue.x-k8s.io/podset-slice-required-topology\"] (replicated job \"slice\"): is \"cloud.google.com/gce-topology-block\", a domain of many slices, so Kueue may place a slice's 4 hosts across node pools; ",
    "slice at a domain of one slice, kueue.x-k8s.io/podset-slice-required-topology: cloud.google.com/gke-nodepool with kueue.x-k8s.io/podset-slice-size: \"4\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys); ",
    "see docs/rules.md, K3"
);

#[rstest]
// Right shapes: each slice in one domain of its own.
#[case::slices_by_pool(2, 4, V6E, &[(SLICE, POOL), (SIZE, "4")], None)]
#[case::block_required_slices_by_pool(2, 4, V6E, &[(REQUIRED, BLOCK), (SLICE, POOL), (SIZE, "4")], None)]
#[case::one_slice_required_in_its_pool(1, 4, V6E, &[(REQUIRED, POOL)], None)]
#[case::single_host_slices_by_host(4, 1, V6E_ONE_HOST, &[(SLICE, HOST), (SIZE, "1")], None)]
#[case::single_host_slices_by_block(4, 1, V6E_ONE_HOST, &[(REQUIRED, BLOCK), (SLICE, BLOCK), (SIZE, "1")], None)]
#[case::layers_pool_then_host(2, 4, V6E, &[(LAYERS, r#"[{"topology":"cloud.google.com/gke-nodepool","size":4},{"topology":"kubernetes.io/hostname","size":1}]"#)], None)]
#[case::sub_slices_of_an_8x8_pool(2, 4, V6E_8X8_POOL, &[(SLICE_TOPOLOGY, "4x4"), (SLICE, SUB_SLICE), (SIZE, "4")], None)]
#[case::xpk_sub_slice_one_slice(1, 4, V6E_8X8_POOL, &[(SLICE_TOPOLOGY, "4x4"), (REQUIRED, SUB_SLICE)], None)]
#[case::super_slices_by_cube_in_one_block(2, 32, TPU7X_SUPER, &[(SLICE_TOPOLOGY, "4x4x8"), (REQUIRED, BLOCK), (SLICE, CUBE), (SIZE, "16")], None)]
#[case::super_slice_as_xpk_submits_it(2, 32, TPU7X_SUPER, &[(SLICE_TOPOLOGY, "4x4x8")], None)]
// K1: a required domain too small for the pod set.
#[case::k1_two_slices_in_one_pool(2, 4, V6E, &[(REQUIRED, POOL)], Some(K1_TWO_SLICES_IN_ONE_POOL))]
#[case::k1_xpk_sub_slice_two_slices(2, 4, V6E_8X8_POOL, &[(SLICE_TOPOLOGY, "4x4"), (REQUIRED, SUB_SLICE)], Some(K1_XPK_SUB_SLICE_TWO_SLICES))]
#[case::k1_every_pod_on_one_host(2, 4, V6E, &[(REQUIRED, HOST)], Some(K1_EVERY_POD_ON_ONE_HOST))]
// K2: the slice size.
#[case::k2_size_gates_pods(2, 4, V6E, &[(SLICE, POOL), (SIZE, "3")], Some(K2_SIZE_GATES_PODS))]
#[case::k2_size_below_a_slice(2, 4, V6E, &[(SLICE, POOL), (SIZE, "2")], Some(K2_SIZE_BELOW_A_SLICE))]
#[case::k2_size_above_a_pool(2, 4, V6E, &[(SLICE, POOL), (SIZE, "8")], Some(K2_SIZE_ABOVE_A_POOL))]
#[case::k2_size_above_the_pods(2, 4, V6E, &[(SLICE, POOL), (SIZE, "16")], Some(K2_SIZE_ABOVE_THE_PODS))]
#[case::k2_size_not_a_number(2, 4, V6E, &[(SLICE, POOL), (SIZE, "four")], Some(K2_SIZE_NOT_A_NUMBER))]
#[case::k2_cube_size_cuts_a_cube(2, 32, TPU7X_SUPER, &[(SLICE_TOPOLOGY, "4x4x8"), (REQUIRED, BLOCK), (SLICE, CUBE), (SIZE, "8")], Some(K2_CUBE_SIZE_CUTS_A_CUBE))]
#[case::k2_layers_not_a_list(2, 4, V6E, &[(LAYERS, r#"{"topology":"cloud.google.com/gke-nodepool","size":4}"#)], Some(K2_LAYERS_NOT_A_LIST))]
#[case::k2_two_single_host_slices_per_job(4, 1, V6E_ONE_HOST, &[(REQUIRED, BLOCK), (SLICE, POOL), (SIZE, "2")], Some(K2_TWO_SINGLE_HOST_SLICES_PER_JOB))]
#[case::k2_outer_layer_over_a_job(2, 4, V6E, &[(LAYERS, r#"[{"topology":"cloud.google.com/gce-topology-block","size":8},{"topology":"cloud.google.com/gke-nodepool","size":4}]"#)], Some(K2_OUTER_LAYER_OVER_A_JOB))]
#[case::k2_k3_slices_by_block_over_a_job(2, 4, V6E, &[(SLICE, BLOCK), (SIZE, "8")], Some(K2_K3_SLICES_BY_BLOCK_OVER_A_JOB))]
#[case::k2_outer_layer_over_a_job_inner_below_a_slice(2, 4, V6E, &[(LAYERS, r#"[{"topology":"cloud.google.com/gce-topology-block","size":8},{"topology":"cloud.google.com/gke-nodepool","size":2}]"#)], Some(K2_OUTER_OVER_A_JOB_INNER_BELOW_A_SLICE))]
// K3: nothing keeps a slice in one domain.
#[case::k3_slices_by_host(2, 4, V6E, &[(SLICE, HOST), (SIZE, "1")], Some(K3_SLICES_BY_HOST))]
#[case::k3_only_the_block(2, 4, V6E, &[(REQUIRED, BLOCK)], Some(K3_ONLY_THE_BLOCK))]
#[case::k3_slices_by_block(2, 4, V6E, &[(SLICE, BLOCK), (SIZE, "4")], Some(K3_SLICES_BY_BLOCK))]
#[case::k3_a_preference(2, 4, V6E, &[(PREFERRED, POOL)], Some(K3_A_PREFERENCE))]
#[case::k3_unconstrained(2, 4, V6E, &[(UNCONSTRAINED, "true")], Some(K3_UNCONSTRAINED))]
#[case::k3_cubes_without_a_block(2, 32, TPU7X_SUPER, &[(SLICE_TOPOLOGY, "4x4x8"), (SLICE, CUBE), (SIZE, "16")], Some(K3_CUBES_WITHOUT_A_BLOCK))]
#[case::k3_sub_slices_of_the_pool_by_pool(2, 4, V6E_8X8_POOL, &[(SLICE_TOPOLOGY, "4x4"), (SLICE, POOL), (SIZE, "4")], Some(K3_SUB_SLICES_OF_THE_POOL_BY_POOL))]
fn kueue_places_every_slice_whole(
    #[case] replicas: u32,
    #[case] parallelism: u32,
    #[case] slice: (&str, Option<&str>, u32),
    #[case] annotations: &[(&str, &str)],
    #[case] message: Option<&str>,
) {
    let object = jobset(replicas, parallelism, slice, annotations);
    for role in ["validate", "both"] {
        let (accepted, got, warnings, _) = answer(&object, role);
        assert_eq!(
            (accepted, got.as_deref()),
            (message.is_none(), message),
            "{role}"
        );
        assert_eq!(warnings, Vec::<String>::new(), "{role}");
    }
}

/// SPEC §4.8: a slice topology at a domain of one slice, without a size, gets the slice's hosts
/// from the roles that mutate (before Kueue's webhook, which refuses it without); the role
/// `validate`, which sees the stored object, refuses one that none of them filled.
#[test]
fn a_slice_topology_without_a_size_gets_the_slices_hosts() {
    let object = jobset(2, 4, V6E, &[(SLICE, POOL)]);
    let annotations = |o: &Value| {
        o.pointer("/spec/replicatedJobs/0/template/spec/template/metadata/annotations")
            .cloned()
            .unwrap()
    };
    for role in ["mutate", "both"] {
        let (accepted, message, warnings, patched) = answer(&object, role);
        assert!(accepted, "{role}: {message:?}");
        assert_eq!(warnings, Vec::<String>::new(), "{role}");
        let patched = patched.expect("a patch");
        let mut want = annotations(&object);
        want[SIZE] = json!("4");
        let mut got = annotations(&patched);
        got.as_object_mut()
            .unwrap()
            .remove("multislice.kubewarden.io/facts");
        assert_eq!(got, want, "{role}");
        // Admitted again, the size is there: nothing more to add.
        let (_, _, _, again) = answer(&patched, role);
        assert_eq!(again, None, "{role}");
    }
    let (accepted, message, _, _) = answer(&object, "validate");
    assert!(!accepted);
    assert_eq!(message.as_deref(), Some(K2_NO_SIZE_UNDER_VALIDATE));
    // At a level of many slices the policy knows no size: nothing is added, and K3 says why.
    let (_, message, _, _) = answer(&jobset(2, 4, V6E, &[(SLICE, BLOCK)]), "both");
    assert_eq!(message.as_deref(), Some(K3_SLICES_BY_BLOCK_WITHOUT_SIZE));
}
