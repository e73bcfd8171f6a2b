//! JobSet's node-selector strategy of exclusive placement on the fake fleet. With
//! `alpha.jobset.sigs.k8s.io/node-selector` beside an exclusive-topology key, the JobSet
//! controller gives each Job's pods the nodeSelector `alpha.jobset.sigs.k8s.io/namespaced-job:
//! <namespace>_<job>` and a toleration of `alpha.jobset.sigs.k8s.io/no-schedule`, and leaves
//! the node pools to the user: one pool per Job, labelled and tainted so (JobSet's
//! hack/label_nodes). The fleet does that, and the pods bind, each Job on its own pool.
use crate::common::Failures;
use crate::pods::check_jobset_pods;
use crate::shapes::object_named;
use multislice_cluster::fleet::{self, NAMESPACED_JOB, NO_SCHEDULE};
use multislice_cluster::{policies, run, ControlPlane};
use multislice_host::env::resolve;
use multislice_host::fixtures::load_yaml;
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// The namespace of the case, judged by the pair.
pub(crate) const NAMESPACE: &str = "node-selector";
/// A JobSet-level key and flag, with the key repeated on one replicated job (pool-b): both
/// Jobs end up with the key and the flag, so both take the strategy.
const FIXTURE: &str = "test_data/rules/x2-pass-repeated-key.yaml";
const JOBSET: &str = "x2-pass-repeated-key";

pub(crate) async fn node_selector_strategy(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let mut object = load_yaml(&workspace_root().join(FIXTURE))?;
    object["metadata"]["namespace"] = json!(NAMESPACE);
    let pools = fleet::pools_for(std::slice::from_ref(&object), "nss-");
    fleet::provision(&plane.cluster, &pools).await?;
    let sub = run::submit(&plane.cluster, &[object]).await?.remove(0);
    f.check(sub.allowed(), || {
        format!("refused: {:?}", sub.created.message())
    });
    let (complete, pods) = run::wait_bound(
        &plane.cluster,
        &[(sub.clone(), 4)],
        Duration::from_secs(120),
    )
    .await?;
    let pods = pods.into_iter().next().unwrap_or_default();
    let nodes = fleet::nodes_by_name(&plane.cluster).await?;
    let toleration = json!({"key": NO_SCHEDULE, "operator": "Exists", "effect": "NoSchedule"});
    let mut placed = BTreeMap::new();
    let mut env = BTreeMap::new();
    for p in &pods {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let job = format!(
            "{JOBSET}-{}-{}",
            p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]
                .as_str()
                .unwrap_or_default(),
            p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"]
                .as_str()
                .unwrap_or_default()
        );
        let namespaced_job = format!("{NAMESPACE}_{job}");
        f.eq(
            p["spec"]["nodeSelector"][NAMESPACED_JOB].clone(),
            json!(namespaced_job),
            &format!("{name}: nodeSelector {NAMESPACED_JOB}"),
        );
        let tolerations = p["spec"]["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        f.check(tolerations.contains(&toleration), || {
            format!("{name}: no toleration of {NO_SCHEDULE}: {tolerations:?}")
        });
        let node = p["spec"]["nodeName"].as_str().unwrap_or_default();
        let node_job = nodes
            .get(node)
            .map(|n| n["metadata"]["labels"][NAMESPACED_JOB].clone());
        placed.insert(name.to_string(), (job.clone(), node_job));
        for c in p["spec"]["containers"].as_array().into_iter().flatten() {
            let resolved: BTreeMap<String, String> = resolve(p, c)?.into_iter().collect();
            env.insert(
                format!("{name}/{}", c["name"].as_str().unwrap_or_default()),
                resolved,
            );
        }
    }
    f.check(complete, || {
        let why: Vec<String> = pods
            .iter()
            .filter(|p| !p["spec"]["nodeName"].is_string())
            .map(|p| {
                let condition = p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["type"] == "PodScheduled")
                    .and_then(|c| c["message"].as_str())
                    .unwrap_or("no scheduling condition yet");
                format!("{}: {condition}", p["metadata"]["name"])
            })
            .collect();
        format!("{} pods, not all 4 bound: {why:?}", pods.len())
    });
    // Each pod on a node of its own Job's pool: the node's label is the pod's Job.
    let want: BTreeMap<String, (String, Option<Value>)> = ["pool-a", "pool-b"]
        .iter()
        .flat_map(|rjob| {
            (0..2).map(move |i| {
                let job = format!("{JOBSET}-{rjob}-0");
                (
                    format!("{job}-{i}"),
                    (job.clone(), Some(json!(format!("{NAMESPACE}_{job}")))),
                )
            })
        })
        .collect();
    let got: BTreeMap<String, (String, Option<Value>)> = placed
        .into_iter()
        .map(|(pod, v)| {
            // Pod names end in a random suffix: `<job>-<index>-<random>`.
            let stable = pod
                .rsplit_once('-')
                .map_or(pod.as_str(), |(s, _)| s)
                .to_string();
            (stable, v)
        })
        .collect();
    f.eq(
        got,
        want,
        "each pod's Job, and the namespaced-job label of its node",
    );
    // The env the pair gave them: one slice group of two slices, coordinated by pool-a's pod 0.
    let coordinator = format!("{JOBSET}-pool-a-0-0.{JOBSET}");
    let want_env: BTreeMap<String, BTreeMap<String, String>> = ["pool-a", "pool-b"]
        .iter()
        .enumerate()
        .flat_map(|(slice, rjob)| {
            let coordinator = coordinator.clone();
            (0..2).map(move |i| {
                let vars = [
                    // The Job controller's, for an Indexed Job.
                    ("JOB_COMPLETION_INDEX", i.to_string()),
                    ("MEGASCALE_COORDINATOR_ADDRESS", coordinator.clone()),
                    ("MEGASCALE_NUM_SLICES", "2".to_string()),
                    ("MEGASCALE_SLICE_ID", slice.to_string()),
                ];
                (
                    format!("{JOBSET}-{rjob}-0-{i}/jax"),
                    vars.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                )
            })
        })
        .collect();
    let got_env: BTreeMap<String, BTreeMap<String, String>> = env
        .into_iter()
        .map(|(key, vars)| {
            let (pod, container) = key.split_once('/').unwrap_or((&key, ""));
            let stable = pod.rsplit_once('-').map_or(pod, |(s, _)| s);
            (format!("{stable}/{container}"), vars)
        })
        .collect();
    f.eq(got_env, want_env, "every container's env, resolved");
    let stored = plane
        .cluster
        .get(&sub.created.body)
        .await?
        .unwrap_or_default();
    check_jobset_pods(&mut f, "node-selector strategy", &stored, &pods);
    eprintln!(
        "node-selector strategy: {} pods, {} bound",
        pods.len(),
        pods.iter()
            .filter(|p| p["spec"]["nodeName"].is_string())
            .count()
    );
    plane.cluster.delete(&object_named(&sub)).await?;
    fleet::remove(&plane.cluster, &pools).await?;
    Ok(f)
}

/// The namespace, labelled for the pair long before the case submits.
pub(crate) async fn namespace(plane: &ControlPlane) -> anyhow::Result<()> {
    policies::namespace(&plane.cluster, NAMESPACE, None).await
}
