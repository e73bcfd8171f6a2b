//! Kueue's quota: a JobSet that waits for room, and J4 on a Job Kueue could admit partially.
use super::runs::{create_queued, fixture_jobset};
use super::shared::{eventually, workload_when, BOUND, QUEUE, V6E_2X4};
use crate::common::Failures;
use crate::placement::check_exclusive_placement;
use crate::pods::check_jobset_pods;
use crate::shapes::object_named;
use multislice_cluster::agent::NodeAgent;
use multislice_cluster::fleet::{self};
use multislice_cluster::kueue::{self, is_true};
use multislice_cluster::run::{self, Submitted};
use multislice_cluster::ControlPlane;
use serde_json::{json, Value};
use std::time::Duration;

/// Quota for two single-slice JobSets, three submitted: the third waits in the queue until the
/// first finishes, then runs with the right env.
pub(crate) async fn third_waits_for_quota(
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

/// An opted-in Indexed Job of 4 CPU pods in the queue of `cpu-two` (room for 2), with
/// Kueue's partial admission annotations.
pub(crate) fn partially_admissible_job(name: &str, annotations: &[(&str, &str)]) -> Value {
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
pub(crate) async fn partial_admission_refused(plane: &ControlPlane) -> anyhow::Result<Failures> {
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
pub(crate) async fn report_partial_admission(
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
