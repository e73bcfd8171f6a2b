//! Kubewarden's audit scanner (part `audit`, run only where kwctl and policy-server are found):
//! audit-scanner v1.31.0 as chart 5.13.0 runs it, on its ServiceAccount's token, against the
//! validating half on policy-server, and the Reports it stores (docs/contributing/spec.md §5,
//! Background audit and MultiKueue; docs/operations.md "Background audit"). The namespace is
//! judged by no policy until a JobSet that breaks T2 exists in it; then the pair is installed for
//! it, with a MultiKueue identity named, and a compliant JobSet and a worker's copy are
//! admitted. One scan under the chart's bindings alone, one more with examples/audit-scanner/.
use crate::common::Failures;
use multislice_cluster::audit;
use multislice_cluster::kueue::multikueue::{
    self, MULTIKUEUE_USER, ORIGIN, ORIGIN_LABEL, PREBUILT_LABEL,
};
use multislice_cluster::policies::{self, Variant};
use multislice_cluster::{Cluster, ControlPlane, Created};
use multislice_gen::rule_fixtures::{expectations, fixture};
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// The namespace of the cases: no cluster-wide policy of the deployment judges it.
pub(crate) const AUDIT: &str = "audit";
/// The pair the case installs for it (`<name>-audit`), and its two policies' unique names.
const SUFFIX: &str = "audit";
const VALIDATE: &str = "clusterwide-jobset-multislice-validate-audit";
const MUTATE: &str = "clusterwide-jobset-multislice-mutate-audit";
const COPY_PREFIX: &str = "MultiKueue copy, admitted: ";
/// The JobSets that exist when the scanner runs.
const BEFORE: &str = "before-the-policy";
const COMPLIANT: &str = "compliant";
const COPY: &str = "worker-copy";
/// Each has 2 replicated Jobs (T2's fixtures: replicas 2).
const JOBS: usize = 6;

/// Labelled long before the case submits, so that the API server's namespace informer has the
/// label by then.
pub(crate) async fn namespace(plane: &ControlPlane) -> anyhow::Result<()> {
    policies::namespace(&plane.cluster, AUDIT, Some(policies::NONE)).await
}

/// What the namespace held, what admission answered, and what the two scans stored.
struct Run {
    /// Admission's part of cases 1 and 5.
    before: Failures,
    copy: Failures,
    view_only: Vec<Value>,
    view_only_log: String,
    with_rbac: Vec<Value>,
}

/// The five cases, each with its own record.
pub(crate) async fn cases(
    plane: &mut ControlPlane,
    scanner: &Path,
) -> Vec<(String, anyhow::Result<Failures>)> {
    let start = Instant::now();
    let run = match set_up_and_scan(plane, scanner).await {
        Ok(run) => run,
        Err(e) => return vec![("the audit scanner's run".to_string(), Err(e))],
    };
    eprintln!(
        "audit: set-up, two scans and their Reports in {} s",
        start.elapsed().as_secs()
    );
    let t2 = message_of("t2-fail");
    vec![
        (
            "audit: a JobSet that broke T2 before the policy existed is reported `fail` with T2's message, severity and category (and the same JobSet is refused now)".to_string(),
            Ok(existing_violation(&run, &t2)),
        ),
        (
            "audit: a compliant JobSet is reported `pass`".to_string(),
            Ok(compliant(&run)),
        ),
        (
            "audit: the mutating half is not audited (backgroundAudit: false): no result of it, counted as skipped".to_string(),
            Ok(mutating_half(&run)),
        ),
        (
            "audit: under the chart's bindings alone (`view`) no JobSet is audited, only their Jobs; with examples/audit-scanner/ every JobSet is".to_string(),
            Ok(rbac(&run)),
        ),
        (
            "audit: a MultiKueue worker's copy, admitted with T2 as a warning, is reported `pass`, not `fail` (the origin label from the admin is refused at admission)".to_string(),
            Ok(worker_copy(&run)),
        ),
    ]
}

fn message_of(fixture_name: &str) -> String {
    expectations()[fixture_name]
        .message
        .clone()
        .unwrap_or_default()
}

/// A rule fixture under another name, in the namespace.
fn jobset(fixture_name: &str, name: &str) -> Value {
    let mut object = fixture(fixture_name);
    object["metadata"]["name"] = json!(name);
    object["metadata"]["namespace"] = json!(AUDIT);
    object
}

fn as_copy(mut object: Value) -> Value {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    object["metadata"]["labels"][ORIGIN_LABEL] = json!(ORIGIN);
    object["metadata"]["labels"][PREBUILT_LABEL] = json!(format!("jobset-{name}"));
    object
}

/// Dry-run CREATEs of `object` until `done` holds for the answer (an informer of the API
/// server catching up), for at most 30 s.
async fn until(
    cluster: &Cluster,
    object: &Value,
    done: impl Fn(&Created) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = cluster.create(object, true).await?;
        if done(&answer) {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "{}: still {} after 30 s: {:?}",
                object["metadata"]["name"],
                answer.status,
                answer.message()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn set_up_and_scan(plane: &mut ControlPlane, scanner: &Path) -> anyhow::Result<Run> {
    let cluster = plane.cluster.clone();
    let t2 = message_of("t2-fail");
    let mut before = Failures::default();
    let mut copy = Failures::default();
    // Case 1: created while no policy judges the namespace.
    let existing = jobset("t2-fail", BEFORE);
    until(&cluster, &existing, |a| a.status < 300).await?;
    let created = cluster.create(&existing, false).await?;
    anyhow::ensure!(
        created.status < 300,
        "{BEFORE}: not created before the policy: {:?}",
        created.message()
    );
    let scope =
        [json!({"key": "kubernetes.io/metadata.name", "operator": "In", "values": [AUDIT]})];
    let installed = plane
        .install_variant(
            Variant::Pair,
            Some(SUFFIX),
            &json!({"multiKueueUsers": [MULTIKUEUE_USER]}),
            &scope,
        )
        .await?;
    let webhook = installed
        .iter()
        .find(|i| !i.mutating)
        .map(|i| i.webhook.clone())
        .ok_or_else(|| anyhow::anyhow!("the pair for {AUDIT} has no validating policy"))?;
    let refused = |created: &Created| {
        (
            created.status,
            created.message().unwrap_or_default().to_string(),
        )
    };
    let refusal = (
        400,
        format!("admission webhook \"{webhook}\" denied the request: {t2}"),
    );
    let now = jobset("t2-fail", "refused-now");
    until(&cluster, &now, |a| a.status == 400).await?;
    before.eq(
        refused(&cluster.create(&now, false).await?),
        refusal.clone(),
        "the same JobSet, created now",
    );
    let compliant = cluster.create(&jobset("t2-pass", COMPLIANT), false).await?;
    anyhow::ensure!(
        compliant.status < 300,
        "{COMPLIANT}: refused: {:?}",
        compliant.message()
    );
    // Case 5: the origin label from anyone but the MultiKueue identity downgrades nothing.
    let by_admin = cluster
        .create(&as_copy(jobset("t2-fail", "copy-by-admin")), false)
        .await?;
    copy.eq(refused(&by_admin), refusal, "the copy from the admin");
    let (_, kubeconfig) = multikueue::grant_manager_access(plane).await?;
    let as_multikueue = Cluster::connect(&kubeconfig).await?;
    let admitted = as_multikueue
        .create(&as_copy(jobset("t2-fail", COPY)), false)
        .await?;
    copy.check(admitted.status < 300, || {
        format!("as {MULTIKUEUE_USER}: refused: {:?}", admitted.message())
    });
    let copy_warnings: Vec<&String> = admitted
        .warnings
        .iter()
        .filter(|w| w.starts_with(COPY_PREFIX))
        .collect();
    copy.eq(
        copy_warnings,
        vec![&format!("{COPY_PREFIX}{t2}")],
        &format!("as {MULTIKUEUE_USER}: the copy's warnings at CREATE"),
    );
    // The scanner audits the JobSets' Jobs under `view` alone: wait until they all exist.
    let deadline = Instant::now() + Duration::from_secs(60);
    while cluster
        .list("batch/v1", "Job", Some(AUDIT), None)
        .await?
        .len()
        < JOBS
    {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the JobSet controller made fewer than {JOBS} Jobs in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    audit::install_report_crds(plane).await?;
    let token = audit::chart_identity(plane).await?;
    let view_only_log = audit::scan(plane, scanner, &token, 1).await?;
    let view_only = reports(&cluster).await?;
    let kubectl = plane.kubectl()?.clone();
    let rbac = workspace_root().join("examples/audit-scanner");
    tokio::task::spawn_blocking(move || kubectl.apply_k(&rbac)).await??;
    audit::scan(plane, scanner, &token, 2).await?;
    let with_rbac = reports(&cluster).await?;
    // Their pods wait for nodes that no case of this namespace makes: gone, they cannot take
    // the nodes later cases make for their own pods.
    for name in [BEFORE, COMPLIANT, COPY] {
        cluster.delete(&jobset("t2-fail", name)).await?;
    }
    Ok(Run {
        before,
        copy,
        view_only,
        view_only_log,
        with_rbac,
    })
}

/// The namespace's Reports (openreports.io, `--report-kind openreports`).
async fn reports(cluster: &Cluster) -> anyhow::Result<Vec<Value>> {
    cluster
        .list("openreports.io/v1alpha1", "Report", Some(AUDIT), None)
        .await
}

/// The Reports of one kind, by the name of the object each is about.
fn of_kind<'a>(reports: &'a [Value], kind: &str) -> Vec<(&'a str, &'a Value)> {
    let mut out: Vec<(&str, &Value)> = reports
        .iter()
        .filter(|r| r["scope"]["kind"] == kind)
        .map(|r| (r["scope"]["name"].as_str().unwrap_or_default(), r))
        .collect();
    out.sort_by_key(|(name, _)| *name);
    out
}

/// A result as a user reads it: policy, result, message, severity, category.
fn results(report: &Value) -> Vec<[String; 5]> {
    report["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            ["policy", "result", "message", "severity", "category"]
                .map(|k| r[k].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

/// The summary's counts: pass, fail, warn, error, skip (a zero is left out of the object).
fn summary(report: &Value) -> [u64; 5] {
    ["pass", "fail", "warn", "error", "skip"].map(|k| report["summary"][k].as_u64().unwrap_or(0))
}

fn report_of<'a>(f: &mut Failures, reports: &'a [Value], name: &str) -> Option<&'a Value> {
    let found = of_kind(reports, "JobSet")
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, r)| r);
    f.check(found.is_some(), || {
        format!("no Report of JobSet {name} after the second scan")
    });
    found
}

fn row(result: &str, message: &str) -> [String; 5] {
    [VALIDATE, result, message, "medium", "Resource validation"].map(str::to_string)
}

fn existing_violation(run: &Run, t2: &str) -> Failures {
    let mut f = Failures(run.before.0.clone());
    if let Some(report) = report_of(&mut f, &run.with_rbac, BEFORE) {
        f.eq(results(report), vec![row("fail", t2)], BEFORE);
        f.eq(
            summary(report),
            [0, 1, 0, 0, 1],
            &format!("{BEFORE}: summary"),
        );
        eprintln!("audit: the Report of {BEFORE}: {}", report["results"]);
    }
    f
}

fn compliant(run: &Run) -> Failures {
    let mut f = Failures::default();
    if let Some(report) = report_of(&mut f, &run.with_rbac, COMPLIANT) {
        f.eq(results(report), vec![row("pass", "")], COMPLIANT);
        f.eq(
            summary(report),
            [1, 0, 0, 0, 1],
            &format!("{COMPLIANT}: summary"),
        );
    }
    f
}

/// No result of the mutating half in any Report of either scan; each Report counts it skipped
/// (the one policy of the namespace the scanner leaves out).
fn mutating_half(run: &Run) -> Failures {
    let mut f = Failures::default();
    let all: Vec<&Value> = run.view_only.iter().chain(&run.with_rbac).collect();
    f.check(!all.is_empty(), || "no Report at all".to_string());
    for report in all {
        let name = format!("{} {}", report["scope"]["kind"], report["scope"]["name"]);
        let policies: Vec<String> = results(report).into_iter().map(|[p, ..]| p).collect();
        f.eq(
            policies,
            vec![VALIDATE.to_string()],
            &format!("{name}: the policies"),
        );
        f.eq(summary(report)[4], 1, &format!("{name}: skipped"));
        f.check(!report.to_string().contains(MUTATE), || {
            format!("{name} names {MUTATE}")
        });
    }
    f
}

fn rbac(run: &Run) -> Failures {
    let mut f = Failures::default();
    f.eq(
        of_kind(&run.view_only, "JobSet").len(),
        0,
        "Reports of JobSets under `view` alone",
    );
    let jobs = of_kind(&run.view_only, "Job");
    f.eq(jobs.len(), JOBS, "Reports of Jobs under `view` alone");
    for (name, report) in jobs {
        f.eq(results(report), vec![row("pass", "")], name);
    }
    let refused = run.view_only_log.lines().any(|line| {
        serde_json::from_str::<Value>(line).is_ok_and(|l| {
            l["message"] == "Failed to list resources"
                && l["resource-GVK"]
                    .as_str()
                    .is_some_and(|g| g.contains("jobsets"))
                && l["error"].as_str().is_some_and(|e| e.contains("forbidden"))
        })
    });
    f.check(refused, || {
        "the first scan's log has no `Failed to list resources` of jobsets, forbidden".to_string()
    });
    let audited: Vec<&str> = of_kind(&run.with_rbac, "JobSet")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    f.eq(
        audited,
        vec![BEFORE, COMPLIANT, COPY],
        "JobSets reported with examples/audit-scanner/",
    );
    f
}

fn worker_copy(run: &Run) -> Failures {
    let mut f = Failures(run.copy.0.clone());
    if let Some(report) = report_of(&mut f, &run.with_rbac, COPY) {
        f.eq(results(report), vec![row("pass", "")], COPY);
    }
    f
}
