//! Issue 54 for real: a Kueue manager that dispatches queued JobSets to a worker with
//! MultiKueue, on two control planes (two kube-apiservers on one etcd, under two prefixes).
//! The manager runs Kueue with a MultiKueue AdmissionCheck and a ClusterQueue of one bare
//! flavour, JobSet, and the policy pair; the worker runs what the Kueue control plane runs
//! (JobSet, the Job controller, the scheduler, Kueue, fake TPU nodes) and the same pair, with
//! the same settings. The copy in the worker is made by the manager's Kueue, as the user
//! `multikueue-manager` of the worker's CA; the cases only submit and read.
//! The rules they hold the policy to: docs/contributing/spec.md §5 (MultiKueue).
use crate::common::{Failures, Report};
use crate::jax::real_jax;
use crate::kueue::runs::fixture_jobset;
use crate::kueue::shared::{eventually, BOUND, FACTS, QUEUE};
use crate::placement::{check_exclusive_placement, check_nothing_lost_jobset};
use crate::pods::check_jobset_pods;
use crate::shapes::{check_warnings_reached, object_named, reviews_of};
use multislice_cluster::agent::NodeAgent;
use multislice_cluster::fleet::{self, Pool};
use multislice_cluster::kueue::multikueue::{
    self, MANAGED_BY, MULTIKUEUE_USER, ORIGIN, ORIGIN_LABEL, PREBUILT_LABEL,
};
use multislice_cluster::kueue::{self, is_true, QUEUE_LABEL};
use multislice_cluster::policies::{self, PAIR_MANIFESTS};
use multislice_cluster::run::{self, Submitted};
use multislice_cluster::{Binaries, Cluster, ControlPlane, Created, Options};
use multislice_host::controller;
use multislice_host::env::resolve;
use multislice_host::fixtures::load_yaml;
use multislice_host::request::{admission_request, Kind};
use multislice_host::{default_wasm_path, workspace_root, Policy};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Instant;

/// The namespaces, the same in both control planes, each with a LocalQueue [`QUEUE`].
const RUN: &str = "mk-run";
const COPY: &str = "mk-copy";
/// The ClusterQueue's name in both: bare and dispatching in the manager, v5p in the worker.
const CLUSTER_QUEUE: &str = "mk";
/// The worker's TPU flavour: the v5p node pools of examples/kueue-queued.yaml's shape.
const V5P_FLAVOUR: &str = "tpu-v5p-2x2x4";
const CPU_FLAVOUR: &str = "cpu";

/// The node labels of the worker's v5p flavour and node pools.
fn v5p_labels() -> BTreeMap<String, String> {
    kueue::tpu_node_labels("tpu-v5p-slice", "2x2x4")
}
const EXAMPLE: &str = "examples/kueue-queued.yaml";
/// What the policy puts before each violation of a copy, which it admits (issue 54).
const COPY_PREFIX: &str = "MultiKueue copy, admitted: ";
/// A warning as the policy bounds it (SPEC §4.2): at most 256 characters, cut with "…".
const WARNING_CHARS: usize = 256;

fn bounded(warning: &str) -> String {
    if warning.chars().count() <= WARNING_CHARS {
        return warning.to_string();
    }
    let mut cut: String = warning.chars().take(WARNING_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// The two control planes, the worker's node agent, and the MultiKueue identity's kubeconfig.
struct Planes {
    manager: ControlPlane,
    worker: ControlPlane,
    agent: NodeAgent,
    /// The worker as the manager's Kueue reaches it (user `multikueue-manager`).
    as_multikueue: Cluster,
}

/// The settings both planes' policies get on top of the examples': the MultiKueue identity.
/// Where the module refuses the key (before issue 54's src lands), the planes run the
/// examples' own settings, so that the rest still runs; the refusal is a failed case.
fn settings(report: &mut Report) -> anyhow::Result<Option<Value>> {
    let extra = json!({"multiKueueUsers": [MULTIKUEUE_USER]});
    let policy = Policy::load(&default_wasm_path())?;
    let mut f = Failures::default();
    let mut accepted = true;
    for role in ["mutate", "validate"] {
        let mut settings = extra.clone();
        settings["role"] = json!(role);
        let outcome = policy.validate_settings(&settings)?;
        f.check(outcome.valid, || {
            format!("role {role}: refused: {:?}", outcome.message)
        });
        accepted &= outcome.valid;
    }
    report.record(
        "multikueue: the policy takes the setting multiKueueUsers (both roles)",
        Ok(f),
    );
    Ok(accepted.then_some(extra))
}

impl Planes {
    /// The worker first (it owns the etcd), its Kubewarden controller stopped once its
    /// policies are served (one such controller per machine: its port is fixed), then the
    /// manager on the worker's etcd; the queues of both; the worker's grant and the manager's
    /// MultiKueue objects, each Active before anything is submitted.
    async fn start(binaries: &Binaries, settings: Option<Value>) -> anyhow::Result<Planes> {
        let mut worker = ControlPlane::start(
            binaries,
            Options {
                kueue: true,
                settings: settings.clone(),
                etcd_prefix: Some("/worker".to_string()),
                ..Options::default()
            },
        )
        .await?;
        worker.stop_kubewarden_controller().await?;
        let manager = ControlPlane::start(
            binaries,
            Options {
                kueue: true,
                settings,
                etcd: Some(worker.etcd_url.clone()),
                etcd_prefix: Some("/manager".to_string()),
                ..Options::default()
            },
        )
        .await?;
        let agent = NodeAgent::start(worker.cluster.clone(), worker.remaining());
        let v5p = v5p_labels();
        worker
            .cluster
            .apply(&kueue::resource_flavor(V5P_FLAVOUR, &v5p))
            .await?;
        worker
            .cluster
            .apply(&kueue::resource_flavor(CPU_FLAVOUR, &BTreeMap::new()))
            .await?;
        worker
            .cluster
            .apply(&kueue::tpu_cluster_queue(
                CLUSTER_QUEUE,
                V5P_FLAVOUR,
                256,
                CPU_FLAVOUR,
            ))
            .await?;
        let (kubeconfig, path) = multikueue::grant_manager_access(&worker).await?;
        multikueue::connect_to_worker(&manager.cluster, &kubeconfig).await?;
        multikueue::dispatching_cluster_queue(&manager.cluster, CLUSTER_QUEUE, 256).await?;
        for plane in [&worker, &manager] {
            for namespace in [RUN, COPY] {
                policies::namespace(&plane.cluster, namespace, None).await?;
                plane
                    .cluster
                    .apply(&kueue::local_queue(namespace, QUEUE, CLUSTER_QUEUE))
                    .await?;
                kueue::wait_local_queue_active(&plane.cluster, namespace, QUEUE).await?;
            }
        }
        let as_multikueue = Cluster::connect(&path).await?;
        Ok(Planes {
            manager,
            worker,
            agent,
            as_multikueue,
        })
    }
}

/// Every MultiKueue case (part `multikueue`), on their two control planes.
pub(crate) async fn cases(binaries: &Binaries, report: &mut Report) -> anyhow::Result<()> {
    let settings = settings(report)?;
    let started = Instant::now();
    let mut planes = Planes::start(binaries, settings).await?;
    eprintln!(
        "multikueue: manager and worker up, MultiKueue Active, in {} s",
        started.elapsed().as_secs()
    );
    let before = report.failed;
    report.record(
        "multikueue: a misfit multislice JobSet submitted to the manager is refused at CREATE with G5's id, field and fix, as in one cluster",
        misfit_refused_in_manager(&planes.manager).await,
    );
    report.record(
        "multikueue: a misfit copy sent to the worker as the MultiKueue identity, with the origin and prebuilt labels, is admitted with a warning; the same JobSet with the origin label from the worker's admin is refused with G5",
        copy_sent_directly(&planes).await,
    );
    match dispatched(&planes).await {
        Ok(mut run) => {
            report.record(
                "multikueue: a 2-slice v5p JobSet submitted to the manager runs in the worker, every container's env what one cluster gives it, and the oracle's",
                Ok(std::mem::take(&mut run.env)),
            );
            report.record(
                "multikueue: real JAX initialises on the env of the worker's pods",
                real_jax("multikueue queued-v5p", &run.pods, 60),
            );
            report.record(
                "multikueue: the worker's CREATE of the copy changes no container, initContainer, toleration or count, and with the facts and narrowing stamped returns no patch",
                Ok(copy_create_unpatched(&planes.worker, &run.copy)),
            );
            report.record(
                "multikueue: the manager's Kueue unsuspends its narrowed JobSet (managedBy kueue.x-k8s.io/multikueue, bare flavour): our webhook admits the UPDATE, suspend is false, event Started, no pod in the manager",
                manager_unsuspend_admitted(&planes.manager, &run.manager_jobset).await,
            );
            report.record(
                "multikueue: the JobSet finishes in the worker; the worker's Workload is Finished, not OutOfSync, and the manager's JobSet shows the worker's status",
                finishes(&planes, &run).await,
            );
            let _ = fleet::remove(&planes.worker.cluster, &run.pools).await;
        }
        Err(e) => report.record("multikueue: the dispatched JobSet", Err(e)),
    }
    for (plane, which) in [
        (&mut planes.manager, "manager"),
        (&mut planes.worker, "worker"),
    ] {
        if let Err(e) = plane.check_alive() {
            report.record(&format!("multikueue: the {which} stayed up"), Err(e));
        }
    }
    if report.failed > before {
        planes.manager.keep_logs();
        planes.worker.keep_logs();
    }
    Ok(())
}

/// The rule fixture the misfit cases submit, and its message (test_data/rules/expected.yaml).
fn g5(namespace: &str, name: &str) -> anyhow::Result<(Value, String)> {
    let root = workspace_root();
    let expected = load_yaml(&root.join("test_data/rules/expected.yaml"))?;
    let message = expected["g5-fail"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut object = load_yaml(&root.join("test_data/rules/g5-fail.yaml"))?;
    object["metadata"]["namespace"] = json!(namespace);
    object["metadata"]["name"] = json!(name);
    object["metadata"]["labels"][QUEUE_LABEL] = json!(QUEUE);
    Ok((object, message))
}

/// b. The manager judges what a user submits as one cluster does: G5 refuses at CREATE.
async fn misfit_refused_in_manager(manager: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let (object, want) = g5(RUN, "g5-manager")?;
    let created = manager.cluster.create(&object, false).await?;
    let message = created.message().unwrap_or_default().to_string();
    f.eq(created.status, 400, "status");
    f.eq(
        message.clone(),
        format!(
            "admission webhook \"{}\" denied the request: {want}",
            manager.webhook_name
        ),
        "message",
    );
    eprintln!(
        "multikueue: G5 in the manager: {} {message}",
        created.status
    );
    Ok(f)
}

/// d. A copy as the manager's Kueue would send it, made by hand: G5's misfit with the origin
/// and prebuilt labels. From the MultiKueue identity it is admitted with G5 as a warning; from
/// the worker's admin, the origin label skips nothing.
async fn copy_sent_directly(planes: &Planes) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let worker = &planes.worker;
    let copy = |name: &str| -> anyhow::Result<(Value, String)> {
        let (mut object, message) = g5(COPY, name)?;
        object["metadata"]["labels"][ORIGIN_LABEL] = json!(ORIGIN);
        object["metadata"]["labels"][PREBUILT_LABEL] = json!(format!("jobset-{name}"));
        object["spec"]["suspend"] = json!(true);
        Ok((object, message))
    };
    let (object, want) = copy("g5-copy")?;
    let created = planes.as_multikueue.create(&object, false).await?;
    f.check(created.status < 300, || {
        format!(
            "as {MULTIKUEUE_USER}: refused ({}): {:?}",
            created.status,
            created.message()
        )
    });
    // G5's violation is the validating policy's one warning (src/multikueue.rs), the mutating
    // policy's narrowing warnings beside it.
    let warning = bounded(&format!("{COPY_PREFIX}{want}"));
    let copies: Vec<&String> = created
        .warnings
        .iter()
        .filter(|w| w.starts_with(COPY_PREFIX))
        .collect();
    f.eq(
        copies,
        vec![&warning],
        &format!("as {MULTIKUEUE_USER}: the copy's warnings"),
    );
    let reviews = worker.reviews()?;
    let verdicts: Vec<(&Value, &Value, &Value)> = reviews_of(&reviews, "JobSet", COPY, "g5-copy")
        .into_iter()
        .map(|r| (&r["policy"], &r["userInfo"]["username"], &r["allowed"]))
        .collect();
    let user = json!(MULTIKUEUE_USER);
    f.eq(
        verdicts,
        vec![
            (
                &json!("clusterwide-jobset-multislice-mutate"),
                &user,
                &json!(true),
            ),
            (
                &json!("clusterwide-jobset-multislice-validate"),
                &user,
                &json!(true),
            ),
        ],
        "as the MultiKueue identity: our verdicts at CREATE, and whose request",
    );
    let sent = Submitted {
        kind: "JobSet".to_string(),
        namespace: COPY.to_string(),
        name: "g5-copy".to_string(),
        created: created.clone(),
    };
    check_warnings_reached(
        &mut f,
        "as the MultiKueue identity",
        &reviews_of(&reviews, "JobSet", COPY, "g5-copy"),
        &sent,
    );
    report_created("the copy as the MultiKueue identity", &created);
    if created.status < 300 {
        worker
            .cluster
            .delete(&object_named_in(COPY, "g5-copy"))
            .await?;
    }

    let (object, _) = copy("g5-origin-admin")?;
    let created = worker.cluster.create(&object, false).await?;
    f.eq(created.status, 400, "as the admin: status");
    f.eq(
        created.message().unwrap_or_default().to_string(),
        format!(
            "admission webhook \"{}\" denied the request: {want}",
            worker.webhook_name
        ),
        "as the admin: message",
    );
    report_created("the copy as the admin", &created);
    if created.status < 300 {
        worker
            .cluster
            .delete(&object_named_in(COPY, "g5-origin-admin"))
            .await?;
    }
    Ok(f)
}

fn report_created(what: &str, created: &Created) {
    eprintln!(
        "multikueue: {what}: {} {:?} warnings {:?}",
        created.status,
        created.message(),
        created.warnings
    );
}

fn object_named_in(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
           "metadata": {"name": name, "namespace": namespace}})
}

/// What the end-to-end run left for the cases that read it.
struct Dispatched {
    /// Failures of the run itself and of the env checks.
    env: Failures,
    /// The worker's pods, bound.
    pods: Vec<Value>,
    /// The JobSet as the manager stored it at CREATE.
    manager_jobset: Submitted,
    /// The copy, as the worker stores it.
    copy: Submitted,
    pools: Vec<Pool>,
}

/// examples/kueue-queued.yaml's 2-slice v5p JobSet (4 hosts of 4 chips per slice), opted in to
/// the JAX env, queued in [`QUEUE`].
fn queued_v5p() -> anyhow::Result<Value> {
    let mut object = fixture_jobset(EXAMPLE, RUN)?;
    object["metadata"]["labels"][QUEUE_LABEL] = json!(QUEUE);
    object["metadata"]["annotations"]["multislice.kubewarden.io/jax-distributed"] = json!("true");
    Ok(object)
}

/// a. Submitted to the manager; accepted there, stamped and handed to Kueue (suspended,
/// managedBy MultiKueue); copied into the worker by the manager's Kueue; admitted and run there.
async fn dispatched(planes: &Planes) -> anyhow::Result<Dispatched> {
    let (manager, worker) = (&planes.manager, &planes.worker);
    let mut f = Failures::default();
    let object = queued_v5p()?;
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let what = format!("JobSet {RUN}/{name}");
    let v5p = v5p_labels();
    let started = kueue::as_started_in(&object, &v5p);
    let pools = fleet::pools_for(std::slice::from_ref(&started), &format!("{RUN}-"));
    fleet::provision(&worker.cluster, &pools).await?;

    let sub = run::submit(&manager.cluster, std::slice::from_ref(&object))
        .await?
        .remove(0);
    if !sub.allowed() {
        anyhow::bail!(
            "{what}: the manager refused its CREATE: {:?}",
            sub.created.message()
        );
    }
    let reviews = manager.reviews()?;
    let created = reviews_of(&reviews, "JobSet", RUN, &name);
    check_warnings_reached(&mut f, &format!("{what} (manager)"), &created, &sub);
    let stored = &sub.created.body;
    f.eq(
        &stored["spec"]["suspend"],
        &json!(true),
        &format!("{what}: suspended by the manager's Kueue at CREATE"),
    );
    f.eq(
        &stored["spec"]["managedBy"],
        &json!(MANAGED_BY),
        &format!("{what}: managedBy set by the manager's Kueue at CREATE"),
    );
    for rjob in stored["spec"]["replicatedJobs"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let template = &rjob["template"]["spec"]["template"];
        f.check(
            template["metadata"]["annotations"][FACTS].is_string(),
            || format!("{what}: {} has no facts in the manager", rjob["name"]),
        );
        f.check(
            template["spec"]["affinity"]["nodeAffinity"].is_object(),
            || format!("{what}: {} is not narrowed in the manager", rjob["name"]),
        );
    }

    // The copy: made by the manager's Kueue once the worker admitted its Workload.
    let copy_object = object_named_in(RUN, &name);
    let copy = eventually(BOUND, || async { worker.cluster.get(&copy_object).await })
        .await?
        .ok_or_else(|| anyhow::anyhow!("{what}: no copy in the worker within {BOUND:?}"))?;
    let labels = &copy["metadata"]["labels"];
    f.eq(
        &labels[ORIGIN_LABEL],
        &json!(ORIGIN),
        &format!("{what}: the copy's origin label"),
    );
    f.check(labels[PREBUILT_LABEL].is_string(), || {
        format!("{what}: the copy has no {PREBUILT_LABEL}")
    });
    f.check(copy["spec"]["managedBy"] != json!(MANAGED_BY), || {
        format!("{what}: the copy is still managed by MultiKueue")
    });
    let copy_sub = Submitted {
        kind: "JobSet".to_string(),
        namespace: RUN.to_string(),
        name: name.clone(),
        created: Created {
            status: 201,
            body: copy.clone(),
            warnings: Vec::new(),
        },
    };
    let expected = run::expected_pods(&object);
    let (complete, pods) =
        run::wait_bound(&worker.cluster, &[(copy_sub.clone(), expected)], BOUND).await?;
    let pods = pods.into_iter().next().unwrap_or_default();
    f.check(complete, || {
        format!(
            "{what}: {} of {expected} pods bound in the worker",
            pods.len()
        )
    });
    // The worker's Kueue unsuspends the copy in its v5p flavour, as the worker's admin (not the
    // MultiKueue identity): our webhook allows it.
    let reviews = worker.reviews()?;
    let updates = kueue::unsuspending_reviews(&reviews, RUN, &name);
    f.check(!updates.is_empty(), || {
        format!("{what}: our webhook never saw the worker's unsuspending UPDATE")
    });
    for u in &updates {
        f.eq(
            (&u["userInfo"]["username"], &u["allowed"]),
            (&json!("admin"), &json!(true)),
            &format!("{what}: the worker's unsuspend: whose, and our verdict"),
        );
        for rjob in u["object"]["spec"]["replicatedJobs"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let selector = &rjob["template"]["spec"]["template"]["spec"]["nodeSelector"];
            for (k, v) in v5p_labels() {
                f.eq(
                    &selector[&k],
                    &json!(v),
                    &format!("{what}: the worker's unsuspend: nodeSelector {k}"),
                );
            }
        }
    }
    let in_manager = manager
        .cluster
        .list("v1", "Pod", Some(RUN), None)
        .await?
        .len();
    f.eq(in_manager, 0, &format!("{what}: pods in the manager"));

    // The env: the oracle's (SPEC §4), and, container by container, what one cluster's
    // webhook gives the same JobSet's pods.
    let stored_copy = worker.cluster.get(&copy_object).await?.unwrap_or(copy);
    check_jobset_pods(&mut f, &what, &stored_copy, &pods);
    check_nothing_lost_jobset(&mut f, &what, &object, &pods);
    check_exclusive_placement(&mut f, &what, &stored_copy, &pods, &worker.cluster).await;
    single_cluster_env(&mut f, worker, &what, &object, &pods)?;
    eprintln!(
        "multikueue: {what}: accepted by the manager, copied by its Kueue, {} pods bound in the worker",
        pods.len()
    );
    Ok(Dispatched {
        env: f,
        pods,
        manager_jobset: sub,
        copy: copy_sub,
        pools,
    })
}

/// Each real pod's env, container by container, against what one cluster gives the same
/// JobSet: its CREATE through the module with the worker's mutating settings, started by
/// Kueue in the worker's flavour, the pods the JobSet and Job controllers make of it (the host
/// crate's simulation), each pod's CREATE through the module, resolved as the kubelet will.
fn single_cluster_env(
    f: &mut Failures,
    worker: &ControlPlane,
    what: &str,
    object: &Value,
    pods: &[Value],
) -> anyhow::Result<()> {
    let policy = Policy::load(&default_wasm_path())?;
    let settings = worker
        .installed
        .iter()
        .find(|i| i.mutating && i.manifest == PAIR_MANIFESTS[0])
        .map(|i| i.settings.clone())
        .ok_or_else(|| anyhow::anyhow!("the worker has no mutating policy of the pair"))?;
    let served = controller::as_served(object, controller::JobSetApi::V09);
    let outcome = policy.validate(
        &admission_request(Kind::JobSet, "CREATE", &served, None),
        &settings,
    )?;
    let stamped = outcome.mutated_object.unwrap_or(served);
    let v5p = v5p_labels();
    let started = kueue::as_started_in(&stamped, &v5p);
    let mut one_cluster: BTreeMap<String, Value> = BTreeMap::new();
    for sim in controller::jobset_pods(&started)? {
        let outcome = policy.validate(
            &admission_request(Kind::Pod, "CREATE", &sim.object, None),
            &settings,
        )?;
        one_cluster.insert(
            sim.hostname.clone(),
            outcome.mutated_object.unwrap_or(sim.object),
        );
    }
    f.eq(
        pods.len(),
        one_cluster.len(),
        &format!("{what}: pods, real vs one cluster"),
    );
    for pod in pods {
        let host = pod["spec"]["hostname"].as_str().unwrap_or_default();
        let Some(theirs) = one_cluster.get(host) else {
            f.0.push(format!("{what}: one cluster makes no pod {host}"));
            continue;
        };
        for list in ["initContainers", "containers"] {
            for c in pod["spec"][list].as_array().into_iter().flatten() {
                let Some(tc) = theirs["spec"][list]
                    .as_array()
                    .and_then(|cs| cs.iter().find(|x| x["name"] == c["name"]))
                else {
                    f.0.push(format!("{what}: {host}: one cluster has no {}", c["name"]));
                    continue;
                };
                // The Job controller's own variable (Indexed Jobs), which the simulation does
                // not add: checked against the pod's index, then left out.
                let mut real = resolve(pod, c)?;
                let index = pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                for (k, v) in &real {
                    if k == "JOB_COMPLETION_INDEX" {
                        f.eq(v, &index, &format!("{what}: {host} JOB_COMPLETION_INDEX"));
                    }
                }
                real.retain(|(k, _)| k != "JOB_COMPLETION_INDEX");
                f.eq(
                    real,
                    resolve(theirs, tc)?,
                    &format!(
                        "{what}: {host} {list} {}: env, worker vs one cluster",
                        c["name"]
                    ),
                );
            }
        }
    }
    Ok(())
}

/// e. The worker's CREATE of the copy, as our mutating webhook answered it: no operation on a
/// container, initContainer, toleration or count; with the facts and the narrowing stamped in
/// the manager, no patch at all.
fn copy_create_unpatched(worker: &ControlPlane, copy: &Submitted) -> Failures {
    let mut f = Failures::default();
    let reviews = match worker.reviews() {
        Ok(r) => r,
        Err(e) => {
            f.0.push(format!("the worker's review log: {e:#}"));
            return f;
        }
    };
    let creates = reviews_of(&reviews, "JobSet", &copy.namespace, &copy.name);
    let mutating: Vec<&&Value> = creates
        .iter()
        .filter(|r| r["policy"] == "clusterwide-jobset-multislice-mutate")
        .collect();
    f.eq(
        mutating.len(),
        1,
        "the copy's CREATEs our mutating webhook answered",
    );
    for review in &mutating {
        f.eq(
            &review["allowed"],
            &json!(true),
            "the mutating webhook's verdict",
        );
        f.eq(
            &review["userInfo"]["username"],
            &json!(MULTIKUEUE_USER),
            "who created the copy in the worker",
        );
        let ops = review["patch"].as_array().cloned().unwrap_or_default();
        let touched: Vec<String> = ops
            .iter()
            .filter_map(|op| op["path"].as_str())
            .filter(|p| touches_what_kueue_compares(p))
            .map(str::to_string)
            .collect();
        f.eq(
            touched,
            Vec::<String>::new(),
            "patch operations on containers, initContainers, tolerations or counts",
        );
        // A copy whose facts and narrowing the manager stamped gets no patch at all.
        f.eq(ops, Vec::<Value>::new(), "the copy's CREATE patch");
    }
    let validating: Vec<(&Value, &Value)> = creates
        .iter()
        .filter(|r| r["policy"] == "clusterwide-jobset-multislice-validate")
        .map(|r| (&r["allowed"], &r["warnings"]))
        .collect();
    f.check(
        validating
            .iter()
            .all(|(allowed, _)| **allowed == json!(true)),
        || format!("the validating webhook on the copy's CREATE: {validating:?}"),
    );
    eprintln!(
        "multikueue: the copy's CREATE in the worker: mutating patches {:?}, validating {validating:?}",
        mutating.iter().map(|r| &r["patch"]).collect::<Vec<_>>()
    );
    f
}

/// Whether a JSON patch path changes what Kueue compares between the copy and its prebuilt
/// Workload: a replicated job's count (`replicas`, `parallelism`, `completions`), its pod
/// template's containers, initContainers or tolerations, or a whole object above them.
fn touches_what_kueue_compares(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let above = [
        "spec",
        "replicatedJobs",
        "*",
        "template",
        "spec",
        "template",
        "spec",
    ];
    let is_above = |n: usize| {
        segments.len() <= n && segments.iter().zip(above).all(|(s, a)| a == "*" || *s == a)
    };
    let under = |n: usize, keys: &[&str]| {
        segments.len() > n
            && segments
                .iter()
                .zip(above)
                .take(n)
                .all(|(s, a)| a == "*" || *s == a)
            && keys.contains(&segments[n])
    };
    is_above(above.len())
        || under(3, &["replicas"])
        || under(5, &["parallelism", "completions"])
        || under(7, &["containers", "initContainers", "tolerations"])
}

/// c. The manager's Kueue unsuspends its own JobSet with its bare flavour once the worker
/// admitted the copy (kueue#16010). With a bare flavour the UPDATE carries no node selector, so
/// T3 would refuse it; it must be admitted, and the narrowing written at CREATE stays.
async fn manager_unsuspend_admitted(
    manager: &ControlPlane,
    sub: &Submitted,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let what = format!("JobSet {}/{} in the manager", sub.namespace, sub.name);
    let cluster = &manager.cluster;
    let started = eventually(BOUND, || async {
        let events = cluster
            .list("v1", "Event", Some(&sub.namespace), None)
            .await?;
        Ok(events.into_iter().find(|e| {
            e["involvedObject"]["kind"] == "JobSet"
                && e["involvedObject"]["name"] == sub.name.as_str()
                && e["reason"] == "Started"
        }))
    })
    .await?;
    let reviews = manager.reviews()?;
    let updates = kueue::unsuspending_reviews(&reviews, &sub.namespace, &sub.name);
    // Kueue retries a refused unsuspend with a backoff: each distinct verdict once, counted.
    let mut verdicts: BTreeMap<(String, bool, String), usize> = BTreeMap::new();
    for u in &updates {
        let key = (
            u["policy"].as_str().unwrap_or_default().to_string(),
            u["allowed"] == json!(true),
            u["message"].as_str().unwrap_or_default().to_string(),
        );
        *verdicts.entry(key).or_default() += 1;
    }
    eprintln!("multikueue: {what}: the unsuspending UPDATEs' verdicts, counted: {verdicts:?}");
    f.check(!updates.is_empty(), || {
        format!("{what}: our webhook never saw the unsuspending UPDATE")
    });
    for ((policy, allowed, message), times) in &verdicts {
        f.check(*allowed, || {
            format!("{what}: {policy} refused the unsuspending UPDATE {times} time(s): {message:?}")
        });
    }
    match &started {
        Some(e) => f.eq(
            e["message"].as_str().unwrap_or_default().to_string(),
            format!("Admitted by clusterQueue {CLUSTER_QUEUE}"),
            &format!("{what}: the Started event"),
        ),
        None => {
            f.0.push(format!("{what}: no event Started within {BOUND:?}"))
        }
    }
    let stored = cluster.get(&sub.created.body).await?.unwrap_or_default();
    f.eq(
        &stored["spec"]["suspend"],
        &json!(false),
        &format!("{what}: suspend"),
    );
    f.eq(
        &stored["spec"]["managedBy"],
        &json!(MANAGED_BY),
        &format!("{what}: managedBy"),
    );
    for rjob in stored["spec"]["replicatedJobs"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let spec = &rjob["template"]["spec"]["template"]["spec"];
        f.check(spec["affinity"]["nodeAffinity"].is_object(), || {
            format!("{what}: {}'s narrowing is gone", rjob["name"])
        });
        f.eq(
            &spec["nodeSelector"]["cloud.google.com/gke-tpu-accelerator"],
            &Value::Null,
            &format!(
                "{what}: {}: the bare flavour adds no selector",
                rjob["name"]
            ),
        );
    }
    Ok(f)
}

/// The end: the node agent lets the worker's pods succeed; JobSet completes the copy, the
/// worker's Workload finishes as it (not `OutOfSync`), and the manager's JobSet carries the
/// worker's status, synced by MultiKueue.
async fn finishes(planes: &Planes, run: &Dispatched) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let (manager, worker) = (&planes.manager, &planes.worker);
    let copy = &run.copy;
    let what = format!("JobSet {}/{}", copy.namespace, copy.name);
    let prebuilt = copy.created.body["metadata"]["labels"][PREBUILT_LABEL]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let workload_object = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                 "metadata": {"name": prebuilt, "namespace": copy.namespace}});
    // While it runs: admitted in the worker's v5p flavour, in sync.
    let running = worker
        .cluster
        .get(&workload_object)
        .await?
        .unwrap_or_default();
    f.check(is_true(&running, "Admitted"), || {
        format!(
            "{what}: the worker's Workload {prebuilt} is not Admitted: {:?}",
            kueue::conditions_text(&running)
        )
    });
    f.check(!is_true(&running, "Finished"), || {
        format!(
            "{what}: the worker's Workload finished while running: {:?}",
            kueue::conditions_text(&running)
        )
    });
    planes.agent.succeed_jobset(&copy.namespace, &copy.name);
    let finished = eventually(BOUND, || async {
        let w = worker.cluster.get(&workload_object).await?;
        Ok(w.filter(|w| is_true(w, "Finished")))
    })
    .await?;
    let Some(finished) = finished else {
        f.0.push(format!(
            "{what}: the worker's Workload not Finished within {BOUND:?}: {:?}",
            kueue::conditions_text(
                &worker
                    .cluster
                    .get(&workload_object)
                    .await?
                    .unwrap_or_default()
            )
        ));
        return Ok(f);
    };
    let reason = kueue::condition(&finished, "Finished")
        .map(|c| c["reason"].clone())
        .unwrap_or_default();
    f.check(reason != json!("OutOfSync"), || {
        format!(
            "{what}: the worker's Workload finished OutOfSync: {:?}",
            kueue::conditions_text(&finished)
        )
    });
    f.eq(
        &reason,
        &json!("Succeeded"),
        &format!("{what}: the worker's Workload's Finished reason"),
    );
    // The manager's JobSet: the worker's status, synced (MultiKueue copies the whole status).
    let worker_js = worker
        .cluster
        .get(&copy.created.body)
        .await?
        .unwrap_or_default();
    let synced = eventually(BOUND, || async {
        let m = manager
            .cluster
            .get(&run.manager_jobset.created.body)
            .await?;
        Ok(m.filter(|m| {
            m["status"]["terminalState"] == "Completed"
                && m["status"]["replicatedJobsStatus"]
                    == worker_js["status"]["replicatedJobsStatus"]
        }))
    })
    .await?;
    let manager_js = match synced {
        Some(m) => m,
        None => manager
            .cluster
            .get(&run.manager_jobset.created.body)
            .await?
            .unwrap_or_default(),
    };
    f.eq(
        &worker_js["status"]["terminalState"],
        &json!("Completed"),
        &format!("{what}: terminalState in the worker"),
    );
    for key in ["terminalState", "replicatedJobsStatus"] {
        f.eq(
            &manager_js["status"][key],
            &worker_js["status"][key],
            &format!("{what}: status.{key}, manager vs worker"),
        );
    }
    // Absent from the manager's copy of the status where the worker's reads 0.
    let restarts = |js: &Value| js["status"]["restarts"].as_u64().unwrap_or(0);
    f.eq(
        restarts(&manager_js),
        restarts(&worker_js),
        &format!("{what}: status.restarts, manager vs worker"),
    );
    let conditions = |js: &Value| -> Vec<(Value, Value, Value)> {
        js["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| (c["type"].clone(), c["status"].clone(), c["reason"].clone()))
            .collect()
    };
    f.eq(
        conditions(&manager_js),
        conditions(&worker_js),
        &format!("{what}: status.conditions, manager vs worker"),
    );
    eprintln!(
        "multikueue: {what}: the worker's Workload Finished ({reason}); the manager's JobSet {} with {:?}",
        manager_js["status"]["terminalState"],
        conditions(&manager_js)
    );
    let _ = worker.cluster.delete(&object_named(copy)).await;
    let _ = manager
        .cluster
        .delete(&object_named(&run.manager_jobset))
        .await;
    Ok(f)
}
