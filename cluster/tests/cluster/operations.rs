//! docs/operations.md run as written (part `operations`): each command the page's test table
//! (tests/native/operations.rs) gives to this file is taken from the page by its text
//! (multislice_host::operations_page), run with bash in the real kubectl's reach, and its
//! outcome held to what the page says. The page's PolicyServer YAML is applied as the page's
//! `policy-server.yaml`. What is put in for the page's placeholders, and why:
//! - `<your overlay of examples/>` is the harness's overlay of the pair (cluster/kustomize/pair
//!   with the local module), which the control plane applied at its start;
//! - the pair runs on PolicyServer `default`, the one whose pods the harness serves (host.rs);
//!   the page's `jobset-multislice` gets its Deployment, but no process behind its pods, so its
//!   rollout is waited on as `policy-server-default`'s;
//! - `NAME` is `jobset-multislice-validate`.
//!
//! These cases change the control plane (they delete the pair and the single policy, and apply
//! the pair again), so they run last.
use crate::common::{Failures, Report};
use anyhow::{anyhow, bail, Context, Result};
use multislice_cluster::{Cluster, ControlPlane};
use multislice_host::operations_page::{commands, fenced, page, Command};
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const APPLY_POLICY_SERVER: &str = "kubectl apply -f policy-server.yaml";
const APPLY_OVERLAY: &str = "kubectl apply -k <your overlay of examples/>";
const WAIT_ACTIVE: &str = "kubectl wait --for=jsonpath='{.status.policyStatus}'=active --timeout=5m clusteradmissionpolicy/jobset-multislice-mutate clusteradmissionpolicy/jobset-multislice-validate";
const ROLLOUT: &str =
    "kubectl -n kubewarden rollout status deployment/policy-server-jobset-multislice";
const SMOKE_FACTS: &str = "kubectl apply --dry-run=server -f examples/multislice-v5p.yaml -o jsonpath='{.spec.replicatedJobs[0].template.spec.template.metadata.annotations.multislice\\.kubewarden\\.io/facts}'";
const SMOKE_REFUSAL: &str = "sed 's/completions: 4/completions: 2/' examples/multislice-v5p.yaml | kubectl apply --dry-run=server -f -";
const DELETE_SINGLE: &str = "kubectl delete clusteradmissionpolicy jobset-multislice";
const CONDITIONS: &str =
    "kubectl get clusteradmissionpolicy NAME -o jsonpath='{.status.conditions}'";
const POLICY_SERVER_PODS: &str =
    "kubectl -n kubewarden get pods -l kubewarden/policy-server=jobset-multislice";
const DELETE_OVERLAY: &str = "kubectl delete -k <your overlay of examples/>";
const DELETE_POLICY_SERVER: &str = "kubectl delete -f policy-server.yaml";

/// The namespace the page's smoke test runs in (the example's own).
const NAMESPACE: &str = "training";
/// What the controller names the objects of the page's PolicyServer.
const PAGE_OBJECTS: &str = "policy-server-jobset-multislice";

/// The page's commands, and a shell that runs them against the control plane.
struct Page {
    commands: Vec<Command>,
    /// Where `policy-server.yaml` is, and the commands without a path of the repository run.
    scratch: PathBuf,
    overlay: PathBuf,
    path: String,
    kubeconfig: PathBuf,
}

/// What a command did.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Page {
    fn new(plane: &ControlPlane) -> Result<Page> {
        let text = page()?;
        let scratch = plane.dir.join("operations-page");
        std::fs::create_dir_all(&scratch)?;
        let yaml = fenced(&text, "A PolicyServer of its own", "yaml");
        let policy_server = yaml
            .first()
            .ok_or_else(|| anyhow!("the page's PolicyServer section has no YAML"))?;
        std::fs::write(scratch.join("policy-server.yaml"), policy_server)?;
        let kubectl = &plane.kubectl()?.binary;
        let dir = kubectl.parent().context("kubectl's folder")?;
        Ok(Page {
            commands: commands(&text),
            scratch,
            overlay: plane.dir.join("kustomize/pair"),
            path: format!(
                "{}:{}",
                dir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
            kubeconfig: plane.kubeconfig.clone(),
        })
    }

    /// The page's command of that text (the one the test table names).
    fn command(&self, key: &str) -> Result<&Command> {
        self.commands
            .iter()
            .find(|c| c.text == key)
            .ok_or_else(|| anyhow!("docs/operations.md no longer says `{key}`"))
    }

    /// Runs the page's command `key`, with `swaps` put in for the page's placeholders, in
    /// `dir` (the repository's root for a command that names its files).
    fn run(&self, key: &str, swaps: &[(&str, &str)], dir: &Path) -> Result<Ran> {
        let mut text = self.command(key)?.text.clone();
        let overlay = self.overlay.display().to_string();
        for (from, to) in [("<your overlay of examples/>", overlay.as_str())]
            .iter()
            .chain(swaps)
        {
            text = text.replace(from, to);
        }
        let out = tokio::task::block_in_place(|| {
            std::process::Command::new("timeout")
                .args(["360", "bash", "-c", &text])
                .current_dir(dir)
                .env("PATH", &self.path)
                .env("KUBECONFIG", &self.kubeconfig)
                .output()
        })?;
        Ok(Ran {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim_end().to_string(),
        })
    }

    /// Runs it and records a failure unless it exits 0; its stdout.
    fn expect_ok(&self, f: &mut Failures, key: &str, swaps: &[(&str, &str)], dir: &Path) -> String {
        match self.run(key, swaps, dir) {
            Ok(ran) if ran.ok => ran.stdout,
            Ok(ran) => {
                f.check(false, || {
                    format!("`{key}` failed: {}{}", ran.stdout, ran.stderr)
                });
                String::new()
            }
            Err(e) => {
                f.check(false, || format!("`{key}`: {e:#}"));
                String::new()
            }
        }
    }
}

/// Every case of the page, in order; each records its own outcome.
pub(crate) async fn cases(plane: &ControlPlane, report: &mut Report) {
    let began = Instant::now();
    let page = match Page::new(plane) {
        Ok(p) => p,
        Err(e) => return report.record("docs/operations.md's commands", Err(e)),
    };
    report.record(
        "operations.md smoke test, from the page: the facts it prints (JobSet v0.12 defaults groupName, so no group key), and the refusal it shows",
        smoke_test(plane, &page).await,
    );
    report.record(
        "operations.md deploy, from the page: its PolicyServer YAML applied (Deployment, PodDisruptionBudget), kubectl apply -k, kubectl wait for active, rollout status",
        deploy(plane, &page).await,
    );
    report.record(
        "operations.md troubleshooting, from the page: a policy's conditions, the PolicyServer's pods",
        troubleshooting(&page).await,
    );
    report.record(
        "operations.md from the single policy to the pair: kubectl delete clusteradmissionpolicy jobset-multislice removes its webhook, and the pair still judges",
        single_to_pair(plane, &page).await,
    );
    report.record(
        "operations.md uninstall, from the page: the policies' webhooks and the PolicyServer's objects go, a JobSet keeps its facts",
        uninstall(plane, &page).await,
    );
    let start = Instant::now();
    let again = deploy_from_nothing(plane, &page).await;
    report.record(
        &format!(
            "operations.md deploy from nothing, from the page: kubectl wait returns once both policies are active ({:.0} s), and the smoke test passes again",
            start.elapsed().as_secs_f64()
        ),
        match again {
            Ok(mut f) => smoke_test(plane, &page).await.map(|more| {
                f.0.extend(more.0);
                f
            }),
            Err(e) => Err(e),
        },
    );
    eprintln!(
        "the operations.md cases took {:.0} s",
        began.elapsed().as_secs_f64()
    );
}

async fn smoke_test(plane: &ControlPlane, page: &Page) -> Result<Failures> {
    let mut f = Failures::default();
    plane
        .cluster
        .apply(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))
        .await?;
    let root = workspace_root();
    let facts = page.command(SMOKE_FACTS)?;
    let printed = page.run(SMOKE_FACTS, &[], &root)?;
    f.check(printed.ok, || {
        format!("`{}` failed: {}", facts.text, printed.stderr)
    });
    f.eq(
        vec![printed.stdout],
        facts.output.clone(),
        "what the facts command prints",
    );
    let refusal = page.command(SMOKE_REFUSAL)?;
    let shown = refusal
        .output
        .first()
        .and_then(|o| o.strip_prefix("… "))
        .ok_or_else(|| anyhow!("the page shows no refusal after `…`"))?;
    let refused = page.run(SMOKE_REFUSAL, &[], &root)?;
    f.check(!refused.ok, || "the broken copy was accepted".into());
    f.check(refused.stderr.ends_with(shown), || {
        format!(
            "kubectl printed\n{}\nwhich does not end with the page's\n{shown}",
            refused.stderr
        )
    });
    Ok(f)
}

/// Waits until each object exists (`present`) or is gone, up to `within`; whether it came to be.
async fn until(
    cluster: &Cluster,
    objects: &[Value],
    present: bool,
    within: Duration,
) -> Result<bool> {
    let deadline = Instant::now() + within;
    loop {
        let mut all = true;
        for o in objects {
            all &= cluster.get(o).await?.is_some() == present;
        }
        if all {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn object(api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> Value {
    let mut o = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    if let Some(ns) = namespace {
        o["metadata"]["namespace"] = json!(ns);
    }
    o
}

/// What the controller makes of the page's PolicyServer: its Deployment (3 replicas, the
/// workers' env, the memory limit) and its PodDisruptionBudget (`minAvailable: 2`).
fn page_deployment() -> Value {
    object("apps/v1", "Deployment", PAGE_OBJECTS, Some("kubewarden"))
}
fn page_budget() -> Value {
    object(
        "policy/v1",
        "PodDisruptionBudget",
        PAGE_OBJECTS,
        Some("kubewarden"),
    )
}

/// The lines `kubectl wait` prints for the pair.
fn condition_met() -> String {
    ["mutate", "validate"]
        .map(|half| {
            format!("clusteradmissionpolicy.policies.kubewarden.io/jobset-multislice-{half} condition met")
        })
        .join("\n")
}

async fn deploy(plane: &ControlPlane, page: &Page) -> Result<Failures> {
    let mut f = Failures::default();
    let applied = page.expect_ok(&mut f, APPLY_POLICY_SERVER, &[], &page.scratch);
    f.eq(
        applied.lines().filter(|l| l.ends_with(" created")).count(),
        4,
        &format!("what `{APPLY_POLICY_SERVER}` created: {applied}"),
    );
    let cluster = &plane.cluster;
    let made = until(
        cluster,
        &[page_deployment(), page_budget()],
        true,
        Duration::from_secs(60),
    )
    .await?;
    f.check(made, || {
        format!("the controller made no Deployment and PodDisruptionBudget {PAGE_OBJECTS}")
    });
    if made {
        let deployment = cluster.get(&page_deployment()).await?.unwrap_or_default();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        f.eq(&deployment["spec"]["replicas"], &json!(3), "replicas");
        f.eq(
            &container["resources"]["limits"]["memory"],
            &json!("640Mi"),
            "the memory limit",
        );
        f.check(
            container["env"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| *e == json!({"name": "KUBEWARDEN_WORKERS", "value": "2"})),
            || format!("no KUBEWARDEN_WORKERS 2 in {}", container["env"]),
        );
        let budget = cluster.get(&page_budget()).await?.unwrap_or_default();
        f.eq(&budget["spec"]["minAvailable"], &json!(2), "minAvailable");
    }
    page.expect_ok(&mut f, APPLY_OVERLAY, &[], &page.scratch);
    let waited = page.expect_ok(&mut f, WAIT_ACTIVE, &[], &page.scratch);
    f.eq(waited, condition_met(), "what kubectl wait prints");
    let rolled = page.expect_ok(
        &mut f,
        ROLLOUT,
        &[(PAGE_OBJECTS, "policy-server-default")],
        &page.scratch,
    );
    f.check(
        rolled.contains("deployment \"policy-server-default\" successfully rolled out"),
        || format!("rollout status printed {rolled}"),
    );
    Ok(f)
}

async fn troubleshooting(page: &Page) -> Result<Failures> {
    let mut f = Failures::default();
    let conditions = page.expect_ok(
        &mut f,
        CONDITIONS,
        &[("NAME", "jobset-multislice-validate")],
        &page.scratch,
    );
    let conditions: Value = serde_json::from_str(&conditions).unwrap_or_default();
    f.check(
        conditions
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "PolicyUniquelyReachable" && c["status"] == "True"),
        || format!("no PolicyUniquelyReachable True in {conditions}"),
    );
    // The ReplicaSet controller makes the page's PolicyServer's three pods.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = page.run(POLICY_SERVER_PODS, &[], &page.scratch)?.stdout;
        let pods = listed
            .lines()
            .filter(|l| l.starts_with(&format!("{PAGE_OBJECTS}-")))
            .count();
        if pods == 3 {
            break;
        }
        if Instant::now() > deadline {
            f.check(false, || {
                format!("`{POLICY_SERVER_PODS}` did not list its 3 pods: {listed}")
            });
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(f)
}

async fn single_to_pair(plane: &ControlPlane, page: &Page) -> Result<Failures> {
    let mut f = Failures::default();
    let deleted = page.expect_ok(&mut f, DELETE_SINGLE, &[], &page.scratch);
    f.eq(
        deleted.as_str(),
        "clusteradmissionpolicy.policies.kubewarden.io \"jobset-multislice\" deleted",
        "what kubectl delete prints",
    );
    let hooks = "admissionregistration.k8s.io/v1";
    let single = object(
        hooks,
        "MutatingWebhookConfiguration",
        "clusterwide-jobset-multislice",
        None,
    );
    let gone = until(&plane.cluster, &[single], false, Duration::from_secs(30)).await?;
    f.check(gone, || "the single policy's webhook stayed".into());
    for (kind, name) in [
        (
            "MutatingWebhookConfiguration",
            "clusterwide-jobset-multislice-mutate",
        ),
        (
            "ValidatingWebhookConfiguration",
            "clusterwide-jobset-multislice-validate",
        ),
    ] {
        let kept = plane.cluster.get(&object(hooks, kind, name, None)).await?;
        f.check(kept.is_some(), || format!("the pair's {name} went too"));
    }
    Ok(f)
}

fn facts_of(jobset: &Value) -> Option<String> {
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"]
        ["multislice.kubewarden.io/facts"]
        .as_str()
        .map(str::to_string)
}

async fn uninstall(plane: &ControlPlane, page: &Page) -> Result<Failures> {
    let mut f = Failures::default();
    let cluster = &plane.cluster;
    // The smoke test's example, created for real: after the uninstall it keeps the facts
    // stamped at its CREATE.
    let jobset = multislice_host::fixtures::load_yaml(
        &workspace_root().join("examples/multislice-v5p.yaml"),
    )?;
    let created = cluster.create(&jobset, false).await?;
    if created.status >= 300 {
        bail!("the example JobSet was not created: {}", created.body);
    }
    let stamped = cluster.get(&jobset).await?.as_ref().and_then(facts_of);
    f.check(stamped.is_some(), || {
        "the example JobSet got no facts".into()
    });

    let deleted = page.expect_ok(&mut f, DELETE_OVERLAY, &[], &page.scratch);
    f.eq(
        deleted.lines().filter(|l| l.contains(" deleted")).count(),
        2,
        &format!("what `{DELETE_OVERLAY}` deleted: {deleted}"),
    );
    let hooks = "admissionregistration.k8s.io/v1";
    for (kind, name) in [
        (
            "MutatingWebhookConfiguration",
            "clusterwide-jobset-multislice-mutate",
        ),
        (
            "ValidatingWebhookConfiguration",
            "clusterwide-jobset-multislice-validate",
        ),
    ] {
        let hook = object(hooks, kind, name, None);
        let gone = until(cluster, &[hook], false, Duration::from_secs(30)).await?;
        f.check(gone, || format!("{kind} {name} stayed"));
    }

    let deleted = page.expect_ok(&mut f, DELETE_POLICY_SERVER, &[], &page.scratch);
    f.eq(
        deleted.lines().filter(|l| l.contains(" deleted")).count(),
        4,
        &format!("what `{DELETE_POLICY_SERVER}` deleted: {deleted}"),
    );
    for (api_version, kind) in [
        ("apps/v1", "Deployment"),
        ("v1", "Service"),
        ("v1", "Secret"),
        ("v1", "ConfigMap"),
        ("policy/v1", "PodDisruptionBudget"),
    ] {
        let it = object(api_version, kind, PAGE_OBJECTS, Some("kubewarden"));
        let gone = until(cluster, &[it], false, Duration::from_secs(60)).await?;
        f.check(gone, || format!("the PolicyServer's {kind} stayed"));
    }

    let kept = cluster.get(&jobset).await?.as_ref().and_then(facts_of);
    f.check(kept.is_some() && kept == stamped, || {
        format!("the JobSet's facts were {stamped:?}, and are {kept:?} after the uninstall")
    });
    // Gone again, so that the smoke test's dry runs are CREATEs once more.
    cluster.delete(&jobset).await?;
    let gone = until(cluster, &[jobset], false, Duration::from_secs(60)).await?;
    f.check(gone, || "the example JobSet was not deleted".into());
    Ok(f)
}

async fn deploy_from_nothing(plane: &ControlPlane, page: &Page) -> Result<Failures> {
    let mut f = Failures::default();
    page.expect_ok(&mut f, APPLY_POLICY_SERVER, &[], &page.scratch);
    page.expect_ok(&mut f, APPLY_OVERLAY, &[], &page.scratch);
    let waited = page.expect_ok(&mut f, WAIT_ACTIVE, &[], &page.scratch);
    if waited != condition_met() {
        let pods = pods_of_default(plane).await;
        f.check(false, || {
            format!("the kubewarden namespace's pods then: {pods}")
        });
    }
    f.eq(waited, condition_met(), "what kubectl wait prints");
    Ok(f)
}

/// Each pod of the kubewarden namespace: what a failed wait is read against.
async fn pods_of_default(plane: &ControlPlane) -> String {
    match plane
        .cluster
        .list("v1", "Pod", Some("kubewarden"), None)
        .await
    {
        Ok(pods) => pods
            .iter()
            .map(|p| {
                let conditions: Vec<_> = p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| json!([c["type"], c["status"], c["message"]]))
                    .collect();
                json!({
                    "name": p["metadata"]["name"],
                    "deleting": p["metadata"]["deletionTimestamp"],
                    "node": p["spec"]["nodeName"],
                    "phase": p["status"]["phase"],
                    "conditions": conditions,
                })
                .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("not listed: {e:#}"),
    }
}
