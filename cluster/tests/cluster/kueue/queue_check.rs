//! The queue check (setting `queueCheck`, issue 28) on the real control plane: the validating
//! half of the pair from examples/queue-check/, its
//! `get_resource` calls answered by the real API server (context_aware.rs), judges a TPU
//! JobSet at `kubectl apply` against its real Kueue queue. Under `refuse`, a JobSet whose queue
//! has only a flavour it does not fit is refused with Q1, and the same JobSet runs from a queue
//! whose flavour fits; under `warn`, the misfit one is accepted with the same text as a warning
//! and waits as a pending Workload.
//!
//! Each of its namespaces is labelled `none` (no policy of the control plane judges it) and
//! gets a pair of its own: a copy of the mutating policy, and a copy of the queue-check
//! validating policy under `refuse` or `warn`, scoped by namespace name (as shapes.rs does).
use super::runs::{create_queued, fixture_jobset, queued_jobset_runs};
use super::shared::{check_waits_unfit, CPU_FLAVOUR, V6E_2X4, V6E_4X4};
use crate::common::Failures;
use crate::shapes::{check_warnings_reached, object_named, reviews_of};
use multislice_cluster::kueue;
use multislice_cluster::policies::{self, Installed, Variant};
use multislice_cluster::run;
use multislice_cluster::ControlPlane;
use serde_json::{json, Value};
use std::time::Duration;

/// The offline cases' JobSet (test_data/e2e/cases.json `queue-*`): 2 slices of 4 hosts with 4
/// v6e chips each, only the accelerator pinned; it fits tpu-v6e-slice 4x4 alone.
const FIXTURE: &str = "test_data/queue/jobset.yaml";
/// The LocalQueue it names.
const LOCAL_QUEUE: &str = "tpu-queue";

/// Under `refuse`: a queue of 2x4 only, and a queue of 4x4.
const REFUSED: &str = "queue-check-refuse";
/// Under `refuse`: a queue whose 4x4 flavour's Topology has no block level, for the JobSet of
/// test_data/queue/jobset-tas.yaml, which requires the block.
const TAS_REFUSED: &str = "queue-check-tas";
const TAS_FIXTURE: &str = "test_data/queue/jobset-tas.yaml";
const ONLY_POOLS: &str = "queue-check-pools";
const POOLS_FLAVOUR: &str = "tpu-v6e-4x4-pools";
const POOLS_TOPOLOGY: &str = "tpu-pools-no-block";
const FITS: &str = "queue-check-fits";
/// Under `warn`: a queue of 2x4 only.
const WARNED: &str = "queue-check-warn";
/// ClusterQueues of their own: the case of fit.rs adds 4x4 to `misfit`.
const ONLY_2X4: &str = "queue-check-2x4";
const ONLY_4X4: &str = "queue-check-4x4";

/// The queue-check policies, installed by [`set_up`].
pub(crate) struct QueueCheck {
    refuse: Installed,
    warn: Installed,
}

/// The ClusterQueues, the namespaces with their LocalQueues, and the policies that judge them.
pub(crate) async fn set_up(plane: &mut ControlPlane) -> anyhow::Result<QueueCheck> {
    let cluster = plane.cluster.clone();
    for (queue, flavour) in [(ONLY_2X4, &V6E_2X4), (ONLY_4X4, &V6E_4X4)] {
        cluster
            .apply(&kueue::tpu_cluster_queue(
                queue,
                flavour.name,
                256,
                CPU_FLAVOUR,
            ))
            .await?;
    }
    // A Topology of node pools and hosts, without the block; the flavour places by it.
    cluster
        .apply(&kueue::topology(
            POOLS_TOPOLOGY,
            &[
                multislice_cluster::fleet::NODEPOOL,
                "kubernetes.io/hostname",
            ],
        ))
        .await?;
    let mut rf = kueue::resource_flavor(POOLS_FLAVOUR, &V6E_4X4.labels());
    rf["spec"]["topologyName"] = json!(POOLS_TOPOLOGY);
    cluster.apply(&rf).await?;
    cluster
        .apply(&kueue::tpu_cluster_queue(
            ONLY_POOLS,
            POOLS_FLAVOUR,
            256,
            CPU_FLAVOUR,
        ))
        .await?;
    for (namespace, queue) in [
        (REFUSED, ONLY_2X4),
        (FITS, ONLY_4X4),
        (WARNED, ONLY_2X4),
        (TAS_REFUSED, ONLY_POOLS),
    ] {
        policies::namespace(&cluster, namespace, Some(policies::NONE)).await?;
        cluster
            .apply(&kueue::local_queue(namespace, LOCAL_QUEUE, queue))
            .await?;
        kueue::wait_local_queue_active(&cluster, namespace, LOCAL_QUEUE).await?;
    }
    let scope = |namespaces: &[&str]| {
        [
            json!({"key": "kubernetes.io/metadata.name", "operator": "In",
                "values": namespaces}),
        ]
    };
    // The queue-check pair of examples/ as it is (`refuse`), and once more under `warn`.
    let validating = |installed: Vec<Installed>| {
        installed
            .into_iter()
            .find(|i| !i.mutating)
            .ok_or_else(|| anyhow::anyhow!("the queue-check pair has no validating policy"))
    };
    let refuse = validating(
        plane
            .install_variant(
                Variant::QueueCheck,
                Some("refuse"),
                &json!({}),
                &scope(&[REFUSED, FITS, TAS_REFUSED]),
            )
            .await?,
    )?;
    let warn = validating(
        plane
            .install_variant(
                Variant::QueueCheck,
                Some("warn"),
                &json!({"queueCheck": "warn"}),
                &scope(&[WARNED]),
            )
            .await?,
    )?;
    // A moment for the API server's informers to have the labels and the configurations.
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(QueueCheck { refuse, warn })
}

/// The fixture in `namespace`, as a user writes it: Kueue's webhook suspends it.
fn jobset_in(namespace: &str) -> anyhow::Result<Value> {
    let mut object = fixture_jobset(FIXTURE, namespace)?;
    if let Some(spec) = object["spec"].as_object_mut() {
        spec.remove("suspend");
    }
    Ok(object)
}

/// Q1 for the fixture in `namespace`, whose queue has tpu-v6e-2x4 only.
fn q1(namespace: &str) -> String {
    format!(
        "[Q1] metadata.labels[\"kueue.x-k8s.io/queue-name\"]: names queue \"{namespace}/{LOCAL_QUEUE}\" (ClusterQueue \"{ONLY_2X4}\"), where replicated job \"workers\" fits no flavour of google.com/tpu: \"tpu-v6e-2x4\" (tpu-v6e-slice 2x4); it needs a slice of 4 hosts with 4 chips per pod: tpu-v6e-slice 4x4, so Kueue would never admit it; submit it to a queue with a flavour of one of those shapes, or add such a flavour to the ClusterQueue; see docs/rules.md, Q1"
    )
}

/// The mutating policy's warning on the fixture at CREATE (docs/contributing/spec.md §4.7).
const NARROWED: &str = "spec.replicatedJobs[0].template.spec.template.spec.affinity: replicated job \"workers\" leaves its slice shape open, so a required node affinity limits it to slices of 4 hosts of 4 chips: tpu-v6e-slice 4x4";

/// Q1 for the fixture in `namespace` as a warning (`queueCheck: warn`): cut at 256 characters,
/// as every warning is (docs/contributing/spec.md §4.2).
fn q1_warning(namespace: &str) -> String {
    let mut cut: String = q1(namespace).chars().take(255).collect();
    cut.push('…');
    cut
}

/// The CREATE reviews of a JobSet that one policy answered.
fn created_by<'a>(reviews: &'a [Value], policy: &Installed, namespace: &str) -> Vec<&'a Value> {
    reviews_of(reviews, "JobSet", namespace, "train-v6e")
        .into_iter()
        .filter(|r| r["policy"] == json!(policy.configuration) && r["operation"] == "CREATE")
        .collect()
}

/// `refuse`, a queue of 2x4 only: `kubectl apply` fails with Q1, and nothing is stored.
pub(crate) async fn misfit_refused(
    plane: &ControlPlane,
    check: &QueueCheck,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let object = jobset_in(REFUSED)?;
    let sub = run::submit(&plane.cluster, std::slice::from_ref(&object))
        .await?
        .remove(0);
    let what = format!("JobSet {REFUSED}/{}", sub.name);
    let message = sub.created.message().unwrap_or_default().to_string();
    f.eq(sub.created.status, 400, &format!("{what}: status"));
    f.eq(
        message.clone(),
        format!(
            "admission webhook \"{}\" denied the request: {}",
            check.refuse.webhook,
            q1(REFUSED)
        ),
        &format!("{what}: message"),
    );
    let stored = plane.cluster.get(&object).await?;
    f.check(stored.is_none(), || format!("{what}: stored"));
    if stored.is_some() {
        plane.cluster.delete(&object).await?;
    }
    // The validating policy judged it as Kueue's webhook stored it: suspended.
    let reviews = plane.reviews()?;
    let judged = created_by(&reviews, &check.refuse, REFUSED);
    f.eq(
        judged
            .iter()
            .map(|r| (&r["allowed"], &r["object"]["spec"]["suspend"]))
            .collect::<Vec<_>>(),
        vec![(&json!(false), &json!(true))],
        &format!("{what}: the queue check's CREATE verdicts (allowed, suspend)"),
    );
    eprintln!("queue check: {what}: {} {message}", sub.created.status);
    Ok(f)
}

/// `refuse`, a JobSet that requires the block and slices by node pool, in a queue whose one
/// flavour fits its shape but whose Topology has no block level: refused with Q1, where Kueue
/// would skip the flavour ("does not contain the requested level", the Kueue record) and leave
/// it pending; nothing is stored.
pub(crate) async fn topology_lacks_a_level(
    plane: &ControlPlane,
    check: &QueueCheck,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let mut object = fixture_jobset(TAS_FIXTURE, TAS_REFUSED)?;
    if let Some(spec) = object["spec"].as_object_mut() {
        spec.remove("suspend");
    }
    let sub = run::submit(&plane.cluster, std::slice::from_ref(&object))
        .await?
        .remove(0);
    let what = format!("JobSet {TAS_REFUSED}/{}", sub.name);
    let q1 = format!(
        "[Q1] metadata.labels[\"kueue.x-k8s.io/queue-name\"]: names queue \"{TAS_REFUSED}/{LOCAL_QUEUE}\" (ClusterQueue \"{ONLY_POOLS}\"), whose flavours cannot place replicated job \"workers\" by topology: \"{POOLS_FLAVOUR}\" (Topology \"{POOLS_TOPOLOGY}\" has no level cloud.google.com/gce-topology-block), so Kueue would never admit it; use levels of the flavour's Topology in the kueue.x-k8s.io/podset-* annotations, the slice level at or below the required one, or add the levels to the Topology; see docs/rules.md, Q1"
    );
    f.eq(sub.created.status, 400, &format!("{what}: status"));
    f.eq(
        sub.created.message().unwrap_or_default().to_string(),
        format!(
            "admission webhook \"{}\" denied the request: {q1}",
            check.refuse.webhook
        ),
        &format!("{what}: message"),
    );
    let stored = plane.cluster.get(&object).await?;
    f.check(stored.is_none(), || format!("{what}: stored"));
    if stored.is_some() {
        plane.cluster.delete(&object).await?;
    }
    eprintln!("queue check: {what}: {}", sub.created.status);
    Ok(f)
}

/// `refuse`, a queue of 4x4: accepted without a word from the queue check, and it runs.
pub(crate) async fn fitting_runs(
    plane: &ControlPlane,
    check: &QueueCheck,
) -> anyhow::Result<Failures> {
    let mut f = queued_jobset_runs(plane, &jobset_in(FITS)?, &V6E_4X4).await?;
    let reviews = plane.reviews()?;
    let judged = created_by(&reviews, &check.refuse, FITS);
    f.eq(
        judged
            .iter()
            .map(|r| (&r["allowed"], &r["warnings"]))
            .collect::<Vec<_>>(),
        vec![(&json!(true), &json!([]))],
        &format!("JobSet {FITS}/train-v6e: the queue check's CREATE verdicts (allowed, warnings)"),
    );
    Ok(f)
}

/// `warn`, a queue of 2x4 only: accepted, Q1 among the warnings the client gets, and the
/// JobSet waits as a pending Workload with Kueue's reason, suspended and without pods.
pub(crate) async fn misfit_warned(
    plane: &ControlPlane,
    check: &QueueCheck,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let Some(sub) = create_queued(&mut f, plane, &jobset_in(WARNED)?).await? else {
        return Ok(f);
    };
    let what = format!("JobSet {WARNED}/{}", sub.name);
    let reviews = plane.reviews()?;
    let judged = created_by(&reviews, &check.warn, WARNED);
    f.eq(
        judged
            .iter()
            .map(|r| (&r["allowed"], &r["warnings"]))
            .collect::<Vec<_>>(),
        vec![(&json!(true), &json!([q1_warning(WARNED)]))],
        &format!("{what}: the queue check's CREATE verdicts (allowed, warnings)"),
    );
    let created = reviews_of(&reviews, "JobSet", WARNED, &sub.name);
    check_warnings_reached(&mut f, &what, &created, &sub);
    // The mutating policy's, then the queue check's.
    f.eq(
        sub.created.warnings.clone(),
        vec![NARROWED.to_string(), q1_warning(WARNED)],
        &format!("{what}: the warnings the client got"),
    );
    let (conditions, _) = check_waits_unfit(&mut f, plane, &sub, &what, &V6E_2X4).await?;
    eprintln!(
        "queue check: {what}: accepted with warnings {:?}; Workload {conditions:?}",
        sub.created.warnings
    );
    plane.cluster.delete(&object_named(&sub)).await?;
    Ok(f)
}

/// The queue check's host calls on this Kueue (v0.17.0: v1beta2, and the deprecated v1beta1):
/// the module, granted what the queue-check pair's validating policy grants and answered by the API server as
/// policy-server answers (context_aware.rs), each call recorded in kwctl's session format.
/// It asks v1beta2 alone and refuses the misfit JobSet with Q1, as the webhook did. And the
/// host's answer for a group version the API server does not serve, in policy-evaluator's words:
/// the error whose first line the policy quotes when neither v1beta2 nor v1beta1 answers
/// (SPEC §8).
pub(crate) async fn reads_v1beta2(
    plane: &ControlPlane,
    check: &QueueCheck,
) -> anyhow::Result<Failures> {
    use multislice_cluster::context_aware::ClusterBackend;
    use multislice_host::capabilities::{
        Capabilities, ContextAwareResource, GetResource, KubernetesBackend,
    };
    use multislice_host::request::{admission_request, Kind};
    use multislice_host::session::Recorder;
    use multislice_host::{default_wasm_path, Policy};
    use std::sync::Arc;

    let mut f = Failures::default();
    let allowed =
        ContextAwareResource::list_of(&check.refuse.object).map_err(anyhow::Error::msg)?;
    let recorder = Arc::new(Recorder::new(Arc::new(ClusterBackend::new(&plane.cluster))));
    let module = Policy::load(&default_wasm_path())?
        .with_capabilities(Capabilities::kubernetes(recorder.clone(), allowed));
    // As the validating policy sees it: Kueue's webhook has suspended it.
    let mut object = jobset_in(REFUSED)?;
    object["spec"]["suspend"] = json!(true);
    let request = admission_request(Kind::JobSet, "CREATE", &object, None);
    let settings = check.refuse.settings.clone();
    // From a thread of its own, as the webhook server's connection threads call it.
    let outcome = std::thread::spawn(move || module.validate(&request, &settings))
        .join()
        .map_err(|_| anyhow::anyhow!("the evaluation panicked"))??;
    f.eq(
        (outcome.accepted, outcome.message.clone()),
        (false, Some(q1(REFUSED))),
        "the queue check's verdict",
    );
    let session: Vec<Value> = serde_yaml::from_str(&recorder.to_yaml()?)?;
    let field = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}: ")))
            .unwrap_or_default()
            .to_string()
    };
    let asked: Vec<(String, String, String, Value)> = session
        .iter()
        .map(|exchange| {
            let request = exchange["request"].as_str().unwrap_or_default();
            (
                field(request, "api_version"),
                field(request, "kind"),
                field(request, "name"),
                exchange["response"]["type"].clone(),
            )
        })
        .collect();
    let v1beta2 = |kind: &str, name: &str| {
        (
            "kueue.x-k8s.io/v1beta2".to_string(),
            kind.to_string(),
            name.to_string(),
            json!("Success"),
        )
    };
    f.eq(
        asked,
        vec![
            v1beta2("LocalQueue", LOCAL_QUEUE),
            v1beta2("ClusterQueue", ONLY_2X4),
            v1beta2("ResourceFlavor", V6E_2X4.name),
        ],
        "the calls the queue check made (apiVersion, kind, name, answer)",
    );
    let unserved = GetResource::new(
        "kueue.x-k8s.io/v1beta9",
        "LocalQueue",
        LOCAL_QUEUE,
        Some(REFUSED),
    );
    let backend = Arc::new(ClusterBackend::new(&plane.cluster));
    let answer = std::thread::spawn(move || backend.get_resource(&unserved))
        .join()
        .map_err(|_| anyhow::anyhow!("the webhook thread panicked"))?;
    let text = answer.err().unwrap_or_default();
    f.check(
        text.starts_with("error finding resource kueue.x-k8s.io/v1beta9 / LocalQueue: ApiError: 404 page not found\n")
            && text.contains("code: 404"),
        || format!("a group version not served: {text:?}"),
    );
    eprintln!(
        "queue check: asked {:?}; a version not served: {text:?}",
        session.len()
    );
    Ok(f)
}
