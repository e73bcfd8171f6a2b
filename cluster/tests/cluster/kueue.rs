//! SPEC §5 for real: queued JobSets admitted by a real Kueue (its webhooks, its JobSet
//! integration, its scheduler), on a control plane of their own. Kueue suspends what carries
//! the queue label, reserves quota in a flavour, then unsuspends it with the flavour's node
//! selectors; that UPDATE goes through our webhook, and the pods the real controllers then
//! make are checked as in every other shape.
mod fit;
mod namespaced;
mod quota;
mod runs;
mod topology;

use crate::Report;
use fit::misfit_flavour_is_skipped;
use multislice_cluster::agent::NodeAgent;
use multislice_cluster::fleet::TPU;
use multislice_cluster::kueue::{self, DEFAULT_QUEUE};
use multislice_cluster::policies;
use multislice_cluster::run::Submitted;
use multislice_cluster::{Binaries, Cluster, ControlPlane, Options};
use namespaced::namespaced_policy_sees;
use quota::{partial_admission_refused, third_waits_for_quota};
use runs::{default_queue_runs, queued_fixture_runs};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use topology::topology_aware_scheduling;

/// How long Kueue may take to admit a workload, or the controllers to make its pods.
pub(crate) const BOUND: Duration = Duration::from_secs(180);

/// The policy's annotation on each pod template (SPEC §4.4).
pub(crate) const FACTS: &str = "multislice.kubewarden.io/facts";

/// A TPU flavour: the node labels of one node-pool shape (v6e: 4 chips per host).
pub(crate) struct Flavour {
    name: &'static str,
    accelerator: &'static str,
    topology: &'static str,
}

impl Flavour {
    fn labels(&self) -> BTreeMap<String, String> {
        kueue::tpu_node_labels(self.accelerator, self.topology)
    }
}

pub(crate) const V6E_4X4: Flavour = Flavour {
    name: "tpu-v6e-4x4",
    accelerator: "tpu-v6e-slice",
    topology: "4x4",
};

/// Two hosts: the wrong shape for a JobSet whose slices have four.
pub(crate) const V6E_2X4: Flavour = Flavour {
    name: "tpu-v6e-2x4",
    accelerator: "tpu-v6e-slice",
    topology: "2x4",
};

/// Drivers and other CPU pods: any node (the taints keep them off accelerator hosts).
pub(crate) const CPU_FLAVOUR: &str = "cpu";

/// The ClusterQueues, each behind a LocalQueue of the name the fixtures use
/// (`multislice-queue`) in namespaces of its own.
pub(crate) const QUEUE: &str = "multislice-queue";

/// The namespace of examples/admission-policy.yaml.
pub(crate) const TRAINING: &str = "training";

/// Flavours, ClusterQueues and LocalQueues: `tpu` (4x4, room for anything here), `misfit`
/// (only 2x4), `skip` (2x4, then 4x4), `pair` (2x4 quota for two single-slice JobSets), and
/// `cpu-two` (CPU for two pods of one core). Each namespace is labelled for the deployment that judges it (the pair
/// where there is no label; policies.rs), once, long before its case submits anything.
pub(crate) async fn set_up_queues(cluster: &Cluster) -> anyhow::Result<()> {
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
pub(crate) async fn eventually<T, F, Fut>(
    bound: Duration,
    mut probe: F,
) -> anyhow::Result<Option<T>>
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
pub(crate) async fn workload_when(
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
pub(crate) fn tpu_flavours(workload: &Value) -> Vec<String> {
    workload["status"]["admission"]["podSetAssignments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["flavors"][TPU].as_str().map(str::to_string))
        .collect()
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
