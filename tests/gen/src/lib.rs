//! A generator of valid TPU JobSets, and of the same JobSets with one field broken on
//! purpose. Shared by the native property tests and the ones that run the wasm module; the
//! oracle and the rule fixtures table are shared with the cluster test too.
pub mod invariants;
pub mod jobs;
pub mod oracle;
pub mod rule_fixtures;

use proptest::prelude::*;
use serde_json::{json, Value};

/// What the warning about a narrowed affinity (docs/contributing/spec.md §4.7) says, and no other warning.
pub const NARROWED: &str =
    " leaves its slice shape open, so a required node affinity limits it to slices of ";

/// How many TPU replicated jobs of the shape's JobSet leave their slice shape to the flavour,
/// and so are narrowed, each with a warning: every one, when the JobSet is queued and leaves
/// anything ([`Extras::queue_selection`]).
pub fn narrowed_rjobs(shape: &Shape) -> usize {
    let x = &shape.extras;
    if x.queued && x.dynamic_slicing == 0 && x.queue_selection > 0 {
        shape
            .groups
            .iter()
            .map(|(_, _, members)| members.len())
            .sum()
    } else {
        0
    }
}

pub const ACC: &str = "cloud.google.com/gke-tpu-accelerator";
pub const TOPO: &str = "cloud.google.com/gke-tpu-topology";
pub const EXCL: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
pub const NSEL: &str = "alpha.jobset.sigs.k8s.io/node-selector";
pub const POOL: &str = "cloud.google.com/gke-nodepool";
pub const GROUP_ANN: &str = "jobset.sigs.k8s.io/group-name";
pub const QUEUE: &str = "kueue.x-k8s.io/queue-name";
pub const SLICE_TOPOLOGY: &str = "cloud.google.com/gke-tpu-slice-topology";
pub const TAS_SLICE_REQUIRED: &str = "kueue.x-k8s.io/podset-slice-required-topology";
pub const TAS_SLICE_SIZE: &str = "kueue.x-k8s.io/podset-slice-size";

/// A valid slice: accelerator, topology, chips per pod, hosts (= parallelism).
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    pub accelerator: &'static str,
    pub topology: &'static str,
    pub chips: u32,
    pub hosts: u32,
}

/// Slices the table allows, with an alternative of the same accelerator and chips per pod
/// (to break G4 without breaking T4).
pub const SLICES: [(Slice, Slice); 6] = [
    (
        Slice {
            accelerator: "tpu-v5-lite-podslice",
            topology: "2x4",
            chips: 4,
            hosts: 2,
        },
        Slice {
            accelerator: "tpu-v5-lite-podslice",
            topology: "4x4",
            chips: 4,
            hosts: 4,
        },
    ),
    (
        Slice {
            accelerator: "tpu-v6e-slice",
            topology: "4x8",
            chips: 4,
            hosts: 8,
        },
        Slice {
            accelerator: "tpu-v6e-slice",
            topology: "2x2",
            chips: 4,
            hosts: 1,
        },
    ),
    (
        Slice {
            accelerator: "tpu-v5p-slice",
            topology: "2x2x4",
            chips: 4,
            hosts: 4,
        },
        Slice {
            accelerator: "tpu-v5p-slice",
            topology: "4x4x4",
            chips: 4,
            hosts: 16,
        },
    ),
    (
        Slice {
            accelerator: "tpu-v4-podslice",
            topology: "2x2x1",
            chips: 4,
            hosts: 1,
        },
        Slice {
            accelerator: "tpu-v4-podslice",
            topology: "2x2x2",
            chips: 4,
            hosts: 2,
        },
    ),
    (
        Slice {
            accelerator: "tpu7x",
            topology: "2x2x2",
            chips: 4,
            hosts: 2,
        },
        Slice {
            accelerator: "tpu7x",
            topology: "2x2x1",
            chips: 4,
            hosts: 1,
        },
    ),
    (
        Slice {
            accelerator: "tpu-v5-lite-podslice",
            topology: "2x4",
            chips: 8,
            hosts: 1,
        },
        Slice {
            accelerator: "tpu-v5-lite-podslice",
            topology: "2x2",
            chips: 4,
            hosts: 1,
        },
    ),
];

/// The shape of a generated JobSet: groups of TPU replicated jobs, each group one slice kind.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Per group: (explicit name or default, slice index, replicas of each member).
    pub groups: Vec<(bool, usize, Vec<u32>)>,
    pub cpu_driver: bool,
    pub subdomain: bool,
    pub init_container: bool,
    pub extras: Extras,
}

/// Knobs that keep a JobSet valid but vary what the mutation meets.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// A CPU replicated job in a named group of its own.
    pub cpu_group: bool,
    pub jax: bool,
    pub generate_name: bool,
    /// `spec.coordinator` at replicated job (index mod count), job 0, pod 0.
    pub coordinator: Option<usize>,
    /// 0: only a `$(MEGASCALE_SLICE_ID)` reference; 1: also a wrong literal NUM_SLICES;
    /// 2: also SLICE_ID by valueFrom; 3: also an envFrom.
    pub user_env: u8,
    /// Fields the policy does not know, at every level.
    pub unknown_fields: bool,
    /// Queued in Kueue by label, with no `spec.suspend` (how xpk submits).
    pub queued: bool,
    /// GKE dynamic slicing: 0 none; 1 the slice-topology annotation beside the topology
    /// nodeSelector (sub-slice, with Kueue TAS); 2 the annotation alone (super-slice).
    pub dynamic_slicing: u8,
    /// Each TPU pod's chips split over two TPU containers (xpk's tpu7x shape).
    pub split_tpu: bool,
    /// The node-selector flag: 0 nowhere; 1 on the JobSet (beside its key); 2 on every TPU
    /// replicated job (honoured with the JobSet's key); 3 both.
    pub node_selector_flag: u8,
    /// What a queued JobSet leaves to the Kueue flavour (docs/contributing/spec.md §4.7): 0 nothing; 1 the
    /// topology; 2 accelerator and topology, with a required affinity term of the author's;
    /// 3 both, and no affinity. 2 and 3 only with one TPU replicated job, since a group of
    /// several left with several shapes is refused (G5).
    pub queue_selection: u8,
    /// The TPU containers ask for [`OTHER_TPU_RESOURCE`] instead of `google.com/tpu`; the
    /// policy then needs the setting `tpuResource` that names it ([`Shape::settings`]).
    pub other_resource: bool,
}

/// A TPU resource other than the default, as a cluster with another device plugin names it.
pub const OTHER_TPU_RESOURCE: &str = "example.com/tpu";

impl Shape {
    /// The resource the shape's TPU containers ask for.
    pub fn tpu_resource(&self) -> &'static str {
        if self.extras.other_resource {
            OTHER_TPU_RESOURCE
        } else {
            oracle::TPU_RESOURCE
        }
    }

    /// `base` with the setting `tpuResource` naming the shape's TPU resource, when that is not
    /// the default.
    pub fn settings(&self, base: &Value) -> Value {
        let mut settings = base.clone();
        if self.extras.other_resource {
            settings["tpuResource"] = json!(OTHER_TPU_RESOURCE);
        }
        settings
    }
}

pub fn extras() -> impl Strategy<Value = Extras> {
    (
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            prop::option::of(0usize..8),
            0u8..4,
            any::<bool>(),
        ),
        (
            any::<bool>(),
            0u8..3,
            any::<bool>(),
            0u8..4,
            0u8..4,
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (cpu_group, jax, generate_name, coordinator, user_env, unknown_fields),
                (
                    queued,
                    dynamic_slicing,
                    split_tpu,
                    node_selector_flag,
                    queue_selection,
                    other_resource,
                ),
            )| Extras {
                cpu_group,
                jax,
                generate_name,
                coordinator,
                user_env,
                unknown_fields,
                queued,
                dynamic_slicing,
                split_tpu,
                node_selector_flag,
                queue_selection,
                other_resource,
            },
        )
}

/// Replicas of a member: now and then 0, which JobSet allows (the member has no pods).
fn member_replicas() -> impl Strategy<Value = u32> {
    prop_oneof![1 => Just(0u32), 5 => 1u32..=4]
}

pub fn shape() -> impl Strategy<Value = Shape> {
    (
        prop::collection::vec(
            (
                any::<bool>(),
                0..SLICES.len(),
                prop::collection::vec(member_replicas(), 1..=3),
            ),
            1..=3,
        ),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        extras(),
    )
        .prop_map(
            |(mut groups, cpu_driver, subdomain, init_container, extras)| {
                // Unnamed groups all land in "default", which is one slice group: one slice kind.
                if let Some(slice) = groups.iter().find(|g| !g.0).map(|g| g.1) {
                    groups.iter_mut().filter(|g| !g.0).for_each(|g| g.1 = slice);
                }
                Shape {
                    groups,
                    cpu_driver,
                    subdomain,
                    init_container,
                    extras,
                }
            },
        )
}

fn user_env(variant: u8) -> Value {
    let mut env = vec![json!({"name": "USER_VAR", "value": "$(MEGASCALE_SLICE_ID)"})];
    match variant {
        1 => env.push(json!({"name": "MEGASCALE_NUM_SLICES", "value": "999"})),
        2 => env.push(json!({"name": "MEGASCALE_SLICE_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['my-slice']"}}})),
        _ => {}
    }
    json!(env)
}

fn tpu_rjob(name: &str, group: Option<&str>, slice: &Slice, replicas: u32, shape: &Shape) -> Value {
    let (init, extras) = (shape.init_container, &shape.extras);
    let resources = json!({"limits": {shape.tpu_resource(): slice.chips}});
    let mut container = json!({"name": "jax", "image": "jax:tpu", "resources": resources, "env": user_env(extras.user_env)});
    if extras.user_env == 3 {
        container["envFrom"] = json!([{"configMapRef": {"name": "megascale-overrides"}}]);
    }
    let containers = if extras.split_tpu {
        split(&container, slice.chips, shape.tpu_resource())
    } else {
        vec![container]
    };
    let mut pod_spec = json!({
        "restartPolicy": "Never",
        "nodeSelector": {ACC: slice.accelerator, TOPO: slice.topology},
        "containers": containers
    });
    let mut pod_meta = json!({"labels": {"app": "train"}});
    if extras.dynamic_slicing > 0 {
        pod_meta["annotations"] = json!({SLICE_TOPOLOGY: slice.topology});
        if extras.dynamic_slicing == 1 {
            // Each slice in a sub-slice of its own (K1's fix of xpk's render, which requires
            // every slice in one sub-slice).
            pod_meta["annotations"][TAS_SLICE_REQUIRED] = json!(format!(
                "cloud.google.com/gke-tpu-slice-{}-id",
                slice.topology
            ));
            pod_meta["annotations"][TAS_SLICE_SIZE] = json!(slice.hosts.to_string());
        } else {
            pod_spec["nodeSelector"]
                .as_object_mut()
                .unwrap()
                .remove(TOPO);
        }
    }
    if init {
        pod_spec["initContainers"] =
            json!([{"name": "warmup", "image": "jax:tpu", "resources": resources}]);
    }
    let mut r = json!({
        "name": name,
        "replicas": replicas,
        "template": {"spec": {
            "parallelism": slice.hosts, "completions": slice.hosts,
            "template": {"metadata": pod_meta, "spec": pod_spec}
        }}
    });
    if let Some(g) = group {
        r["groupName"] = json!(g);
        r["template"]["metadata"] = json!({"annotations": {GROUP_ANN: g}});
    }
    if extras.node_selector_flag >= 2 {
        job_annotations(&mut r)[NSEL] = json!("true");
    }
    r
}

/// The container as two TPU containers with half the chips each, when the chips split evenly.
fn split(container: &Value, chips: u32, resource: &str) -> Vec<Value> {
    if chips < 2 || !chips.is_multiple_of(2) {
        return vec![container.clone()];
    }
    (0..2)
        .map(|k| {
            let mut c = container.clone();
            c["name"] = json!(format!("jax-{k}"));
            c["resources"]["limits"][resource] = json!(chips / 2);
            c
        })
        .collect()
}

/// `template.metadata.annotations` of a replicated job, created when missing.
fn job_annotations(rjob: &mut Value) -> &mut Value {
    let template = rjob["template"].as_object_mut().unwrap();
    let meta = template.entry("metadata").or_insert(json!({}));
    meta.as_object_mut()
        .unwrap()
        .entry("annotations")
        .or_insert(json!({}))
}

/// The valid JobSet of a shape.
pub fn build(shape: &Shape) -> Value {
    let mut rjobs = Vec::new();
    if shape.cpu_driver {
        rjobs.push(json!({
            "name": "driver", "replicas": 1,
            "template": {"spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "driver", "image": "python:3.12"}]
            }}}}
        }));
    }
    for (g, (explicit, slice, members)) in shape.groups.iter().enumerate() {
        let name = format!("g{g}");
        let group = explicit.then_some(name.as_str());
        for (m, replicas) in members.iter().enumerate() {
            rjobs.push(tpu_rjob(
                &format!("r{g}-{m}"),
                group,
                &SLICES[*slice].0,
                *replicas,
                shape,
            ));
        }
    }
    let x = &shape.extras;
    if x.cpu_group {
        rjobs.push(json!({
            "name": "loader", "groupName": "cpu", "replicas": 2,
            "template": {"metadata": {"annotations": {GROUP_ANN: "cpu"}},
                         "spec": {"parallelism": 3, "completions": 3, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "loader", "image": "python:3.12"}]
            }}}}
        }));
    }
    let mut jobset = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "gen", "namespace": "ml", "annotations": {EXCL: POOL}},
        "spec": {"replicatedJobs": rjobs}
    });
    if shape.subdomain {
        jobset["spec"]["network"] = json!({"subdomain": "mesh", "enableDNSHostnames": true});
    }
    if x.jax {
        jobset["metadata"]["annotations"]["multislice.kubewarden.io/jax-distributed"] =
            json!("true");
    }
    if x.queued {
        jobset["metadata"]["labels"] = json!({QUEUE: "multislice-queue"});
        leave_to_the_flavour(&mut jobset, x, shape.tpu_resource());
    }
    if x.node_selector_flag % 2 == 1 {
        jobset["metadata"]["annotations"][NSEL] = json!("true");
    }
    if x.generate_name {
        let meta = jobset["metadata"].as_object_mut().unwrap();
        meta.remove("name");
        meta.insert("generateName".into(), json!("gen-"));
    }
    if let Some(c) = x.coordinator {
        // A pod that exists: job 0 of a replicated job with replicas > 0.
        let rjobs: Vec<&Value> = jobset["spec"]["replicatedJobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["replicas"].as_u64() > Some(0))
            .collect();
        if !rjobs.is_empty() {
            let name = rjobs[c % rjobs.len()]["name"].clone();
            jobset["spec"]["coordinator"] =
                json!({"replicatedJob": name, "jobIndex": 0, "podIndex": 0});
        }
    }
    if x.unknown_fields {
        add_unknown_fields(&mut jobset);
    }
    jobset
}

/// Puts a field no version of the API knows at every level the policy reads or edits.
fn add_unknown_fields(jobset: &mut Value) {
    let unknown = json!({"x-kept": [1, {"nested": true}]});
    jobset["x-unknown"] = unknown.clone();
    jobset["metadata"]["x-unknown"] = unknown.clone();
    jobset["spec"]["x-unknown"] = unknown.clone();
    for r in jobset["spec"]["replicatedJobs"].as_array_mut().unwrap() {
        r["x-unknown"] = unknown.clone();
        r["template"]["x-unknown"] = unknown.clone();
        r["template"]["spec"]["x-unknown"] = unknown.clone();
        let pod = &mut r["template"]["spec"]["template"];
        pod["x-unknown"] = unknown.clone();
        pod["spec"]["x-unknown"] = unknown.clone();
        for c in pod["spec"]["containers"].as_array_mut().unwrap() {
            c["x-unknown"] = unknown.clone();
            if let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) {
                for e in env {
                    e["x-unknown"] = unknown.clone();
                }
            }
        }
    }
}

/// Ways to break one rule of a valid JobSet.
pub const BREAKABLE: [&str; 14] = [
    "G1", "G2", "G3", "G4", "T1", "T2", "T3", "T4", "X1", "X2", "X3", "X4", "N1", "N2",
];

/// Whether the JobSet's pods dial each other by hostname (where N1 and N2 apply): a
/// multi-host TPU job, or a slice group of more than one slice.
fn needs_hostnames(shape: &Shape, rjobs: &[Value], tpu: &[usize]) -> bool {
    let multi_host = tpu
        .iter()
        .any(|&i| rjobs[i]["template"]["spec"]["parallelism"].as_u64() > Some(1));
    let mut slices_per_group = std::collections::BTreeMap::new();
    for (g, (explicit, _, members)) in shape.groups.iter().enumerate() {
        let name = if *explicit {
            format!("g{g}")
        } else {
            "default".into()
        };
        *slices_per_group.entry(name).or_insert(0u32) += members.iter().sum::<u32>();
    }
    multi_host || slices_per_group.values().any(|n| *n > 1)
}

fn tpu_indexes(jobset: &Value, resource: &str) -> Vec<usize> {
    jobset["spec"]["replicatedJobs"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, r)| oracle::is_tpu_of(r, resource))
        .map(|(i, _)| i)
        .collect()
}

fn pods(r: &Value) -> u64 {
    r["replicas"].as_u64().unwrap() * r["template"]["spec"]["parallelism"].as_u64().unwrap()
}

/// Takes out of each TPU replicated job's nodeSelector what `x.queue_selection` leaves to the
/// Kueue flavour; with 2, the author's own required affinity term takes its place.
fn leave_to_the_flavour(jobset: &mut Value, x: &Extras, resource: &str) {
    let tpu = tpu_indexes(jobset, resource);
    let variant = match x.queue_selection {
        2 | 3 if tpu.len() > 1 => 1,
        v => v,
    };
    if variant == 0 || x.dynamic_slicing > 0 {
        return;
    }
    for i in tpu {
        let pod_spec =
            &mut jobset["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"];
        let selector = pod_spec["nodeSelector"].as_object_mut().unwrap();
        selector.remove(TOPO);
        if variant >= 2 {
            selector.remove(ACC);
        }
        if variant == 2 {
            pod_spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a", "zone-b"]}
            ]}]}}});
        }
    }
}

/// A JobSet with one rule broken, and the exact rejection it must get (code 400).
#[derive(Debug, Clone)]
pub struct Broken {
    pub jobset: Value,
    /// Every violation, one line each, in the policy's order.
    pub message: String,
}

/// `[rule] path: what; fix`, one line of a rejection (docs/contributing/spec.md §9).
fn violation(rule: &str, path: &str, text: &str) -> String {
    format!("[{rule}] {path}: {text}")
}

/// The slice group of replicated job `i` and the name of its first member (the one G4 and X2
/// compare the others with).
fn slice_group_head(rjobs: &[Value], i: usize, resource: &str) -> (String, String) {
    let group = oracle::group(&rjobs[i]);
    let head = rjobs
        .iter()
        .find(|r| oracle::group(r) == group && oracle::is_tpu_of(r, resource))
        .map(|r| r["name"].as_str().unwrap().to_string())
        .unwrap();
    (group, head)
}

/// The shape, changed as little as needed for `rule` to have something to break in it: the
/// shape itself where it has, else with what the rule is about added (an explicitly named
/// first group for G2 and G3, a second member for G4 and X2, a replicated job of two slices
/// for X1, X4, N1 and N2, no JobSet-level flag for X2). [`break_rule`] always breaks the result.
pub fn breakable(shape: &Shape, rule: &str) -> Shape {
    if break_rule(shape, rule).is_some() {
        return shape.clone();
    }
    let mut s = shape.clone();
    match rule {
        "G2" | "G3" => s.groups[0].0 = true,
        "G4" | "X2" => {
            if !s.groups.iter().any(|(_, _, m)| m.len() > 1) {
                s.groups[0].2.push(1);
            }
            if rule == "X2" && s.extras.node_selector_flag % 2 == 1 {
                // The JobSet's key and flag reach every Job: move the flag to the members.
                s.extras.node_selector_flag -= 1;
            }
        }
        "X1" | "X4" | "N1" | "N2" => s.groups[0].2[0] = 2,
        _ => {}
    }
    s
}

/// The shape's JobSet with `rule` broken in one field, and the exact rejection it gets; `None`
/// when this shape gives that rule nothing to break (a rule about several slices on a
/// single-slice JobSet, say: [`breakable`] gives it something). Its selectors are the author's
/// own: what a queued one leaves to the flavour is judged apart.
pub fn break_rule(shape: &Shape, rule: &str) -> Option<Broken> {
    let mut shape = shape.clone();
    shape.extras.queue_selection = 0;
    let shape = &shape;
    let resource = shape.tpu_resource();
    let mut js = build(shape);
    let x = &shape.extras;
    if matches!(rule, "T3" | "T4") {
        // A queued JobSet defers T3 and T4 to Kueue's unsuspending UPDATE.
        if let Some(labels) = js["metadata"]["labels"].as_object_mut() {
            labels.remove(QUEUE);
        }
    }
    let tpu = tpu_indexes(&js, resource);
    let first = tpu[0];
    let rjob = |i: usize| format!("spec.replicatedJobs[{i}]");
    let pod_spec = |i: usize| format!("spec.replicatedJobs[{i}].template.spec.template.spec");
    let same_slices = |group: &str, head: &str| {
        format!("a multislice is made of identical slices: make it match {head:?}, the first replicated job of slice group {group:?}")
    };
    let rjobs = js["spec"]["replicatedJobs"].as_array_mut().unwrap();
    let lines: Vec<String> = match rule {
        "G1" => {
            rjobs[first]["groupName"] = json!("Bad_Group");
            job_annotations(&mut rjobs[first])[GROUP_ANN] = json!("Bad_Group");
            let text = "\"Bad_Group\" is not a DNS-1035 label; use lowercase letters, digits and '-', starting with a letter, at most 63 characters, for example \"bad-group\"";
            vec![
                violation("G1", &format!("{}.groupName", rjob(first)), text),
                violation(
                    "G1",
                    &format!(
                        "{}.template.metadata.annotations[{GROUP_ANN:?}]",
                        rjob(first)
                    ),
                    text,
                ),
            ]
        }
        "G2" => {
            let g = rjobs[first]["groupName"].as_str()?.to_string();
            rjobs[first]["template"]["metadata"]["annotations"][GROUP_ANN] =
                json!(format!("{g}-other"));
            vec![violation(
                "G2",
                &format!("{}.groupName", rjob(first)),
                &format!("is {g:?} but the annotation {GROUP_ANN} says \"{g}-other\"; set groupName to \"{g}-other\" (on JobSet v0.9+ it defaults to \"default\") or make the annotation match"),
            )]
        }
        "G3" => {
            let g = rjobs[first]["groupName"].as_str()?.to_string();
            let members: Vec<&str> = rjobs
                .iter()
                .filter(|r| oracle::group(r) == g)
                .map(|r| r["name"].as_str().unwrap())
                .collect();
            let line = violation(
                "G3",
                &format!("{}.groupName", rjob(rjobs.len())),
                &format!("puts this non-TPU replicated job in group {g:?} with TPU replicated jobs {members:?}; give it a group of its own, or leave it in \"default\", where non-TPU jobs are not counted as slices"),
            );
            rjobs.push(json!({
                "name": "cpu-helper", "groupName": g, "replicas": 1,
                "template": {"metadata": {"annotations": {GROUP_ANN: g}},
                             "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
                    "containers": [{"name": "helper", "image": "python:3.12"}]}}}}
            }));
            vec![line]
        }
        "G4" => {
            let g = shape.groups.iter().position(|(_, _, m)| m.len() > 1)?;
            let idx = rjobs.iter().position(|r| r["name"] == format!("r{g}-1"))?;
            let (group, head) = slice_group_head(rjobs, idx, resource);
            let same = same_slices(&group, &head);
            let (slice, alt) = &SLICES[shape.groups[g].1];
            let pod = &mut rjobs[idx]["template"]["spec"]["template"];
            if pod["spec"]["containers"].as_array()?.len() > 1 {
                // The same chips in one TPU container instead of two.
                let mut whole = pod["spec"]["containers"][0].clone();
                whole["name"] = json!("jax");
                whole["resources"]["limits"][resource] = json!(slice.chips);
                pod["spec"]["containers"] = json!([whole]);
                // An init container holding chips is a TPU container of every pod too.
                let init = u32::from(shape.init_container);
                let (mine, theirs) = (1 + init, 2 + init);
                let plural = if mine == 1 { "" } else { "s" };
                let line = violation(
                    "G4",
                    &format!("{}.containers", pod_spec(idx)),
                    &format!("hold {mine} TPU container{plural} per pod but {head:?} holds {theirs}; {same}"),
                );
                let names = rjob_names(&js);
                return Some(Broken {
                    message: as_shown(&line, &names),
                    jobset: js,
                });
            }
            let mut lines = Vec::new();
            if let Some(a) = pod["metadata"]["annotations"].as_object_mut() {
                if a.contains_key(SLICE_TOPOLOGY) {
                    a.insert(SLICE_TOPOLOGY.into(), json!(alt.topology));
                    // Kueue slices it by its own sub-slice, as it did the first.
                    if a.contains_key(TAS_SLICE_REQUIRED) {
                        let id = format!("cloud.google.com/gke-tpu-slice-{}-id", alt.topology);
                        a.insert(TAS_SLICE_REQUIRED.into(), json!(id));
                        a.insert(TAS_SLICE_SIZE.into(), json!(alt.hosts.to_string()));
                    }
                    lines.push(violation(
                        "G4",
                        &format!(
                            "{}.template.spec.template.metadata.annotations[{SLICE_TOPOLOGY:?}]",
                            rjob(idx)
                        ),
                        &format!(
                            "is {:?} but {head:?} has {:?}; {same}",
                            alt.topology, slice.topology
                        ),
                    ));
                }
            }
            if let Some(sel) = pod["spec"]["nodeSelector"].as_object_mut() {
                if sel.contains_key(TOPO) {
                    sel.insert(TOPO.into(), json!(alt.topology));
                    // The slice-topology annotation, where there is one, is the topology read.
                    if lines.is_empty() {
                        lines.push(violation(
                            "G4",
                            &format!("{}.nodeSelector[{TOPO:?}]", pod_spec(idx)),
                            &format!(
                                "is {:?} but {head:?} has {:?}; {same}",
                                alt.topology, slice.topology
                            ),
                        ));
                    }
                }
            }
            for list in ["containers", "initContainers"] {
                if let Some(Value::Object(c)) = pod["spec"].get_mut(list).and_then(|l| l.get_mut(0))
                {
                    c["resources"]["limits"][resource] = json!(alt.chips);
                }
            }
            if alt.chips != slice.chips {
                lines.push(violation(
                    "G4",
                    &format!("{}.containers", pod_spec(idx)),
                    &format!(
                        "ask for {} TPU chips per pod but {head:?} asks for {}; {same}",
                        alt.chips, slice.chips
                    ),
                ));
            }
            let spec = &mut rjobs[idx]["template"]["spec"];
            spec["parallelism"] = json!(alt.hosts);
            spec["completions"] = json!(alt.hosts);
            lines
        }
        "T1" => {
            rjobs[first]["template"]["spec"]["completionMode"] = json!("NonIndexed");
            vec![violation(
                "T1",
                &format!("{}.template.spec.completionMode", rjob(first)),
                "is \"NonIndexed\"; TPU hosts find each other by completion index: remove it or set it to Indexed",
            )]
        }
        "T2" => {
            let spec = &mut rjobs[first]["template"]["spec"];
            let p = spec["parallelism"].as_u64()?;
            if shape.cpu_driver {
                // An Indexed job without completions: the API server refuses its Jobs.
                spec.as_object_mut()?.remove("completions");
                vec![violation(
                    "T2",
                    &format!("{}.template.spec.completions", rjob(first)),
                    &format!("is not set, and the API server refuses an Indexed Job without it, so no child Job would ever be created; a TPU slice needs every host at once, set completions and parallelism to {p}"),
                )]
            } else {
                spec["completions"] = json!(p + 1);
                vec![violation(
                    "T2",
                    &format!("{}.template.spec.parallelism", rjob(first)),
                    &format!("is {p} but completions is {}; a TPU slice needs every host at once, set both to {p}", p + 1),
                )]
            }
        }
        "T3" => {
            let pod = &mut rjobs[first]["template"]["spec"]["template"];
            pod["spec"]["nodeSelector"].as_object_mut()?.remove(TOPO);
            if let Some(a) = pod["metadata"]["annotations"].as_object_mut() {
                a.remove(SLICE_TOPOLOGY);
            }
            // Each slice of the table is the one topology of its accelerator for its hosts and
            // chips per pod.
            let slice = &SLICES[shape.groups[0].1].0;
            vec![violation(
                "T3",
                &format!("{}.nodeSelector", pod_spec(first)),
                &format!(
                    "does not select {TOPO}, so the pods may land on any TPU node; add {TOPO} to the nodeSelector, or a required node affinity with one In value, set to {:?} (the {} topology that fits {} with {} chips per pod)",
                    slice.topology,
                    slice.accelerator,
                    if slice.hosts == 1 { "1 host".to_string() } else { format!("{} hosts", slice.hosts) },
                    slice.chips
                ),
            )]
        }
        "T4" => {
            let p = rjobs[first]["template"]["spec"]["parallelism"].as_u64()?;
            rjobs[first]["template"]["spec"]["parallelism"] = json!(p + 1);
            rjobs[first]["template"]["spec"]["completions"] = json!(p + 1);
            let slice = &SLICES[shape.groups[0].1].0;
            vec![violation(
                "T4",
                &format!("{}.template.spec.parallelism", rjob(first)),
                &format!(
                    "is {} but a {} {} slice with {} chips per pod has {} hosts; set parallelism and completions to {}{}",
                    p + 1,
                    slice.accelerator,
                    slice.topology,
                    slice.chips,
                    slice.hosts,
                    slice.hosts,
                    // The table's other slice of that accelerator that fits p + 1 hosts.
                    SLICES
                        .iter()
                        .flat_map(|(a, b)| [a, b])
                        .find(|s| s.accelerator == slice.accelerator
                            && s.chips == slice.chips
                            && u64::from(s.hosts) == p + 1)
                        .map(|s| format!(", or keep {} hosts and select the topology {:?}", p + 1, s.topology))
                        .unwrap_or_default()
                ),
            )]
        }
        "X1" => {
            if !tpu.iter().any(|&i| pods(&rjobs[i]) > 1) {
                return None;
            }
            // No exclusive placement, and no slice controller or Kueue TAS either (the
            // topology back in the nodeSelector); no flag left without a key.
            for &i in &tpu {
                let pod = &mut rjobs[i]["template"]["spec"]["template"];
                let topology = pod["metadata"]["annotations"]
                    .as_object_mut()
                    .and_then(|a| {
                        a.remove(TAS_SLICE_REQUIRED);
                        a.remove(TAS_SLICE_SIZE);
                        a.remove(SLICE_TOPOLOGY)
                    });
                if let Some(t) = topology {
                    pod["spec"]["nodeSelector"][TOPO] = t;
                }
                if let Some(a) = rjobs[i]["template"]["metadata"]["annotations"].as_object_mut() {
                    a.remove(NSEL);
                }
            }
            js["metadata"]["annotations"] = json!({});
            let rjobs = js["spec"]["replicatedJobs"].as_array().unwrap();
            tpu.iter()
                .filter(|&&i| pods(&rjobs[i]) > 1)
                .map(|&i| violation(
                    "X1",
                    &format!("{}.template.metadata.annotations", rjob(i)),
                    &format!("runs {} TPU pods without exclusive placement, so two slices can land in one {POOL}; add the annotation {EXCL}: {POOL} here or on the JobSet", pods(&rjobs[i])),
                ))
                .collect()
        }
        "X2" => {
            let g = shape.groups.iter().position(|(_, _, m)| m.len() > 1)?;
            let idx = rjobs.iter().position(|r| r["name"] == format!("r{g}-1"))?;
            let (group, head) = slice_group_head(rjobs, idx, resource);
            let fix = format!("set {NSEL} on every replicated job of the slice group or on none, best set once on the JobSet beside {EXCL}");
            let differ = "the key is the same, only the node-selector flag differs, so JobSet places their Jobs differently (by nodeSelector with the flag, by pod affinity without it)";
            match x.node_selector_flag {
                // The JobSet's key and flag reach every Job: nothing one member can undo.
                1 | 3 => return None,
                // Every member has its own flag: take it from one.
                2 => {
                    job_annotations(&mut rjobs[idx])
                        .as_object_mut()?
                        .remove(NSEL);
                    vec![violation(
                        "X2",
                        &format!("metadata.annotations[{EXCL:?}]"),
                        &format!("gives \"r{g}-1\" exclusive-topology {POOL:?} without the node-selector flag but {head:?} of the same slice group {group:?} has exclusive-topology {POOL:?} with the node-selector flag {NSEL}: {differ}; {fix}"),
                    )]
                }
                _ => {
                    let ann = job_annotations(&mut rjobs[idx]);
                    ann[EXCL] = json!(POOL);
                    ann[NSEL] = json!("true");
                    vec![violation(
                        "X2",
                        &format!("{}.template.metadata.annotations[{EXCL:?}]", rjob(idx)),
                        &format!("gives \"r{g}-1\" exclusive-topology {POOL:?} with the node-selector flag {NSEL} but {head:?} of the same slice group {group:?} has exclusive-topology {POOL:?} without the node-selector flag: {differ}; {fix}"),
                    )]
                }
            }
        }
        "X3" => {
            // The key moves from the JobSet to every replicated job, and the JobSet keeps (or
            // gets) a flag, which without a JobSet-level key reaches no Job.
            for r in rjobs.iter_mut() {
                job_annotations(r)[EXCL] = json!(POOL);
            }
            let ann = js["metadata"]["annotations"].as_object_mut()?;
            ann.remove(EXCL);
            ann.insert(NSEL.into(), json!("true"));
            vec![violation(
                "X3",
                &format!("metadata.annotations[{NSEL:?}]"),
                &format!("is set without {EXCL} beside it, and JobSet ignores it silently; add {EXCL} at the same level, or remove the flag"),
            )]
        }
        "X4" => {
            let idx = tpu
                .iter()
                .copied()
                .find(|&i| rjobs[i]["replicas"].as_u64() > Some(1))?;
            rjobs[idx]["template"]["spec"]["template"]["spec"]["nodeSelector"][POOL] =
                json!("pool-1");
            vec![violation(
                "X4",
                &format!("{}.nodeSelector[{POOL:?}]", pod_spec(idx)),
                &format!("pins {POOL} to \"pool-1\", so only one of the {} slices can ever be scheduled; remove it: exclusive placement gives each slice its own {POOL}", rjobs[idx]["replicas"]),
            )]
        }
        "N1" => {
            if !needs_hostnames(shape, rjobs, &tpu) {
                return None;
            }
            js["spec"]["network"] = json!({"enableDNSHostnames": false});
            vec![violation(
                "N1",
                "spec.network.enableDNSHostnames",
                "is false, so the coordinator and worker hostnames of this multi-host TPU JobSet would not resolve; remove it or set it to true",
            )]
        }
        "N2" => {
            if !needs_hostnames(shape, rjobs, &tpu) {
                return None;
            }
            // A hand-written host-network pod that keeps the default dnsPolicy.
            rjobs[first]["template"]["spec"]["template"]["spec"]["hostNetwork"] = json!(true);
            vec![violation(
                "N2",
                &format!("{}.dnsPolicy", pod_spec(first)),
                "is not set, and with hostNetwork: true the default ClusterFirst falls back to the node's resolver, so the pods cannot resolve the coordinator and worker hostnames; set it to ClusterFirstWithHostNet",
            )]
        }
        _ => return None,
    };
    let names = rjob_names(&js);
    Some(Broken {
        message: lines
            .iter()
            .map(|line| as_shown(line, &names))
            .collect::<Vec<_>>()
            .join("\n"),
        jobset: js,
    })
}

/// The replicated jobs' names, in order.
fn rjob_names(js: &Value) -> Vec<String> {
    js["spec"]["replicatedJobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

/// A violation line as the policy shows it: the replicated job its path is in, by name, after
/// the path, and where the rule is explained at the end.
fn as_shown(line: &str, names: &[String]) -> String {
    let (head, rest) = line.split_once(": ").unwrap();
    let rule = &head[1..head.find(']').unwrap()];
    let job = head
        .split_once("] spec.replicatedJobs[")
        .and_then(|(_, tail)| tail.split_once(']'))
        .and_then(|(i, _)| names.get(i.parse::<usize>().ok()?))
        .map(|name| format!(" (replicated job {name:?})"))
        .unwrap_or_default();
    format!("{head}{job}: {rest}; see docs/rules.md, {rule}")
}
