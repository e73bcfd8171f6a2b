//! A queued JobSet from CREATE to its running pods, each step asserted: by its own queue label,
//! or by a namespace's default LocalQueue.
use super::shared::{tpu_flavours, workload_when, Flavour, BOUND, FACTS, V6E_4X4};
use crate::common::Failures;
use crate::fixtures::shape;
use crate::placement::{check_exclusive_placement, check_nothing_lost_jobset};
use crate::pods::check_jobset_pods;
use crate::shapes::{check_warnings_reached, object_named, reviews_of};
use multislice_cluster::fleet::{self};
use multislice_cluster::kueue::{self, is_true, DEFAULT_QUEUE};
use multislice_cluster::run::{self, Submitted};
use multislice_cluster::ControlPlane;
use multislice_gen::oracle;
use multislice_host::workspace_root;
use serde_json::{json, Value};

/// CREATE, as a user submits a queued JobSet: our webhook accepts it and stamps its facts on
/// each pod template, its warnings reach the client, and Kueue's webhook suspends it.
pub(crate) async fn create_queued(
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
pub(crate) async fn queued_fixture_runs(
    plane: &ControlPlane,
    file: &str,
    namespace: &str,
    flavour: &Flavour,
) -> anyhow::Result<Failures> {
    queued_jobset_runs(plane, &fixture_jobset(file, namespace)?, flavour).await
}

/// One queued JobSet from CREATE to its running pods, each step asserted.
pub(crate) async fn queued_jobset_runs(
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

    // The real pods: the flavour's selectors, the env of docs/contributing/spec.md §4, one slice per node pool.
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
pub(crate) fn fixture_jobset(file: &str, namespace: &str) -> anyhow::Result<Value> {
    let shape = shape(file, &workspace_root().join(file), 0)?;
    let mut object = shape
        .objects
        .into_iter()
        .find(|o| o["kind"] == "JobSet")
        .ok_or_else(|| anyhow::anyhow!("{file} has no JobSet"))?;
    object["metadata"]["namespace"] = json!(namespace);
    Ok(object)
}

/// JobSet's own v6e example without its queue label, for a LocalQueue `default` to take.
pub(crate) fn unlabelled_v6e(namespace: &str, name: &str) -> anyhow::Result<Value> {
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
pub(crate) async fn default_queue_runs(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let object = unlabelled_v6e("kueue-default", "v6e-default")?;
    queued_jobset_runs(plane, &object, &V6E_4X4).await
}
