//! Which requests reach our webhook under the example manifests' `matchConditions`, with the
//! real API server as the judge: the objects a cluster holds (a plain pod, a pod with JobSet's
//! label, a pod with only the Job opt-in annotation, a JobSet and the Job and pods its
//! controllers make, an opted-in Job and its pod, a Job that did not opt in and its pod, and
//! UPDATEs that keep, drop or add the opt-in), sent to a namespace of the pair, one of the
//! single policy, and kube-system, which every manifest's namespaceSelector leaves out. The
//! review log must hold exactly the expected set of (kind, name, operation, policy): a set,
//! because the API server runs admission again when it retries an UPDATE that met a conflict
//! (the Job controller writes the Job's status meanwhile).
use crate::common::Failures;
use multislice_cluster::{policies, ControlPlane};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// A namespace of the pair, one of the single policy, and one no policy sees.
pub(crate) const PAIR: &str = "reach-pair";
pub(crate) const SINGLE: &str = "reach-single";
const SYSTEM: &str = "kube-system";

const OPT_IN: &str = "multislice.kubewarden.io/jax-distributed";
const JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";

/// One review as the log shows it: kind, name (the generateName of a pod a controller makes,
/// whose name the API server picks after the mutating webhooks), operation, policy.
type Reached = (String, String, String, String);
type ReachedSet = BTreeSet<Reached>;

fn pod(name: &str, labels: Value, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    })
}

fn job(name: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "completionMode": "Indexed", "completions": 1, "parallelism": 1,
            "backoffLimit": 0,
            "template": {"spec": {
                "subdomain": name, "restartPolicy": "Never",
                "containers": [{"name": "jax", "image": "busybox"}],
            }},
        },
    })
}

fn jobset(name: &str) -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {
            "parallelism": 1, "completions": 1,
            "template": {"spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "c", "image": "busybox"}]}},
        }}}]},
    })
}

fn in_namespace(mut object: Value, namespace: &str) -> Value {
    object["metadata"]["namespace"] = json!(namespace);
    object
}

/// Sends every object and UPDATE to `namespace`; returns the objects to delete afterwards.
async fn send(plane: &ControlPlane, namespace: &str) -> anyhow::Result<Vec<Value>> {
    let cluster = &plane.cluster;
    let objects = [
        pod("plain", json!({}), json!({})),
        pod("labelled", json!({JOBSET_NAME: "elsewhere"}), json!({})),
        pod("opt-in-annotation", json!({}), json!({OPT_IN: "true"})),
        jobset("js"),
        job("opted", json!({OPT_IN: "true"})),
        job("dropped", json!({OPT_IN: "true"})),
        job("not-opted", json!({})),
    ];
    let mut sent = Vec::new();
    for object in objects {
        let object = in_namespace(object, namespace);
        let created = cluster.create(&object, false).await?;
        if created.status >= 300 {
            anyhow::bail!(
                "{namespace}: {} {} refused: {:?}",
                object["kind"],
                object["metadata"]["name"],
                created.message()
            );
        }
        sent.push(object);
    }
    let named = |kind: &str, name: &str| {
        sent.iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .cloned()
            .unwrap_or_default()
    };
    // UPDATEs: a label on the JobSet and on an opted-in Job, the opt-in dropped from another,
    // and added to the Job that did not opt in.
    let label = json!({"metadata": {"labels": {"team": "ml"}}});
    cluster.patch_merge(&named("JobSet", "js"), &label).await?;
    cluster.patch_merge(&named("Job", "opted"), &label).await?;
    cluster
        .patch_merge(
            &named("Job", "dropped"),
            &json!({"metadata": {"annotations": {OPT_IN: null}}}),
        )
        .await?;
    cluster
        .patch_merge(
            &named("Job", "not-opted"),
            &json!({"metadata": {"annotations": {OPT_IN: "true"}}}),
        )
        .await?;
    Ok(sent)
}

/// What must reach the webhook from [`send`] in a namespace of `deployment`.
fn expected(deployment: &str) -> ReachedSet {
    let mutate = "clusterwide-jobset-multislice-mutate";
    let validate = "clusterwide-jobset-multislice-validate";
    let single = "clusterwide-jobset-multislice";
    let one = |kind: &str, name: &str, operation: &str, policy: &str| -> Reached {
        (kind.into(), name.into(), operation.into(), policy.into())
    };
    let at_create = |kind: &str, name: &str| -> Vec<Reached> {
        match deployment {
            "pair" => vec![
                one(kind, name, "CREATE", mutate),
                one(kind, name, "CREATE", validate),
            ],
            _ => vec![one(kind, name, "CREATE", single)],
        }
    };
    let pod_create = |name: &str| -> Vec<Reached> {
        let policy = if deployment == "pair" { mutate } else { single };
        vec![one("Pod", name, "CREATE", policy)]
    };
    let update = |kind: &str, name: &str| -> Vec<Reached> {
        let policy = if deployment == "pair" {
            validate
        } else {
            single
        };
        vec![one(kind, name, "UPDATE", policy)]
    };
    [
        // A pod with JobSet's label, whoever made it; a plain pod and one with only the Job's
        // opt-in annotation never reach the policy.
        pod_create("labelled"),
        // The JobSet, at CREATE and at its UPDATE; its child Job (JobSet's label) does not
        // reach, its pod (JobSet's label) does.
        at_create("JobSet", "js"),
        update("JobSet", "js"),
        pod_create("js-w-0-0-"),
        // The opted-in Jobs and their pods (the facts annotation), and their UPDATEs: a label,
        // and one that drops the opt-in (the old object opted in).
        at_create("Job", "opted"),
        pod_create("opted-0-"),
        update("Job", "opted"),
        at_create("Job", "dropped"),
        pod_create("dropped-0-"),
        update("Job", "dropped"),
        // A Job that did not opt in, and its pod, never reach; the UPDATE that opts it in does.
        update("Job", "not-opted"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn reached(reviews: &[Value], namespace: &str) -> ReachedSet {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    reviews
        .iter()
        .filter(|r| r["namespace"] == namespace)
        .map(|r| {
            let meta = &r["object"]["metadata"];
            let name = match text(&r["name"]) {
                n if !n.is_empty() => n,
                // A pod a controller makes: no name before the mutating webhooks.
                _ => text(&meta["name"]).max(text(&meta["generateName"])),
            };
            (
                text(&r["kind"]),
                name,
                text(&r["operation"]),
                text(&r["policy"]),
            )
        })
        .collect()
}

/// The pods the controllers make from [`send`]: the JobSet's and each Job's, in every
/// namespace, once they exist (their CREATEs have reached the webhook by then).
async fn wait_for_pods(plane: &ControlPlane) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut made = 0;
        for namespace in [PAIR, SINGLE, SYSTEM] {
            made += plane
                .cluster
                .list(
                    "v1",
                    "Pod",
                    Some(namespace),
                    Some("batch.kubernetes.io/job-name"),
                )
                .await?
                .len();
        }
        // js-w-0, opted, dropped and not-opted in each of the three namespaces.
        if made >= 12 || Instant::now() > deadline {
            // Whatever else the controllers send, within a moment.
            tokio::time::sleep(Duration::from_secs(3)).await;
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

pub(crate) async fn requests_that_reach(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let mut sent = Vec::new();
    for namespace in [PAIR, SINGLE, SYSTEM] {
        sent.extend(send(plane, namespace).await?);
    }
    wait_for_pods(plane).await?;
    let reviews = plane.reviews()?;
    for (namespace, deployment) in [(PAIR, "pair"), (SINGLE, "single")] {
        let got = reached(&reviews, namespace);
        eprintln!("match conditions: {namespace}: {} reviews", got.len());
        f.eq(got, expected(deployment), &format!("{namespace}: reviews"));
    }
    f.eq(
        reached(&reviews, SYSTEM),
        BTreeSet::new(),
        "kube-system: reviews",
    );
    for object in &sent {
        plane.cluster.delete(object).await?;
    }
    Ok(f)
}

/// The namespaces, labelled long before the case submits.
pub(crate) async fn namespaces(plane: &ControlPlane) -> anyhow::Result<()> {
    policies::namespace(&plane.cluster, PAIR, None).await?;
    policies::namespace(&plane.cluster, SINGLE, Some(policies::SINGLE)).await
}
