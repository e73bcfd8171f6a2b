//! Issue 60's record: what Kueue v0.17's Topology Aware Scheduling does, without the policy,
//! with each TAS shape of test_data/tas/, on fleets where a split placement would fit (a busy
//! host in some pools), so that a whole placement is Kueue's doing and not luck. Each case runs
//! in a namespace of its own labelled `multislice.test/deployment: none` (no cluster-wide
//! policy), with a flavour that selects only its own nodes, a ClusterQueue and a Topology; the
//! cases run at once. The table says, per fixture, the fleet, what Kueue does (asserted) and
//! the verdict the policy is to give: [`WITH_POLICY`] runs every case a second time through the
//! pair and asserts that verdict.
//!
//! Super-slicing: GKE's slice controller and its `accelerator.gke.io/slice` AdmissionCheck do
//! not run here. Its stand-in is the fixture: the TAS annotations and the affinity on HEALTHY
//! cubes that it adds to xpk's render are hand-written in xpk-super-slice-{1,2}.yaml, as in
//! test_data/jobsets/xpk-super-slice-placed.yaml.
use super::runs::fixture_jobset;
use super::shared::{BOUND, CPU_FLAVOUR, QUEUE};
use crate::common::Failures;
use crate::pods::check_jobset_pods;
use crate::shapes::{object_named, reviews_of};
use multislice_cluster::fleet::{self, Pool, NODEPOOL, TPU};
use multislice_cluster::kueue::{self, is_true};
use multislice_cluster::policies;
use multislice_cluster::run::{self, Submitted};
use multislice_cluster::{Cluster, ControlPlane};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Switched on once issue 60's rules land: each case runs a second time, in a namespace the
/// pair judges, and its [`Verdict`] is asserted.
const WITH_POLICY: bool = true;

const BLOCK: &str = "cloud.google.com/gce-topology-block";
const HOST: &str = "kubernetes.io/hostname";
const ACCELERATOR: &str = "cloud.google.com/gke-tpu-accelerator";
const MACHINE: &str = "cloud.google.com/gke-tpu-topology";
const SUB_8X8: &str = "cloud.google.com/gke-tpu-slice-8x8-id";
const SUB_4X8: &str = "cloud.google.com/gke-tpu-slice-4x8-id";
const SUB_4X4: &str = "cloud.google.com/gke-tpu-slice-4x4-id";
const SUB_2X4: &str = "cloud.google.com/gke-tpu-slice-2x4-id";
const CUBE: &str = "cloud.google.com/gke-tpu-partition-4x4x4-id";
const CUBE_STATE: &str = "cloud.google.com/gke-tpu-partition-4x4x4-state";
/// The node label that keeps each case's nodes apart: its flavour selects it.
const CASE_LABEL: &str = "multislice.test/tas-case";
/// The namespace of the busy hosts' pods, which no cluster-wide policy judges.
const BUSY_NAMESPACE: &str = "tas-busy";
/// The scheduling gate Kueue's TAS puts on each pod until it picks its host.
const GATE: &str = "kueue.x-k8s.io/topology";
const JOB_INDEX: &str = "jobset.sigs.k8s.io/job-index";
/// How long nothing may change before a Workload's message, or its gated pods, count as final.
const SETTLE: Duration = Duration::from_secs(10);

/// The nodes of a case, and the Topology that names their levels.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fleet {
    /// Topology `tas-pools`, block → node pool → host. v6e 4x4 pools of 4 hosts: block b1
    /// holds pools a, b, c, d, of which b and c have a busy host; block b2 holds pool e.
    Pools,
    /// The same Topology, with single-host v6e 2x2 slices: block b1 holds pool a (4 hosts, one
    /// busy) and pool b (4 hosts).
    SingleHost,
    /// xpk's Topology `sub-slice-topology` of an 8x8 pool (8x8 → 4x8 → 4x4 → 2x4 sub-slice ids
    /// → host): one v6e 8x8 pool of 16 hosts, four 4x4 sub-slices, the second with a busy host.
    SubSlices,
    /// xpk's Topology `super-slice-topology` (block → 4x4x4 cube → host): this many tpu7x cubes
    /// of 16 hosts in one block, the first with a busy host.
    Cubes(usize),
}

impl Fleet {
    /// The level of its slices (sub-slices, cubes), for the report.
    fn slice_level(self) -> &'static str {
        match self {
            Fleet::SubSlices => SUB_4X4,
            Fleet::Cubes(_) => CUBE,
            _ => NODEPOOL,
        }
    }
}

/// What Kueue v0.17 does with a shape, without the policy.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kueue {
    /// Its webhook refuses the CREATE with this message.
    Refused(&'static str),
    /// The Workload stays `QuotaReserved=False (Pending)` with this message (`{id}`: the run's
    /// flavour); no pod exists.
    Pending(&'static str),
    /// As `Pending`, and Kueue's Job webhook refuses each Job the JobSet controller creates
    /// (suspended) with the second message.
    PendingNoJobs(&'static str, &'static str),
    /// Admitted; at least this many pods stay gated for good, the rest are bound.
    Gated(usize),
    /// Admitted, yet no pod ever exists: Kueue's Job webhook refuses each Job the JobSet
    /// controller creates, with this message (in JobSet's `JobCreationFailed` Event).
    NoJobs(&'static str),
    /// Admitted, every pod bound, and a Job's pods in two domains of this level.
    Split(&'static str),
    /// Admitted, every pod bound, each Job in one domain of `slice` that no other Job uses,
    /// and all in one domain of `within`.
    Whole {
        slice: &'static str,
        within: Option<&'static str>,
    },
    /// Admitted, every pod bound, each Job in whole cubes of `hosts` pods that no other Job
    /// uses, all in one block.
    Cubes { hosts: usize },
}

/// The policy's verdict on a shape (issue 60's rules K1–K3; provisional until they land).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Verdict {
    /// Refused by the rule of this id: its message starts `[<id>]`.
    Refused(&'static str),
    /// Accepted, and Kueue then does what it does without the policy; placed pods get the env.
    Accepted,
    /// Accepted with a patch of the mutating policy, after which Kueue does this.
    Patched(Kueue),
}

/// One shape: its fixture (test_data/tas/<fixture>.yaml), the fleet it runs on, what Kueue
/// does without the policy, and the policy's verdict.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Case {
    pub(crate) fixture: &'static str,
    pub(crate) fleet: Fleet,
    pub(crate) kueue: Kueue,
    pub(crate) policy: Verdict,
}

const fn case(fixture: &'static str, fleet: Fleet, kueue: Kueue, policy: Verdict) -> Case {
    Case {
        fixture,
        fleet,
        kueue,
        policy,
    }
}

const NEVER: Verdict = Verdict::Refused("K1");
const SIZE: Verdict = Verdict::Refused("K2");
const POOL_WHOLE: Kueue = Kueue::Whole {
    slice: NODEPOOL,
    within: None,
};

/// Kueue's Job webhook on each Job of a JobSet whose slice size (8) is above its parallelism (4).
const SIZE_8_JOB: &str = "admission webhook \"vjob.kb.io\" denied the request: spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"8\": must not be greater than pod set count 4";

/// The record. A wrong shape's expectation fails if Kueue places it whole; a right shape's if
/// it does not.
pub(crate) const CASES: &[Case] = &[
    // Wrong shapes (issue 60): (a) a slice-level key required for 2 slices.
    case("required-pool", Fleet::Pools, Kueue::Pending(
        "couldn't assign flavors to pod set slice: topology \"tas-pools\" allows to fit only 4 out of 8 pod(s). Total nodes: 20; excluded: resource \"google.com/tpu\": 2"),
        NEVER),
    // (b) a size that does not divide R×P: the remainder, and with it every pod, stays gated.
    case("slice-size-3", Fleet::Pools, Kueue::Gated(2), Verdict::Refused("K2")),
    // (c) a size below a slice's hosts under a slice-level key.
    case("slice-size-2", Fleet::Pools, Kueue::Split(NODEPOOL), SIZE),
    // (d) a size above a slice's hosts; above P, Kueue's Job webhook refuses the Jobs too.
    case("slice-size-8", Fleet::Pools, Kueue::PendingNoJobs(
        "couldn't assign flavors to pod set slice: topology \"tas-pools\" doesn't allow to fit any of 1 slice(s). Total nodes: 20; excluded: resource \"google.com/tpu\": 2",
        SIZE_8_JOB),
        SIZE),
    // (e) per-host slicing of multi-host slices.
    case("per-host-multi-host", Fleet::Pools, Kueue::Split(NODEPOOL), Verdict::Refused("K3")),
    // (f) a slice topology without a size: the mutating roles add the slice's hosts (SPEC §4.8).
    case("slice-no-size", Fleet::Pools, Kueue::Refused(
        "admission webhook \"vjobset.kb.io\" denied the request: spec.replicatedJobs[0].template.spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Required value: must be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified"),
        Verdict::Patched(POOL_WHOLE)),
    // (d) by block: it fits, so it is admitted, and its Jobs are refused (size above P).
    case("slice-block-8", Fleet::Pools, Kueue::NoJobs(SIZE_8_JOB), SIZE),
    // (g) the multi-layer list: right; first layer above P; inner layer below a slice.
    case("layers-sub-slice", Fleet::SubSlices, Kueue::Whole { slice: SUB_4X4, within: None }, Verdict::Accepted),
    case("layers-block", Fleet::Pools, Kueue::NoJobs(
        "admission webhook \"vjob.kb.io\" denied the request: spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-required-topology-constraints]: Invalid value: 8: must not be greater than pod set count 4"),
        SIZE),
    case("layers-split", Fleet::Pools, Kueue::Split(NODEPOOL), SIZE),
    // (h) a level the Topology lacks, which only the queue check reads (Q1, part
    // queue-check-tas); a slice level above the required one, here also a required pool of 2 slices.
    case("missing-level", Fleet::Pools, Kueue::Pending(
        "couldn't assign flavors to pod set slice: Flavor \"{id}\" does not contain the requested level"),
        Verdict::Accepted),
    case("slice-above-required", Fleet::Pools, Kueue::Pending(
        "couldn't assign flavors to pod set slice: podset slice topology cloud.google.com/gce-topology-block is above the podset topology cloud.google.com/gke-nodepool"),
        NEVER),
    // Right shapes.
    case("slice-pool", Fleet::Pools, POOL_WHOLE, Verdict::Accepted),
    case("block-slice-pool", Fleet::Pools, Kueue::Whole { slice: NODEPOOL, within: Some(BLOCK) }, Verdict::Accepted),
    case("one-slice-pool", Fleet::Pools, POOL_WHOLE, Verdict::Accepted),
    case("per-host-single-host", Fleet::SingleHost, Kueue::Whole { slice: HOST, within: Some(NODEPOOL) }, Verdict::Accepted),
    // xpk's sub-slicing render for 1 and 2 slices, and fixes of the 2-slice one.
    case("xpk-sub-slice-1", Fleet::SubSlices, Kueue::Whole { slice: SUB_4X4, within: None }, Verdict::Accepted),
    case("xpk-sub-slice-2", Fleet::SubSlices, Kueue::Pending(
        "couldn't assign flavors to pod set slice-job: topology \"sub-slice-topology\" allows to fit only 4 out of 8 pod(s). Total nodes: 16; excluded: resource \"google.com/tpu\": 1"),
        NEVER),
    case("xpk-sub-slice-2-fixed", Fleet::SubSlices, Kueue::Whole { slice: SUB_4X4, within: Some(SUB_8X8) }, Verdict::Accepted),
    case("xpk-sub-slice-2-slice-only", Fleet::SubSlices, Kueue::Whole { slice: SUB_4X4, within: None }, Verdict::Accepted),
    case("xpk-sub-slice-2-block", Fleet::SubSlices, Kueue::Pending(
        "couldn't assign flavors to pod set slice-job: Flavor \"{id}\" does not contain the requested level"),
        Verdict::Accepted),
    // xpk's super-slicing render, with the slice controller's annotations hand-written.
    case("xpk-super-slice-1", Fleet::Cubes(3), Kueue::Cubes { hosts: 16 }, Verdict::Accepted),
    case("xpk-super-slice-2", Fleet::Cubes(5), Kueue::Cubes { hosts: 16 }, Verdict::Accepted),
];

/// The Topologies of the record and the busy hosts' namespace, created once.
pub(crate) async fn set_up(cluster: &Cluster) -> anyhow::Result<()> {
    policies::namespace(cluster, BUSY_NAMESPACE, Some(policies::NONE)).await?;
    for (name, levels) in [
        ("tas-pools", &[BLOCK, NODEPOOL, HOST][..]),
        (
            "sub-slice-topology",
            &[SUB_8X8, SUB_4X8, SUB_4X4, SUB_2X4, HOST][..],
        ),
        ("super-slice-topology", &[BLOCK, CUBE, HOST][..]),
    ] {
        cluster.apply(&kueue::topology(name, levels)).await?;
    }
    Ok(())
}

/// A fleet for one run: the Topology, the flavour's node labels, the node pools (one
/// `fleet::Pool` per innermost group of hosts that share every level) and the busy hosts.
struct Built {
    topology: &'static str,
    node_labels: BTreeMap<String, String>,
    pools: Vec<Pool>,
    busy: Vec<String>,
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn pool(name: String, nodes: usize, mut labels: BTreeMap<String, String>, tpu: u64) -> Pool {
    labels.entry(NODEPOOL.to_string()).or_insert(name.clone());
    Pool {
        name,
        nodes,
        labels,
        tpu,
        gpu: 0,
        cordoned: false,
        namespaced_job: None,
    }
}

/// The fleet of a case, every node labelled at every level of its Topology and with `id`.
fn build(fleet: Fleet, id: &str) -> Built {
    let base = |accelerator: &str, machine: Option<&str>| {
        let mut l = labels(&[(ACCELERATOR, accelerator), (CASE_LABEL, id)]);
        if let Some(m) = machine {
            l.insert(MACHINE.into(), m.into());
        }
        l
    };
    let mut built = Built {
        topology: "tas-pools",
        node_labels: BTreeMap::new(),
        pools: Vec::new(),
        busy: Vec::new(),
    };
    match fleet {
        Fleet::Pools | Fleet::SingleHost => {
            let (machine, layout): (&str, &[(&str, &str, bool)]) = match fleet {
                Fleet::Pools => (
                    "4x4",
                    &[
                        ("b1", "a", false),
                        ("b1", "b", true),
                        ("b1", "c", true),
                        ("b1", "d", false),
                        ("b2", "e", false),
                    ],
                ),
                _ => ("2x2", &[("b1", "a", true), ("b1", "b", false)]),
            };
            built.node_labels = base("tpu-v6e-slice", Some(machine));
            for (block, name, busy) in layout {
                let mut l = built.node_labels.clone();
                l.insert(BLOCK.into(), format!("{id}-{block}"));
                let p = pool(format!("{id}-{name}"), 4, l, 4);
                if *busy {
                    built.busy.push(format!("{}-0", p.name));
                }
                built.pools.push(p);
            }
        }
        Fleet::SubSlices => {
            built.topology = "sub-slice-topology";
            built.node_labels = base("tpu-v6e-slice", Some("8x8"));
            for q in 0..4 {
                for half in 0..2 {
                    let mut l = built.node_labels.clone();
                    l.insert(NODEPOOL.into(), format!("{id}-8x8"));
                    l.insert(SUB_8X8.into(), format!("{id}-8x8"));
                    l.insert(SUB_4X8.into(), format!("{id}-4x8-{}", q / 2));
                    l.insert(SUB_4X4.into(), format!("{id}-4x4-{q}"));
                    l.insert(SUB_2X4.into(), format!("{id}-2x4-{q}{half}"));
                    let p = pool(format!("{id}-q{q}{half}"), 2, l, 4);
                    if q == 1 && half == 0 {
                        built.busy.push(format!("{}-0", p.name));
                    }
                    built.pools.push(p);
                }
            }
        }
        Fleet::Cubes(cubes) => {
            built.topology = "super-slice-topology";
            built.node_labels = base("tpu7x", None);
            for c in 0..cubes {
                let mut l = built.node_labels.clone();
                l.insert(BLOCK.into(), format!("{id}-b1"));
                l.insert(CUBE.into(), format!("{id}-c{c}"));
                l.insert(CUBE_STATE.into(), "HEALTHY".into());
                let p = pool(format!("{id}-c{c}"), 16, l, 4);
                if c == 0 {
                    built.busy.push(format!("{}-0", p.name));
                }
                built.pools.push(p);
            }
        }
    }
    built
}

/// A pod that holds every chip of a host, bound by name as a running workload is: Kueue counts
/// it against that host (a pod that is not TAS's, with a node).
fn busy_pod(node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("busy-{node}"), "namespace": BUSY_NAMESPACE},
        "spec": {
            "nodeName": node, "restartPolicy": "Never",
            "tolerations": [{"key": TPU, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "busy", "image": "busybox",
                            "resources": {"limits": {TPU: "4"}}}],
        },
    })
}

/// What one run saw.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    pub(crate) namespace: String,
    pub(crate) created: Option<Submitted>,
    /// The JobSet as submitted.
    pub(crate) submitted: Value,
    pub(crate) workload: Value,
    pub(crate) pods: Vec<Value>,
    pub(crate) stored: Value,
    /// Node name → its labels.
    pub(crate) nodes: BTreeMap<String, BTreeMap<String, String>>,
    /// The messages of JobSet's `JobCreationFailed` Events in the namespace.
    pub(crate) job_failures: Vec<String>,
    pub(crate) seconds: f64,
}

impl Observed {
    fn admitted(&self) -> bool {
        is_true(&self.workload, "Admitted")
    }
    fn gated(&self) -> usize {
        self.pods.iter().filter(|p| is_gated(p)).count()
    }
    fn bound(&self) -> usize {
        self.pods
            .iter()
            .filter(|p| p["spec"]["nodeName"].is_string())
            .count()
    }
    /// Job index → the values of `level` on the nodes of its bound pods (pods per value).
    fn domains(&self, level: &str) -> BTreeMap<String, BTreeMap<String, usize>> {
        let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        for p in &self.pods {
            let Some(node) = p["spec"]["nodeName"].as_str() else {
                continue;
            };
            let job = p["metadata"]["labels"][JOB_INDEX]
                .as_str()
                .unwrap_or("?")
                .to_string();
            let value = self
                .nodes
                .get(node)
                .and_then(|l| l.get(level))
                .cloned()
                .unwrap_or_else(|| "?".into());
            *out.entry(job).or_default().entry(value).or_default() += 1;
        }
        out
    }
}

fn is_gated(pod: &Value) -> bool {
    pod["spec"]["schedulingGates"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|g| g["name"] == GATE)
}

/// One run of a case: its queue, flavour and fleet, then the JobSet, watched until Kueue's
/// answer is final (refused, pending, placed, or pods gated for [`SETTLE`]); then cleared.
/// `prefix` keeps the runs apart (`tas-`: no policy; `tasp-`: the pair).
async fn run_case(cluster: Cluster, case: Case, prefix: &'static str) -> anyhow::Result<Observed> {
    let id = format!("{prefix}{}", case.fixture);
    let namespace = id.clone();
    let built = build(case.fleet, &id);
    let mut rf = kueue::resource_flavor(&id, &built.node_labels);
    rf["spec"]["topologyName"] = json!(built.topology);
    // Kueue places pods before the API server's ExtendedResourceToleration gives them one.
    rf["spec"]["tolerations"] = json!([{"key": TPU, "operator": "Exists", "effect": "NoSchedule"}]);
    cluster.apply(&rf).await?;
    cluster
        .apply(&kueue::tpu_cluster_queue(&id, &id, 1024, CPU_FLAVOUR))
        .await?;
    let deployment = (prefix == "tas-").then_some(policies::NONE);
    policies::namespace(&cluster, &namespace, deployment).await?;
    cluster
        .apply(&kueue::local_queue(&namespace, QUEUE, &id))
        .await?;
    kueue::wait_local_queue_active(&cluster, &namespace, QUEUE).await?;
    fleet::provision(&cluster, &built.pools).await?;
    let busy: Vec<Value> = built.busy.iter().map(|n| busy_pod(n)).collect();
    for b in &busy {
        cluster.apply(b).await?;
    }
    // Kueue's caches see the nodes and the busy pods (its informers) before the JobSet comes.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let object = fixture_jobset(&format!("test_data/tas/{}.yaml", case.fixture), &namespace)?;
    let expected = run::expected_pods(&object) as usize;
    let start = Instant::now();
    let sub = run::submit(&cluster, std::slice::from_ref(&object))
        .await?
        .remove(0);
    let mut seen = Observed {
        namespace: namespace.clone(),
        submitted: object.clone(),
        ..Observed::default()
    };
    if sub.allowed() {
        watch(&cluster, &sub, expected, &mut seen).await?;
        seen.stored = cluster.get(&sub.created.body).await?.unwrap_or_default();
        seen.job_failures = job_failures(&cluster, &namespace).await?;
        seen.nodes = fleet::nodes_by_name(&cluster)
            .await?
            .into_iter()
            .map(|(name, n)| {
                let labels = n["metadata"]["labels"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect();
                (name, labels)
            })
            .collect();
        cluster.delete(&object_named(&sub)).await?;
    }
    seen.seconds = start.elapsed().as_secs_f64();
    seen.created = Some(sub);
    for b in &busy {
        cluster.delete_now(b).await?;
    }
    fleet::remove(&cluster, &built.pools).await?;
    Ok(seen)
}

/// Polls the JobSet's Workload, pods and Events until Kueue's answer is there and has not
/// changed for [`SETTLE`] (every pod bound: at once), or [`BOUND`] runs out. An answer: the
/// Workload pending; admitted with every pod made; or a Job refused.
async fn watch(
    cluster: &Cluster,
    sub: &Submitted,
    expected: usize,
    seen: &mut Observed,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + BOUND;
    let mut last = String::new();
    let mut since = Instant::now();
    loop {
        seen.workload = kueue::workloads_of(cluster, sub)
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        seen.pods = run::pods_of(cluster, sub).await?;
        if seen.pods.is_empty() {
            seen.job_failures = job_failures(cluster, &sub.namespace).await?;
        }
        let placed = seen.pods.len() == expected && seen.bound() == expected;
        if seen.admitted() && placed {
            return Ok(());
        }
        let state = format!(
            "{:?} {} pods, {} gated, {} bound, {} Jobs refused",
            kueue::conditions_text(&seen.workload),
            seen.pods.len(),
            seen.gated(),
            seen.bound(),
            seen.job_failures.len()
        );
        if state != last {
            last = state;
            since = Instant::now();
        }
        let pending = kueue::condition(&seen.workload, "QuotaReserved")
            .is_some_and(|c| c["status"] == "False" && c["reason"] == "Pending");
        let answered = pending
            || (seen.admitted() && seen.pods.len() == expected)
            || !seen.job_failures.is_empty();
        if (answered && since.elapsed() >= SETTLE) || Instant::now() > deadline {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The messages of JobSet's `JobCreationFailed` Events in a namespace.
async fn job_failures(cluster: &Cluster, namespace: &str) -> anyhow::Result<Vec<String>> {
    Ok(cluster
        .list("v1", "Event", Some(namespace), None)
        .await?
        .into_iter()
        .filter(|e| e["reason"] == "JobCreationFailed")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect())
}

/// What Kueue did, in a line for the report and the record.
fn describe(seen: &Observed, level: &str) -> String {
    let Some(sub) = &seen.created else {
        return "not submitted".into();
    };
    if !sub.allowed() {
        return format!(
            "refused at CREATE ({}): {:?}",
            sub.created.status,
            sub.created.message()
        );
    }
    let pending = kueue::condition(&seen.workload, "QuotaReserved")
        .filter(|c| c["status"] == "False")
        .and_then(|c| c["message"].as_str());
    format!(
        "admitted {}; {} pods, {} bound, {} gated; pending message {pending:?}; {level} by Job {:?}; JobCreationFailed {:?}; in {:.1} s",
        seen.admitted(),
        seen.pods.len(),
        seen.bound(),
        seen.gated(),
        seen.domains(level),
        seen.job_failures.first(),
        seen.seconds
    )
}

/// Asserts what Kueue did against the case's record.
fn check_kueue(f: &mut Failures, what: &str, kueue_did: Kueue, seen: &Observed) {
    let Some(sub) = &seen.created else {
        f.0.push(format!("{what}: not submitted"));
        return;
    };
    let expected = run::expected_pods(&sub.created.body) as usize;
    if let Kueue::Refused(message) = kueue_did {
        f.check(!sub.allowed(), || {
            format!("{what}: Kueue's webhook let it in")
        });
        f.eq(
            sub.created.message(),
            Some(message),
            &format!("{what}: refusal"),
        );
        return;
    }
    if !sub.allowed() {
        f.0.push(format!(
            "{what}: CREATE refused ({}): {:?}",
            sub.created.status,
            sub.created.message()
        ));
        return;
    }
    let refused_jobs = match kueue_did {
        Kueue::NoJobs(m) | Kueue::PendingNoJobs(_, m) => Some(m),
        _ => None,
    };
    match refused_jobs {
        Some(m) => f.check(seen.job_failures.iter().any(|e| e.contains(m)), || {
            format!(
                "{what}: JobCreationFailed Events {:?}, want {m:?}",
                seen.job_failures
            )
        }),
        None => f.eq(
            seen.job_failures.as_slice(),
            &[],
            &format!("{what}: JobCreationFailed Events"),
        ),
    }
    if let Kueue::Pending(message) | Kueue::PendingNoJobs(message, _) = kueue_did {
        let conditions = kueue::conditions_text(&seen.workload);
        let want = format!(
            "QuotaReserved=False (Pending): {}",
            message.replace("{id}", &seen.namespace)
        );
        f.check(conditions.contains(&want), || {
            format!("{what}: Workload {conditions:?}, want {want:?}")
        });
        f.check(!seen.admitted(), || format!("{what}: admitted"));
        f.eq(seen.pods.len(), 0, &format!("{what}: pods"));
        f.eq(
            &seen.stored["spec"]["suspend"],
            &json!(true),
            &format!("{what}: still suspended"),
        );
        return;
    }
    f.check(seen.admitted(), || {
        format!(
            "{what}: not admitted: {:?}",
            kueue::conditions_text(&seen.workload)
        )
    });
    let assignment = &seen.workload["status"]["admission"]["podSetAssignments"][0];
    f.check(!assignment["topologyAssignment"].is_null(), || {
        format!("{what}: the Workload has no topology assignment")
    });
    if let Kueue::NoJobs(_) = kueue_did {
        f.eq(seen.pods.len(), 0, &format!("{what}: pods"));
        return;
    }
    f.eq(seen.pods.len(), expected, &format!("{what}: pods"));
    if let Kueue::Gated(gated) = kueue_did {
        f.check(seen.gated() >= gated, || {
            format!(
                "{what}: {} pods gated for good, want {gated} at least",
                seen.gated()
            )
        });
        f.eq(
            seen.bound() + seen.gated(),
            expected,
            &format!("{what}: pods bound or gated"),
        );
        return;
    }
    f.eq(seen.bound(), expected, &format!("{what}: pods bound"));
    for p in &seen.pods {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        f.check(!is_gated(p), || {
            format!("{what}: pod {name} is still gated")
        });
        f.eq(
            p["spec"]["nodeSelector"][HOST].as_str(),
            p["spec"]["nodeName"].as_str(),
            &format!("{what}: pod {name}: Kueue's hostname selector"),
        );
    }
    match kueue_did {
        Kueue::Split(level) => {
            let by_job = seen.domains(level);
            f.check(by_job.values().any(|d| d.len() > 1), || {
                format!("{what}: every Job whole in one {level}: {by_job:?}")
            });
        }
        Kueue::Whole { slice, within } => {
            let by_job = seen.domains(slice);
            let used: Vec<&String> = by_job.values().flat_map(|d| d.keys()).collect();
            let distinct: BTreeSet<&&String> = used.iter().collect();
            f.check(
                by_job.values().all(|d| d.len() == 1) && distinct.len() == used.len(),
                || format!("{what}: {slice} by Job {by_job:?}, want one each, none shared"),
            );
            if let Some(level) = within {
                let all: BTreeSet<String> = seen
                    .domains(level)
                    .into_values()
                    .flat_map(|d| d.into_keys())
                    .collect();
                f.eq(all.len(), 1, &format!("{what}: the {level}s of its pods"));
            }
        }
        Kueue::Cubes { hosts } => {
            let by_job = seen.domains(CUBE);
            let mut owners: BTreeMap<&String, usize> = BTreeMap::new();
            for cubes in by_job.values() {
                for (cube, pods) in cubes {
                    *owners.entry(cube).or_default() += 1;
                    f.eq(*pods, hosts, &format!("{what}: pods in cube {cube}"));
                }
            }
            f.check(owners.values().all(|n| *n == 1), || {
                format!("{what}: a cube shared by two Jobs: {by_job:?}")
            });
            let blocks: BTreeSet<String> = seen
                .domains(BLOCK)
                .into_values()
                .flat_map(|d| d.into_keys())
                .collect();
            f.eq(blocks.len(), 1, &format!("{what}: the blocks of its pods"));
        }
        _ => {}
    }
}

/// Runs every case at once (without the policy; then, with [`WITH_POLICY`], through the pair)
/// and gives each its failures, with a line of what Kueue did.
pub(crate) async fn cases(plane: &ControlPlane) -> Vec<(String, anyhow::Result<Failures>)> {
    let started = Instant::now();
    let mut passes: Vec<&'static str> = vec!["tas-"];
    if WITH_POLICY {
        passes.push("tasp-");
    }
    let mut tasks = tokio::task::JoinSet::new();
    // CLUSTER_CASE=<part of a fixture's name> runs the cases it names.
    let only = std::env::var("CLUSTER_CASE").unwrap_or_default();
    for prefix in &passes {
        for (i, case) in CASES.iter().enumerate() {
            if !case.fixture.contains(only.as_str()) {
                continue;
            }
            let cluster = plane.cluster.clone();
            let (case, prefix) = (*case, *prefix);
            tasks.spawn(async move { (prefix, i, run_case(cluster, case, prefix).await) });
        }
    }
    let mut results: BTreeMap<(&str, usize), anyhow::Result<Observed>> = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((prefix, i, seen)) => {
                results.insert((prefix, i), seen);
            }
            Err(e) => eprintln!("tas: a case's task failed: {e}"),
        }
    }
    let reviews = plane.reviews().unwrap_or_default();
    let mut out = Vec::new();
    for ((prefix, i), seen) in results {
        let case = CASES[i];
        let with_policy = prefix != "tas-";
        let name = format!(
            "TAS {} {}: {}",
            if with_policy {
                "with the policy"
            } else {
                "without the policy"
            },
            case.fixture,
            expectation(&case, with_policy)
        );
        let result = seen.map(|seen| {
            let what = format!("{}/{}", seen.namespace, case.fixture);
            eprintln!("tas: {what}: {}", describe(&seen, case.fleet.slice_level()));
            let mut f = Failures::default();
            if with_policy {
                check_policy(&mut f, &what, &case, &seen, plane);
            } else {
                let ours = seen
                    .created
                    .as_ref()
                    .map(|s| reviews_of(&reviews, "JobSet", &s.namespace, &s.name).len())
                    .unwrap_or_default();
                f.eq(ours, 0, &format!("{what}: CREATEs our webhook saw"));
                check_kueue(&mut f, &what, case.kueue, &seen);
            }
            f
        });
        out.push((name, result));
    }
    eprintln!(
        "tas: {} run(s) in {:.0} s",
        out.len(),
        started.elapsed().as_secs_f64()
    );
    out
}

fn expectation(case: &Case, with_policy: bool) -> String {
    match (with_policy, case.policy) {
        (true, Verdict::Refused(rule)) => format!("refused by {rule}"),
        (true, Verdict::Patched(_)) => "patched by the mutating policy, then placed".into(),
        (_, _) => match case.kueue {
            Kueue::Refused(_) => "Kueue's webhook refuses it".into(),
            Kueue::Pending(_) => "Kueue never admits it (pending, its message)".into(),
            Kueue::Gated(n) => format!("admitted, {n} pods or more gated for good"),
            Kueue::PendingNoJobs(..) => {
                "Kueue never admits it, and its Job webhook refuses its Jobs".into()
            }
            Kueue::NoJobs(_) => "admitted, and Kueue's Job webhook refuses its Jobs".into(),
            Kueue::Split(level) => format!("placed, a Job across two {level} domains"),
            Kueue::Whole { slice, .. } => format!("placed, each Job whole in one {slice}"),
            Kueue::Cubes { .. } => "placed, each Job in whole cubes of one block".into(),
        },
    }
}

/// The validating half's refusal of `object` as written (what the real webhook answered must
/// be it, word for word).
fn native_refusal(object: &Value) -> String {
    use jobset_multislice_policy::admission::evaluate;
    use multislice_host::request::{admission_request, Kind};
    let request = admission_request(Kind::JobSet, "CREATE", object, None);
    let payload = json!({"request": request, "settings": {"role": "validate"}});
    evaluate(&serde_json::to_vec(&payload).unwrap_or_default())
        .message
        .unwrap_or_default()
}

/// The second pass: the policy's verdict, then, where it accepts, Kueue's record and the env.
fn check_policy(f: &mut Failures, what: &str, case: &Case, seen: &Observed, plane: &ControlPlane) {
    let Some(sub) = &seen.created else {
        f.0.push(format!("{what}: not submitted"));
        return;
    };
    match case.policy {
        Verdict::Refused(rule) => {
            f.eq(sub.created.status, 400, &format!("{what}: status"));
            // The policy's own refusal of the JobSet, led by the rule: each names its
            // annotation, what Kueue would do, and the fix.
            let mine = native_refusal(&seen.submitted);
            f.check(mine.starts_with(&format!("[{rule}] ")), || {
                format!("{what}: the policy refuses it with {mine:?}, not {rule}")
            });
            f.eq(
                sub.created.message().unwrap_or_default().to_string(),
                format!(
                    "admission webhook \"{}\" denied the request: {mine}",
                    plane.webhook_name
                ),
                &format!("{what}: refusal"),
            );
        }
        Verdict::Accepted | Verdict::Patched(_) => {
            let kueue_did = match case.policy {
                Verdict::Patched(then) => then,
                _ => case.kueue,
            };
            check_kueue(f, what, kueue_did, seen);
            if sub.allowed() && seen.bound() == seen.pods.len() && !seen.pods.is_empty() {
                check_jobset_pods(f, what, &seen.stored, &seen.pods);
            }
        }
    }
}
