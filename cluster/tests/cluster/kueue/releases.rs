//! Facts across releases (issue 51), on the real control plane: a JobSet stamped by one release
//! of the policy waits in a held Kueue queue while the host switches to another release (an
//! operator's upgrade or rollback: `module:` changed and applied), and its pods are admitted by
//! that other release when Kueue lets it run.
//!
//! - Upgrade: stamped by the module of c27f4e8 (built by `make cluster-test` in a worktree,
//!   `CLUSTER_OLD_MODULE`), run under this release: every pod gets the env that c27f4e8 would
//!   have given it.
//! - Rollback: stamped by this release, run under c27f4e8: every pod is created, with the env
//!   this release gives it.
//!
//! "Would have given": each pod as the API server sent it to our webhook (the host's review
//! log), admitted by the other module in this process, its env resolved as the kubelet will.
use super::runs::{create_queued, fixture_jobset};
use super::shared::{workload_when, BOUND, QUEUE, V6E_4X4};
use crate::common::Failures;
use crate::shapes::object_named;
use multislice_cluster::fleet;
use multislice_cluster::kueue::{self, is_true};
use multislice_cluster::{policies, run, ControlPlane};
use multislice_host::env::resolve;
use multislice_host::request::{admission_request, Kind};
use multislice_host::{default_wasm_path, Policy};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The module of c27f4e8, the release before facts were read tolerantly.
pub(crate) fn old_module() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("CLUSTER_OLD_MODULE")
        .map(PathBuf::from)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "CLUSTER_OLD_MODULE is not set (make cluster-test builds c27f4e8's module)"
            )
        })?;
    anyhow::ensure!(path.is_file(), "{} does not exist", path.display());
    Ok(path)
}

/// Which release stamps the JobSet, and which admits its pods.
pub(crate) struct Releases {
    pub(crate) namespace: &'static str,
    pub(crate) stamps: PathBuf,
    pub(crate) admits: PathBuf,
}

/// The namespaces, their LocalQueues and the ClusterQueue each points at, set up long before.
pub(crate) async fn set_up(plane: &ControlPlane, namespaces: &[&str]) -> anyhow::Result<()> {
    for namespace in namespaces {
        let held = held_queue(namespace);
        plane
            .cluster
            .apply(&kueue::tpu_cluster_queue(
                &held,
                V6E_4X4.name,
                256,
                super::shared::CPU_FLAVOUR,
            ))
            .await?;
        policies::namespace(&plane.cluster, namespace, None).await?;
        plane
            .cluster
            .apply(&kueue::local_queue(namespace, QUEUE, &held))
            .await?;
        kueue::wait_local_queue_active(&plane.cluster, namespace, QUEUE).await?;
    }
    Ok(())
}

fn held_queue(namespace: &str) -> String {
    format!("{namespace}-held")
}

async fn stop_policy(plane: &ControlPlane, namespace: &str, policy: &str) -> anyhow::Result<()> {
    let queue = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                       "metadata": {"name": held_queue(namespace)}});
    plane
        .cluster
        .patch_merge(&queue, &json!({"spec": {"stopPolicy": policy}}))
        .await
}

/// The case; the host serves this release again at the end, whatever happened.
pub(crate) async fn across_releases(
    plane: &mut ControlPlane,
    releases: &Releases,
) -> anyhow::Result<Failures> {
    let outcome = run_across(plane, releases).await;
    plane.swap_module(&default_wasm_path()).await?;
    outcome
}

async fn run_across(plane: &mut ControlPlane, r: &Releases) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let object = fixture_jobset("test_data/jobsets/jobset-v6e-example.yaml", r.namespace)?;
    let started = kueue::as_started_in(&object, &V6E_4X4.labels());
    let pools = fleet::pools_for(std::slice::from_ref(&started), &format!("{}-", r.namespace));
    fleet::provision(&plane.cluster, &pools).await?;

    stop_policy(plane, r.namespace, "Hold").await?;
    plane.swap_module(&r.stamps).await?;
    let Some(sub) = create_queued(&mut f, plane, &object).await? else {
        return Ok(f);
    };
    let what = format!("JobSet {}/{}", r.namespace, sub.name);
    // Held: Kueue admits nothing while the host changes release.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let admitted = kueue::workloads_of(&plane.cluster, &sub)
        .await?
        .iter()
        .any(|w| is_true(w, "Admitted"));
    f.check(!admitted, || {
        format!("{what}: admitted while its queue was held")
    });
    plane.swap_module(&r.admits).await?;
    stop_policy(plane, r.namespace, "None").await?;

    if workload_when(&plane.cluster, &sub, BOUND, |w| is_true(w, "Admitted"))
        .await?
        .is_none()
    {
        f.0.push(format!(
            "{what}: not admitted within {BOUND:?} once released"
        ));
        return Ok(f);
    }
    let expected = run::expected_pods(&object);
    let (complete, pods) =
        run::wait_bound(&plane.cluster, &[(sub.clone(), expected)], BOUND).await?;
    let pods = pods.into_iter().next().unwrap_or_default();
    f.check(complete, || {
        format!("{what}: {} of {expected} pods bound", pods.len())
    });
    compare_with(&mut f, plane, &what, r.namespace, &pods, &r.stamps).await?;
    eprintln!(
        "releases: {what}: stamped by {}, its {} pods admitted by {}",
        r.stamps.display(),
        pods.len(),
        r.admits.display()
    );
    plane.cluster.delete(&object_named(&sub)).await?;
    fleet::remove(&plane.cluster, &pools).await?;
    Ok(f)
}

/// Each real pod's env, container by container, against what `module` (the release that
/// stamped the facts) makes of the pod as our webhook received it.
async fn compare_with(
    f: &mut Failures,
    plane: &ControlPlane,
    what: &str,
    namespace: &str,
    pods: &[Value],
    module: &Path,
) -> anyhow::Result<()> {
    let policy = Policy::load(module)?;
    let settings = plane
        .installed
        .iter()
        .find(|i| i.mutating && i.manifest == policies::PAIR_MANIFESTS[0])
        .map(|i| i.settings.clone())
        .unwrap_or(json!({"role": "mutate"}));
    let received: BTreeMap<String, Value> = plane
        .reviews()?
        .into_iter()
        .filter(|r| r["kind"] == "Pod" && r["operation"] == "CREATE" && r["namespace"] == namespace)
        .filter_map(|r| {
            let host = r["object"]["spec"]["hostname"].as_str()?.to_string();
            Some((host, r["object"].clone()))
        })
        .collect();
    for pod in pods {
        let host = pod["spec"]["hostname"].as_str().unwrap_or_default();
        let Some(sent) = received.get(host) else {
            f.0.push(format!("{what}: our webhook never received pod {host}"));
            continue;
        };
        let request = admission_request(Kind::Pod, "CREATE", sent, None);
        let outcome = policy.validate(&request, &settings)?;
        let would = outcome.mutated_object.unwrap_or(sent.clone());
        for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
            let name = &c["name"];
            let Some(theirs) = would["spec"]["containers"]
                .as_array()
                .and_then(|cs| cs.iter().find(|x| &x["name"] == name))
            else {
                f.0.push(format!(
                    "{what}: {host}: no container {name} in {}",
                    module.display()
                ));
                continue;
            };
            f.eq(
                resolve(pod, c)?,
                resolve(&would, theirs)?,
                &format!(
                    "{what}: {host} container {name}: env, real vs {}",
                    module.display()
                ),
            );
        }
    }
    Ok(())
}
