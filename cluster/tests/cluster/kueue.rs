//! SPEC §5 for real: queued JobSets admitted by a real Kueue (its webhooks, its JobSet
//! integration, its scheduler), on a control plane of their own. Kueue suspends what carries
//! the queue label, reserves quota in a flavour, then unsuspends it with the flavour's node
//! selectors; that UPDATE goes through our webhook, and the pods the real controllers then
//! make are checked as in every other shape.
mod fit;

use super::{
    check_exclusive_placement, check_jobset_pods, check_nothing_lost_jobset,
    check_warnings_reached, object_named, oracle, reviews_of, shape, Failures, Report,
};
use multislice_cluster::agent::NodeAgent;
use multislice_cluster::fleet::{self, TPU};
use multislice_cluster::kueue::{self, is_true, DEFAULT_QUEUE};
use multislice_cluster::policies;
use multislice_cluster::run::{self, Submitted};
use multislice_cluster::{Binaries, Cluster, ControlPlane, Options};
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long Kueue may take to admit a workload, or the controllers to make its pods.
const BOUND: Duration = Duration::from_secs(180);
/// The policy's annotation on each pod template (SPEC §4.4).
const FACTS: &str = "multislice.kubewarden.io/facts";

/// A TPU flavour: the node labels of one node-pool shape (v6e: 4 chips per host).
struct Flavour {
    name: &'static str,
    accelerator: &'static str,
    topology: &'static str,
}

impl Flavour {
    fn labels(&self) -> BTreeMap<String, String> {
        kueue::tpu_node_labels(self.accelerator, self.topology)
    }
}

const V6E_4X4: Flavour = Flavour {
    name: "tpu-v6e-4x4",
    accelerator: "tpu-v6e-slice",
    topology: "4x4",
};
/// Two hosts: the wrong shape for a JobSet whose slices have four.
const V6E_2X4: Flavour = Flavour {
    name: "tpu-v6e-2x4",
    accelerator: "tpu-v6e-slice",
    topology: "2x4",
};
/// Drivers and other CPU pods: any node (the taints keep them off accelerator hosts).
const CPU_FLAVOUR: &str = "cpu";

/// The ClusterQueues, each behind a LocalQueue of the name the fixtures use
/// (`multislice-queue`) in namespaces of its own.
const QUEUE: &str = "multislice-queue";

/// The namespace of examples/admission-policy.yaml.
const TRAINING: &str = "training";

/// Flavours, ClusterQueues and LocalQueues: `tpu` (4x4, room for anything here), `misfit`
/// (only 2x4), `skip` (2x4, then 4x4), `pair` (2x4 quota for two single-slice JobSets), and
/// `cpu-two` (CPU for two pods of one core). Each namespace is labelled for the deployment that judges it (the pair
/// where there is no label; policies.rs), once, long before its case submits anything.
async fn set_up_queues(cluster: &Cluster) -> anyhow::Result<()> {
    for flavour in [&V6E_4X4, &V6E_2X4] {
        cluster
            .apply(&kueue::resource_flavor(flavour.name, &flavour.labels()))
            .await?;
    }
    cluster
        .apply(&kueue::resource_flavor(CPU_FLAVOUR, &BTreeMap::new()))
        .await?;
    for (queue, flavour, chips) in [
        ("tpu", &V6E_4X4, 256),
        ("misfit", &V6E_2X4, 256),
        ("pair", &V6E_2X4, 16),
    ] {
        cluster
            .apply(&kueue::tpu_cluster_queue(
                queue,
                flavour.name,
                chips,
                CPU_FLAVOUR,
            ))
            .await?;
    }
    // A flavour that labels only the accelerator (xpk's autoprovisioning flavours), in a
    // resource group of its own.
    cluster
        .apply(&kueue::resource_flavor(
            fit::V6E_ANY,
            &[(
                "cloud.google.com/gke-tpu-accelerator".to_string(),
                V6E_4X4.accelerator.to_string(),
            )]
            .into_iter()
            .collect(),
        ))
        .await?;
    cluster
        .apply(&kueue::tpu_cluster_queue_of(
            "any-v6e",
            &[(fit::V6E_ANY, 256)],
            CPU_FLAVOUR,
        ))
        .await?;
    // The flavour that does not fit first: Kueue tries them in this order.
    cluster
        .apply(&kueue::tpu_cluster_queue_of(
            "skip",
            &[(V6E_2X4.name, 256), (V6E_4X4.name, 256)],
            CPU_FLAVOUR,
        ))
        .await?;
    cluster
        .apply(&json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cpu-two"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [{
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [{"name": CPU_FLAVOUR,
                                 "resources": [{"name": "cpu", "nominalQuota": "2"},
                                               {"name": "memory", "nominalQuota": "10Ti"}]}],
                }],
            },
        }))
        .await?;
    for (namespace, local_queue, queue, deployment) in [
        ("kueue-v6e", QUEUE, "tpu", None),
        ("kueue-xpk", QUEUE, "tpu", Some(policies::SINGLE)),
        ("kueue-misfit", QUEUE, "misfit", None),
        ("kueue-skip", QUEUE, "skip", None),
        ("kueue-skip-single", QUEUE, "skip", Some(policies::SINGLE)),
        ("kueue-any", QUEUE, "any-v6e", None),
        ("kueue-g5", QUEUE, "skip", None),
        ("kueue-pair", QUEUE, "pair", None),
        ("kueue-default", DEFAULT_QUEUE, "skip", None),
        (TRAINING, DEFAULT_QUEUE, "tpu", Some(policies::NONE)),
        ("kueue-j4", QUEUE, "cpu-two", None),
    ] {
        policies::namespace(cluster, namespace, deployment).await?;
        cluster
            .apply(&kueue::local_queue(namespace, local_queue, queue))
            .await?;
        kueue::wait_local_queue_active(cluster, namespace, local_queue).await?;
    }
    Ok(())
}

/// Polls `probe` until it returns something, or `bound` runs out.
async fn eventually<T, F, Fut>(bound: Duration, mut probe: F) -> anyhow::Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + bound;
    loop {
        if let Some(found) = probe().await? {
            return Ok(Some(found));
        }
        if Instant::now() > deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The Workload of a JobSet once `ready` holds for it.
async fn workload_when(
    cluster: &Cluster,
    sub: &Submitted,
    bound: Duration,
    ready: impl Fn(&Value) -> bool,
) -> anyhow::Result<Option<Value>> {
    eventually(bound, || {
        let ready = &ready;
        async move {
            let workloads = kueue::workloads_of(cluster, sub).await?;
            Ok(workloads.into_iter().find(|w| ready(w)))
        }
    })
    .await
}

/// The flavour Kueue assigned to each pod set's TPUs.
fn tpu_flavours(workload: &Value) -> Vec<String> {
    workload["status"]["admission"]["podSetAssignments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["flavors"][TPU].as_str().map(str::to_string))
        .collect()
}

/// CREATE, as a user submits a queued JobSet: our webhook accepts it and stamps its facts on
/// each pod template, its warnings reach the client, and Kueue's webhook suspends it.
async fn create_queued(
    f: &mut Failures,
    plane: &ControlPlane,
    object: &Value,
) -> anyhow::Result<Option<Submitted>> {
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let sub = run::submit(&plane.cluster, std::slice::from_ref(object))
        .await?
        .remove(0);
    let what = format!("JobSet {namespace}/{}", sub.name);
    f.check(sub.allowed(), || {
        format!("{what}: CREATE refused: {:?}", sub.created.message())
    });
    if !sub.allowed() {
        return Ok(None);
    }
    let reviews = plane.reviews()?;
    let created = reviews_of(&reviews, "JobSet", namespace, &sub.name);
    f.check(!created.is_empty(), || {
        format!("{what}: our webhook never saw its CREATE")
    });
    for review in &created {
        f.eq(
            &review["allowed"],
            &json!(true),
            &format!("{what}: {}'s CREATE verdict", review["policy"]),
        );
    }
    check_warnings_reached(f, &what, &created, &sub);
    let created = &sub.created.body;
    f.eq(
        &created["spec"]["suspend"],
        &json!(true),
        &format!("{what}: suspended by Kueue at CREATE"),
    );
    for rjob in created["spec"]["replicatedJobs"]
        .as_array()
        .into_iter()
        .flatten()
    {
        f.check(
            rjob["template"]["spec"]["template"]["metadata"]["annotations"][FACTS].is_string(),
            || {
                format!(
                    "{what}: replicated job {} has no facts at CREATE",
                    rjob["name"]
                )
            },
        );
    }
    Ok(Some(sub))
}

/// One queued JobSet of a fixture file, moved to `namespace`, from CREATE to its running pods.
async fn queued_fixture_runs(
    plane: &ControlPlane,
    file: &str,
    namespace: &str,
    flavour: &Flavour,
) -> anyhow::Result<Failures> {
    queued_jobset_runs(plane, &fixture_jobset(file, namespace)?, flavour).await
}

/// One queued JobSet from CREATE to its running pods, each step asserted.
async fn queued_jobset_runs(
    plane: &ControlPlane,
    object: &Value,
    flavour: &Flavour,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let object = object.clone();
    let started = kueue::as_started_in(&object, &flavour.labels());
    let pools = fleet::pools_for(std::slice::from_ref(&started), &format!("{namespace}-"));
    fleet::provision(&plane.cluster, &pools).await?;

    let Some(sub) = create_queued(&mut f, plane, &object).await? else {
        return Ok(f);
    };
    let what = format!("JobSet {namespace}/{}", sub.name);
    let created = &sub.created.body;
    // The JobSet's own queue, or the namespace's default one (Kueue's LocalQueueDefaulting).
    let queue = kueue::queue_name(created).unwrap_or_default().to_string();
    f.eq(
        queue.as_str(),
        kueue::queue_name(&object).unwrap_or(DEFAULT_QUEUE),
        &format!("{what}: queue at CREATE"),
    );

    // Kueue reserves quota in the flavour and admits the workload.
    let workload = workload_when(&plane.cluster, &sub, BOUND, |w| is_true(w, "Admitted")).await?;
    let Some(workload) = workload else {
        f.0.push(format!(
            "{what}: Kueue did not admit its Workload within {BOUND:?}"
        ));
        return Ok(f);
    };
    let assigned = tpu_flavours(&workload);
    f.check(
        !assigned.is_empty() && assigned.iter().all(|a| a == flavour.name),
        || {
            format!(
                "{what}: TPU flavours assigned {assigned:?}, want {}",
                flavour.name
            )
        },
    );

    // The unsuspending UPDATE, with the flavour's selectors, passes our validation.
    let expected = run::expected_pods(&object);
    let (complete, pods) =
        run::wait_bound(&plane.cluster, &[(sub.clone(), expected)], BOUND).await?;
    let pods = pods.into_iter().next().unwrap_or_default();
    f.check(complete, || {
        format!("{what}: {} of {expected} pods bound", pods.len())
    });
    let reviews = plane.reviews()?;
    let updates = kueue::unsuspending_reviews(&reviews, namespace, &sub.name);
    f.check(!updates.is_empty(), || {
        format!("{what}: our webhook never saw the unsuspending UPDATE")
    });
    for u in &updates {
        f.eq(
            &u["allowed"],
            &json!(true),
            &format!("{what}: our verdict on the unsuspending UPDATE"),
        );
        for rjob in u["object"]["spec"]["replicatedJobs"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if !oracle::is_tpu(rjob) {
                continue;
            }
            let selector = &rjob["template"]["spec"]["template"]["spec"]["nodeSelector"];
            for (k, v) in flavour.labels() {
                f.eq(
                    &selector[&k],
                    &json!(v),
                    &format!("{what}: UPDATE's nodeSelector {k}"),
                );
            }
        }
    }

    // The real pods: the flavour's selectors, the env of SPEC §4, one slice per node pool.
    let stored = plane.cluster.get(created).await?.unwrap_or(created.clone());
    for p in &pods {
        if p["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(oracle::is_tpu_container)
        {
            for (k, v) in flavour.labels() {
                f.eq(
                    &p["spec"]["nodeSelector"][&k],
                    &json!(v),
                    &format!("{what}: pod {} nodeSelector {k}", p["metadata"]["name"]),
                );
            }
        }
    }
    check_jobset_pods(&mut f, &what, &stored, &pods);
    check_nothing_lost_jobset(&mut f, &what, &object, &pods);
    check_exclusive_placement(&mut f, &what, &stored, &pods, &plane.cluster).await;
    eprintln!(
        "kueue: {what}: queued in {queue:?} and suspended at CREATE, admitted in {}, {} unsuspending UPDATE(s) allowed, {} pods bound",
        assigned.join(","),
        updates.len(),
        pods.len()
    );
    plane.cluster.delete(&object_named(&sub)).await?;
    fleet::remove(&plane.cluster, &pools).await?;
    Ok(f)
}

/// The JobSet of a fixture file, moved to `namespace`.
fn fixture_jobset(file: &str, namespace: &str) -> anyhow::Result<Value> {
    let shape = shape(file, &workspace_root().join(file), 0)?;
    let mut object = shape
        .objects
        .into_iter()
        .find(|o| o["kind"] == "JobSet")
        .ok_or_else(|| anyhow::anyhow!("{file} has no JobSet"))?;
    object["metadata"]["namespace"] = json!(namespace);
    Ok(object)
}

/// SPEC §4.7 on the real Kueue: the policy limits JobSet's v6e example, which leaves its slice
/// shape to the queue, to the shapes where 4 hosts of 4 chips make a slice (a required node
/// affinity), and Kueue's flavour assigner skips a flavour whose node labels it does not
/// match. In a queue of 2x4 slices (2 hosts) only, the JobSet stays queued, with Kueue's
/// reason, and no unsuspending UPDATE ever reaches our webhook: the dead end of a flavour
/// admitted only for T4 to refuse its UPDATE is gone.
async fn misfit_flavour_is_skipped(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let namespace = "kueue-misfit";
    let object = fixture_jobset("test_data/jobsets/jobset-v6e-example.yaml", namespace)?;
    let Some(sub) = create_queued(&mut f, plane, &object).await? else {
        return Ok(f);
    };
    let what = format!("JobSet {namespace}/{}", sub.name);
    let reason = format!("flavor {} doesn't match node affinity", V6E_2X4.name);
    let pending = workload_when(&plane.cluster, &sub, BOUND, |w| {
        kueue::condition(w, "QuotaReserved").is_some_and(|c| {
            c["status"] == "False"
                && c["reason"] == "Pending"
                && c["message"].as_str().is_some_and(|m| m.contains(&reason))
        })
    })
    .await?;
    let workload = match pending {
        Some(w) => w,
        None => kueue::workloads_of(&plane.cluster, &sub)
            .await?
            .into_iter()
            .next()
            .unwrap_or_default(),
    };
    let conditions = kueue::conditions_text(&workload);
    f.check(
        conditions
            .iter()
            .any(|c| c.starts_with("QuotaReserved=False (Pending)") && c.contains(&reason)),
        || format!("{what}: Workload {conditions:?}, want Pending because {reason:?}"),
    );
    for kind in ["QuotaReserved", "Admitted"] {
        f.check(!is_true(&workload, kind), || {
            format!("{what}: Workload condition {kind} is True")
        });
    }
    let stored = plane
        .cluster
        .get(&sub.created.body)
        .await?
        .unwrap_or_default();
    f.eq(
        &stored["spec"]["suspend"],
        &json!(true),
        &format!("{what}: still suspended"),
    );
    f.eq(
        run::pods_of(&plane.cluster, &sub).await?.len(),
        0,
        &format!("{what}: pods"),
    );
    let reviews = plane.reviews()?;
    let updates = kueue::unsuspending_reviews(&reviews, namespace, &sub.name);
    f.eq(updates.len(), 0, &format!("{what}: unsuspending UPDATEs"));
    let terms = &stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        ["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    eprintln!(
        "kueue: {what}: in a queue of {} only: Workload {conditions:?}, still suspended, 0 pods, {} unsuspending UPDATEs; the policy's required node affinity: {terms}",
        V6E_2X4.name,
        updates.len(),
    );
    fit::waits_then_runs_once_a_flavour_fits(&mut f, plane, &sub, "misfit").await?;
    plane.cluster.delete(&object_named(&sub)).await?;
    Ok(f)
}

/// Quota for two single-slice JobSets, three submitted: the third waits in the queue until the
/// first finishes, then runs with the right env.
async fn third_waits_for_quota(
    plane: &ControlPlane,
    agent: &NodeAgent,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let namespace = "kueue-pair";
    let mut objects = Vec::new();
    for name in ["pair-a", "pair-b", "pair-c"] {
        let mut object = fixture_jobset("test_data/jobsets/jobset-v6e-example.yaml", namespace)?;
        object["metadata"]["name"] = json!(name);
        // One slice of v6e 2x4: 2 hosts of 4 chips, 8 chips of the queue's 16.
        let rjob = &mut object["spec"]["replicatedJobs"][0];
        rjob["replicas"] = json!(1);
        rjob["template"]["spec"]["parallelism"] = json!(2);
        rjob["template"]["spec"]["completions"] = json!(2);
        objects.push(object);
    }
    let started: Vec<Value> = objects
        .iter()
        .map(|o| kueue::as_started_in(o, &V6E_2X4.labels()))
        .collect();
    let pools = fleet::pools_for(&started, "pair-");
    fleet::provision(&plane.cluster, &pools).await?;
    let mut subs = Vec::new();
    for object in &objects {
        if let Some(sub) = create_queued(&mut f, plane, object).await? {
            subs.push(sub);
        }
    }
    if subs.len() != 3 {
        return Ok(f);
    }
    let first_two: Vec<(Submitted, u64)> = subs[..2].iter().map(|s| (s.clone(), 2)).collect();
    let (complete, _) = run::wait_bound(&plane.cluster, &first_two, BOUND).await?;
    f.check(complete, || {
        "the first two JobSets did not get their pods bound".to_string()
    });
    let third = &subs[2];
    let waiting = workload_when(&plane.cluster, third, BOUND, |w| {
        kueue::condition(w, "QuotaReserved")
            .is_some_and(|c| c["status"] == "False" && c["reason"] == "Pending")
    })
    .await?;
    let pending_message = waiting
        .as_ref()
        .and_then(|w| kueue::condition(w, "QuotaReserved"))
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string();
    f.check(waiting.is_some(), || {
        "pair-c: its Workload is not Pending".to_string()
    });
    f.check(
        pending_message.contains("insufficient unused quota for google.com/tpu"),
        || format!("pair-c: Pending because {pending_message:?}"),
    );
    let stored = plane
        .cluster
        .get(&third.created.body)
        .await?
        .unwrap_or_default();
    f.eq(
        &stored["spec"]["suspend"],
        &json!(true),
        "pair-c: suspended while it waits",
    );
    f.eq(
        run::pods_of(&plane.cluster, third).await?.len(),
        0,
        "pair-c: pods while it waits",
    );

    // The first finishes: its pods succeed, JobSet completes it, Kueue frees its quota.
    agent.succeed_jobset(namespace, "pair-a");
    let finished =
        workload_when(&plane.cluster, &subs[0], BOUND, |w| is_true(w, "Finished")).await?;
    f.check(finished.is_some(), || {
        "pair-a: its Workload did not finish".to_string()
    });
    let (complete, pods) = run::wait_bound(&plane.cluster, &[(third.clone(), 2)], BOUND).await?;
    let pods = pods.into_iter().next().unwrap_or_default();
    f.check(complete, || {
        format!(
            "pair-c: {} of 2 pods bound after pair-a finished",
            pods.len()
        )
    });
    let stored = plane
        .cluster
        .get(&third.created.body)
        .await?
        .unwrap_or_default();
    check_jobset_pods(&mut f, "JobSet kueue-pair/pair-c", &stored, &pods);
    check_exclusive_placement(
        &mut f,
        "JobSet kueue-pair/pair-c",
        &stored,
        &pods,
        &plane.cluster,
    )
    .await;
    let reviews = plane.reviews()?;
    let updates = kueue::unsuspending_reviews(&reviews, namespace, "pair-c");
    f.check(
        !updates.is_empty() && updates.iter().all(|u| u["allowed"] == json!(true)),
        || {
            format!(
                "pair-c: unsuspending UPDATEs {:?}",
                updates.iter().map(|u| &u["allowed"]).collect::<Vec<_>>()
            )
        },
    );
    eprintln!(
        "kueue: quota for two: pair-c Pending ({pending_message}), admitted once pair-a finished, {} pods bound",
        pods.len()
    );
    for sub in &subs {
        plane.cluster.delete(&object_named(sub)).await?;
    }
    fleet::remove(&plane.cluster, &pools).await?;
    Ok(f)
}

const TAS_ANNOTATION: &str = "kueue.x-k8s.io/podset-slice-required-topology";

/// Kueue's Topology Aware Scheduling places a queued two-slice JobSet: a flavour with a
/// Topology of node pools and hosts, each slice of 4 pods required in one node pool
/// (`podset-slice-required-topology`, `podset-slice-size`), no JobSet exclusive placement.
/// Kueue gates the pods, picks a host for each, and ungates them.
async fn topology_aware_scheduling(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let namespace = "kueue-tas";
    let flavour = &V6E_4X4;
    let cluster = &plane.cluster;
    cluster
        .apply(&kueue::topology(
            "tpu-pools",
            &[fleet::NODEPOOL, "kubernetes.io/hostname"],
        ))
        .await?;
    let mut rf = kueue::resource_flavor("tpu-v6e-4x4-tas", &flavour.labels());
    rf["spec"]["topologyName"] = json!("tpu-pools");
    // Kueue places pods before the API server gives them the TPU toleration: the flavour
    // brings it.
    rf["spec"]["tolerations"] = json!([{"key": TPU, "operator": "Exists", "effect": "NoSchedule"}]);
    cluster.apply(&rf).await?;
    cluster
        .apply(&kueue::tpu_cluster_queue(
            "tas",
            "tpu-v6e-4x4-tas",
            256,
            CPU_FLAVOUR,
        ))
        .await?;
    cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}))
        .await?;
    cluster
        .apply(&kueue::local_queue(namespace, QUEUE, "tas"))
        .await?;

    let mut object = fixture_jobset("test_data/jobsets/jobset-v6e-example.yaml", namespace)?;
    object["metadata"]["name"] = json!("v6e-tas");
    if let Some(a) = object["metadata"]["annotations"].as_object_mut() {
        a.remove("alpha.jobset.sigs.k8s.io/exclusive-topology");
    }
    object["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = json!({"annotations": {TAS_ANNOTATION: fleet::NODEPOOL, "kueue.x-k8s.io/podset-slice-size": "4"}});
    // Three node pools of 4 hosts for 2 slices: Kueue chooses.
    let mut pools = fleet::pools_for(
        std::slice::from_ref(&kueue::as_started_in(&object, &flavour.labels())),
        "tas-",
    );
    if let Some(extra) = pools.first().cloned() {
        let mut extra = extra;
        extra.name = "tas-spare".to_string();
        extra
            .labels
            .insert(fleet::NODEPOOL.to_string(), extra.name.clone());
        pools.push(extra);
    }
    fleet::provision(cluster, &pools).await?;
    let Some(sub) = create_queued(&mut f, plane, &object).await? else {
        return Ok(f);
    };
    let what = format!("JobSet {namespace}/{}", sub.name);
    let (complete, pods) = run::wait_bound(cluster, &[(sub.clone(), 8)], BOUND).await?;
    let pods = pods.into_iter().next().unwrap_or_default();
    let workload = kueue::workloads_of(cluster, &sub)
        .await?
        .into_iter()
        .next()
        .unwrap_or_default();
    f.check(complete, || {
        format!(
            "{what}: {} of 8 pods bound; Workload {:?}",
            pods.len(),
            kueue::conditions_text(&workload)
        )
    });
    let assignment = &workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"];
    f.check(!assignment.is_null(), || {
        format!("{what}: the Workload has no topology assignment")
    });
    // Each slice in one node pool, the two in different pools, every pod ungated and pinned.
    let nodes = fleet::nodes_by_name(cluster).await?;
    let mut pools_of_slice: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for p in &pods {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let node = p["spec"]["nodeName"].as_str().unwrap_or_default();
        let pool = nodes
            .get(node)
            .and_then(|n| n["metadata"]["labels"][fleet::NODEPOOL].as_str())
            .unwrap_or("?");
        let slice = p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"]
            .as_str()
            .unwrap_or("?");
        pools_of_slice
            .entry(slice.to_string())
            .or_default()
            .insert(pool.to_string());
        f.check(
            p["spec"]["schedulingGates"]
                .as_array()
                .is_none_or(|g| g.is_empty()),
            || format!("{what}: pod {name} is still gated"),
        );
        f.eq(
            p["spec"]["nodeSelector"]["kubernetes.io/hostname"].as_str(),
            Some(node),
            &format!("{what}: pod {name}: Kueue's hostname selector"),
        );
    }
    let distinct: std::collections::BTreeSet<&String> = pools_of_slice.values().flatten().collect();
    f.check(
        pools_of_slice.len() == 2
            && pools_of_slice.values().all(|p| p.len() == 1)
            && distinct.len() == 2,
        || format!("{what}: node pools by slice {pools_of_slice:?}"),
    );
    let stored = cluster.get(&sub.created.body).await?.unwrap_or_default();
    check_jobset_pods(&mut f, &what, &stored, &pods);
    check_nothing_lost_jobset(&mut f, &what, &object, &pods);
    eprintln!(
        "kueue: TAS: {what}: {} pods bound, node pools by slice {pools_of_slice:?}",
        pods.len()
    );
    cluster.delete(&object_named(&sub)).await?;
    fleet::remove(cluster, &pools).await?;
    Ok(f)
}

/// JobSet's own v6e example without its queue label, for a LocalQueue `default` to take.
fn unlabelled_v6e(namespace: &str, name: &str) -> anyhow::Result<Value> {
    let mut object = fixture_jobset("test_data/jobsets/jobset-v6e-example.yaml", namespace)?;
    object["metadata"]["name"] = json!(name);
    if let Some(labels) = object["metadata"]["labels"].as_object_mut() {
        labels.remove(kueue::QUEUE_LABEL);
    }
    Ok(object)
}

/// Kueue's LocalQueueDefaulting (always on since v0.17): in a namespace with a LocalQueue
/// `default`, Kueue's webhook gives a JobSet without a queue label that queue and suspends it,
/// after the mutating policy has run. The verdicts, given on the object as it will be stored,
/// wait for the unsuspend; Kueue skips the 2x4 flavour its narrowing rules out, admits it into
/// 4x4, and it runs with the env.
async fn default_queue_runs(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let object = unlabelled_v6e("kueue-default", "v6e-default")?;
    queued_jobset_runs(plane, &object, &V6E_4X4).await
}

/// What a namespaced AdmissionPolicy (examples/admission-policy.yaml, role `both`) sees at a
/// JobSet's CREATE. Its configuration, `namespaced-<namespace>-<name>`, sorts after JobSet's
/// (`jobset-…`) and Kueue's (`kueue-…`), and the API server calls mutating webhooks in the
/// order of their configurations' names: the policy sees JobSet's defaults and Kueue's queue
/// label and `suspend`. No cluster-wide policy judges the namespace (labelled `none`).
async fn namespaced_policy_sees(
    plane: &ControlPlane,
    installed: &policies::Installed,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let object = unlabelled_v6e(TRAINING, "v6e-namespaced")?;
    let mut order: Vec<String> = plane
        .cluster
        .list(
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            None,
            None,
        )
        .await?
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    order.sort();
    let position = |prefix: &str| order.iter().position(|n| n.starts_with(prefix));
    let ours = position(&installed.configuration);
    for other in ["jobset-", "kueue-"] {
        f.check(
            matches!((position(other), ours), (Some(o), Some(p)) if o < p),
            || {
                format!(
                    "{other}… does not sort before {}: {order:?}",
                    installed.configuration
                )
            },
        );
    }
    let sub = run::submit(&plane.cluster, std::slice::from_ref(&object))
        .await?
        .remove(0);
    let what = format!("JobSet {TRAINING}/{}", sub.name);
    f.check(sub.allowed(), || {
        format!("{what}: CREATE refused: {:?}", sub.created.message())
    });
    let reviews = plane.reviews()?;
    let created = reviews_of(&reviews, "JobSet", TRAINING, &sub.name);
    let policies_called: Vec<&Value> = created.iter().map(|r| &r["policy"]).collect();
    f.eq(
        policies_called,
        vec![&json!(installed.configuration)],
        &format!("{what}: the policies called at CREATE"),
    );
    let Some(review) = created.first() else {
        return Ok(f);
    };
    let seen = &review["object"];
    let rjob = &seen["spec"]["replicatedJobs"][0]["template"]["spec"];
    f.eq(
        &seen["spec"]["suspend"],
        &json!(true),
        &format!("{what}: spec.suspend as the policy saw it (Kueue's)"),
    );
    f.eq(
        kueue::queue_name(seen),
        Some(DEFAULT_QUEUE),
        &format!("{what}: queue label as the policy saw it (Kueue's)"),
    );
    f.eq(
        &rjob["completionMode"],
        &json!("Indexed"),
        &format!("{what}: completionMode as the policy saw it (JobSet's default)"),
    );
    f.eq(
        &review["allowed"],
        &json!(true),
        &format!("{what}: the policy's verdict"),
    );
    eprintln!(
        "kueue: namespaced AdmissionPolicy: mutating configurations in the order the API server calls them: {order:?}"
    );
    eprintln!(
        "kueue: namespaced AdmissionPolicy: {} (role both) saw at the CREATE of {what}: spec.suspend={}, labels={}, replicatedJobs[0] completionMode={} podReplacementPolicy={}, spec.network={}, spec.successPolicy={}, spec.startupPolicy={}; answered allowed={} with a patch of {} operations",
        installed.configuration,
        seen["spec"]["suspend"],
        seen["metadata"]["labels"],
        rjob["completionMode"],
        rjob["podReplacementPolicy"],
        seen["spec"]["network"],
        seen["spec"]["successPolicy"],
        seen["spec"]["startupPolicy"],
        review["allowed"],
        review["patch"].as_array().map_or(0, Vec::len),
    );
    if sub.allowed() {
        plane.cluster.delete(&object_named(&sub)).await?;
    }
    Ok(f)
}

/// An opted-in Indexed Job of 4 CPU pods in the queue of `cpu-two` (room for 2), with
/// Kueue's partial admission annotations.
fn partially_admissible_job(name: &str, annotations: &[(&str, &str)]) -> Value {
    let mut all = serde_json::Map::new();
    all.insert(
        "multislice.kubewarden.io/jax-distributed".to_string(),
        json!("true"),
    );
    for (k, v) in annotations {
        all.insert(k.to_string(), json!(v));
    }
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "kueue-j4",
                     "labels": {kueue::QUEUE_LABEL: QUEUE}, "annotations": all},
        "spec": {
            "completionMode": "Indexed", "parallelism": 4, "completions": 4, "backoffLimit": 0,
            "template": {"spec": {
                "subdomain": name, "restartPolicy": "Never",
                "containers": [{"name": "jax", "image": "python:3.12-slim",
                                "command": ["python3", "-c", "print('jax')"],
                                "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}],
            }},
        },
    })
}

/// J4 on the real Kueue: an opted-in Job that Kueue may admit partially
/// (`job-min-parallelism` below `parallelism`) would have its `parallelism` lowered at the
/// unsuspend, which JAX cannot run with: it is refused at CREATE. Where it is not (a module
/// without J4), what Kueue then does is reported.
async fn partial_admission_refused(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let namespace = "kueue-j4";
    let jobs = [
        partially_admissible_job("j4-min", &[("kueue.x-k8s.io/job-min-parallelism", "2")]),
        partially_admissible_job(
            "j4-equal",
            &[
                ("kueue.x-k8s.io/job-min-parallelism", "2"),
                ("kueue.x-k8s.io/job-completions-equal-parallelism", "true"),
            ],
        ),
    ];
    let prefix = format!(
        "admission webhook \"{}\" denied the request: [J4] ",
        plane.webhook_name
    );
    // One after the other: an accepted one holds the quota until it is deleted.
    for job in &jobs {
        let name = &job["metadata"]["name"];
        let service = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterIP": "None", "selector": {"batch.kubernetes.io/job-name": name}},
        });
        let subs = run::submit(&plane.cluster, &[service, job.clone()]).await?;
        let sub = &subs[1];
        let what = format!("Job {namespace}/{}", sub.name);
        let message = sub.created.message().unwrap_or_default().to_string();
        eprintln!(
            "kueue: J4: {what}: CREATE status {}: {message}",
            sub.created.status
        );
        f.check(!sub.allowed() && message.starts_with(&prefix), || {
            format!(
                "{what}: CREATE answered {} {message:?}, want a refusal starting {prefix:?}",
                sub.created.status
            )
        });
        if sub.allowed() {
            report_partial_admission(&mut f, plane, sub).await?;
        }
        for sub in subs.iter().filter(|s| s.allowed()) {
            plane.cluster.delete(&object_named(sub)).await?;
        }
        if sub.allowed() {
            // Its Workload goes with it (foreground deletion), and its quota with that.
            eventually(Duration::from_secs(60), || async {
                Ok(kueue::workloads_of(&plane.cluster, sub)
                    .await?
                    .is_empty()
                    .then_some(()))
            })
            .await?;
        }
    }
    Ok(f)
}

/// What Kueue does with an accepted, partially admissible Job: the count it admits, and our
/// verdicts on its unsuspending UPDATEs.
async fn report_partial_admission(
    f: &mut Failures,
    plane: &ControlPlane,
    sub: &Submitted,
) -> anyhow::Result<()> {
    let what = format!("Job {}/{}", sub.namespace, sub.name);
    let bound = Duration::from_secs(60);
    let workload = workload_when(&plane.cluster, sub, bound, |w| is_true(w, "QuotaReserved"))
        .await?
        .unwrap_or_default();
    let counts: Vec<&Value> = workload["status"]["admission"]["podSetAssignments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| &a["count"])
        .collect();
    let updates = eventually(bound, || async {
        let reviews = plane.reviews()?;
        let updates: Vec<Value> = reviews
            .into_iter()
            .filter(|r| {
                r["kind"] == "Job"
                    && r["operation"] == "UPDATE"
                    && r["namespace"] == json!(sub.namespace)
                    && r["name"] == json!(sub.name)
                    && r["oldObject"]["spec"]["suspend"] == json!(true)
                    && r["object"]["spec"]["suspend"] == json!(false)
            })
            .collect();
        Ok((!updates.is_empty()).then_some(updates))
    })
    .await?
    .unwrap_or_default();
    let stored = plane
        .cluster
        .get(&sub.created.body)
        .await?
        .unwrap_or_default();
    let verdicts: Vec<String> = updates
        .iter()
        .map(|u| {
            format!(
                "{} by {} (parallelism {} -> {}, completions {} -> {}): {}",
                if u["allowed"] == json!(true) {
                    "allowed"
                } else {
                    "refused"
                },
                u["policy"].as_str().unwrap_or_default(),
                u["oldObject"]["spec"]["parallelism"],
                u["object"]["spec"]["parallelism"],
                u["oldObject"]["spec"]["completions"],
                u["object"]["spec"]["completions"],
                u["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    let summary = format!(
        "{what}: accepted at CREATE; Kueue admitted pod counts {counts:?}; Workload {:?}; {} unsuspending UPDATE(s): {verdicts:?}; stored spec.suspend={} parallelism={}",
        kueue::conditions_text(&workload),
        updates.len(),
        stored["spec"]["suspend"],
        stored["spec"]["parallelism"],
    );
    eprintln!("kueue: J4: {summary}");
    f.0.push(summary);
    Ok(())
}

/// Every Kueue case, on a control plane with Kueue.
pub async fn cases(binaries: &Binaries, report: &mut Report) -> anyhow::Result<()> {
    let mut plane = ControlPlane::start(
        binaries,
        Options {
            kueue: true,
            ..Options::default()
        },
    )
    .await?;
    let agent = NodeAgent::start(plane.cluster.clone(), plane.remaining());
    set_up_queues(&plane.cluster).await?;
    let before = report.failed;
    report.record(
        "Kueue admits JobSet's own v6e example (no node selectors) into its flavour, and it runs",
        queued_fixture_runs(
            &plane,
            "test_data/jobsets/jobset-v6e-example.yaml",
            "kueue-v6e",
            &V6E_4X4,
        )
        .await,
    );
    report.record(
        "single policy (role both): Kueue admits xpk's v6e JobSet (its own selectors), and it runs",
        queued_fixture_runs(
            &plane,
            "test_data/jobsets/xpk-v6e-multislice.yaml",
            "kueue-xpk",
            &V6E_4X4,
        )
        .await,
    );
    report.record(
        "a flavour that does not fit is skipped by Kueue (the policy's required node affinity): the JobSet waits with Kueue's reason and Event, holds no quota, gets no UPDATE, and runs once 4x4 joins the queue",
        misfit_flavour_is_skipped(&plane).await,
    );
    report.record(
        "a queue of 2x4, then 4x4: Kueue skips the flavour that does not fit, admits JobSet's own v6e example into 4x4, and it runs",
        queued_fixture_runs(
            &plane,
            "test_data/jobsets/jobset-v6e-example.yaml",
            "kueue-skip",
            &V6E_4X4,
        )
        .await,
    );
    report.record(
        "single policy (role both): a queue of 2x4, then 4x4: Kueue admits JobSet's own v6e example into 4x4, and it runs",
        queued_fixture_runs(
            &plane,
            "test_data/jobsets/jobset-v6e-example.yaml",
            "kueue-skip-single",
            &V6E_4X4,
        )
        .await,
    );
    report.record(
        "a flavour that labels only the accelerator: Kueue admits JobSet's own v6e example, our UPDATE allows it, and the scheduler puts it on 4x4 nodes",
        fit::accelerator_only_flavour(&plane).await,
    );
    report.record(
        "G5: a queued slice group of two replicated jobs left with five shapes is refused at CREATE",
        fit::g5_refused_at_create(&plane).await,
    );
    report.record(
        "quota for two JobSets, three submitted: the third waits, then runs when the first finishes",
        third_waits_for_quota(&plane, &agent).await,
    );
    report.record(
        "Kueue's Topology Aware Scheduling places each slice of a queued JobSet in one node pool",
        topology_aware_scheduling(&plane).await,
    );
    report.record(
        "a LocalQueue `default` (into 2x4, then 4x4) queues JobSet's v6e example without its label: accepted, admitted into 4x4, and it runs",
        default_queue_runs(&plane).await,
    );
    let namespaced = plane
        .install_policy(policies::NAMESPACED_MANIFEST, &[])
        .await;
    report.record(
        "a namespaced AdmissionPolicy runs after JobSet's and Kueue's webhooks, and sees their defaults",
        match &namespaced {
            Ok(installed) => namespaced_policy_sees(&plane, installed).await,
            Err(e) => Err(anyhow::anyhow!("installing it: {e:#}")),
        },
    );
    report.record(
        "J4: an opted-in Job that Kueue could admit partially is refused at CREATE",
        partial_admission_refused(&plane).await,
    );
    if let Err(e) = plane.check_alive() {
        report.record("the Kueue control plane stayed up", Err(e));
    }
    if report.failed > before {
        plane.keep_logs();
    }
    Ok(())
}
