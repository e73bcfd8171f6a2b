//! What the Kueue cases share: the flavours, queues and namespaces set up once, and the waits
//! on Kueue's Workloads. It imports no case file.
use crate::common::Failures;
use multislice_cluster::fleet::TPU;
use multislice_cluster::kueue::{self, DEFAULT_QUEUE};
use multislice_cluster::policies;
use multislice_cluster::run::{self, Submitted};
use multislice_cluster::{Cluster, ControlPlane};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long Kueue may take to admit a workload, or the controllers to make its pods.
pub(crate) const BOUND: Duration = Duration::from_secs(180);

/// The policy's annotation on each pod template (docs/contributing/spec.md §4.4).
pub(crate) const FACTS: &str = "multislice.kubewarden.io/facts";

/// A TPU flavour: the node labels of one node-pool shape (v6e: 4 chips per host).
pub(crate) struct Flavour {
    pub(crate) name: &'static str,
    pub(crate) accelerator: &'static str,
    pub(crate) topology: &'static str,
}

impl Flavour {
    pub(crate) fn labels(&self) -> BTreeMap<String, String> {
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

/// A flavour that labels only the accelerator, as xpk's autoprovisioning flavours do (fit.rs).
pub const V6E_ANY: &str = "tpu-v6e-any";

/// Drivers and other CPU pods: any node (the taints keep them off accelerator hosts).
pub(crate) const CPU_FLAVOUR: &str = "cpu";

/// The ClusterQueues, each behind a LocalQueue of the name the fixtures use
/// (`multislice-queue`) in namespaces of its own.
pub(crate) const QUEUE: &str = "multislice-queue";

/// The namespace of examples/namespaced/admission-policy.yaml.
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
            V6E_ANY,
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
            &[(V6E_ANY, 256)],
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

/// A JobSet that no flavour of its queue fits, once Kueue has tried: its Workload pending
/// because `flavour` does not match its node affinity, neither quota reserved nor admitted,
/// and the JobSet still suspended, without pods. Returns the Workload's conditions and the
/// stored JobSet, for what each case checks beyond.
pub(crate) async fn check_waits_unfit(
    f: &mut Failures,
    plane: &ControlPlane,
    sub: &Submitted,
    what: &str,
    flavour: &Flavour,
) -> anyhow::Result<(Vec<String>, Value)> {
    let reason = format!("flavor {} doesn't match node affinity", flavour.name);
    let pending = workload_when(&plane.cluster, sub, BOUND, |w| {
        kueue::condition(w, "QuotaReserved").is_some_and(|c| {
            c["status"] == "False"
                && c["reason"] == "Pending"
                && c["message"].as_str().is_some_and(|m| m.contains(&reason))
        })
    })
    .await?;
    let workload = match pending {
        Some(w) => w,
        None => kueue::workloads_of(&plane.cluster, sub)
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
        f.check(!kueue::is_true(&workload, kind), || {
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
        run::pods_of(&plane.cluster, sub).await?.len(),
        0,
        &format!("{what}: pods"),
    );
    Ok((conditions, stored))
}
