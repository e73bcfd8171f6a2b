//! Kubewarden's audit scanner on the control plane (`make cluster-test`'s part `audit`), as
//! Kubewarden's chart 5.13.0 runs it, so that the Reports it stores can be read: the report
//! CRDs from the modules (its own `wgpolicyk8s.io` ones, and `openreports.io` of
//! github.com/openreports/reports-api, which it requires), the chart's `audit-scanner`
//! ServiceAccount bound as the chart binds it (`view`, and the chart's ClusterRole, written here
//! in the chart's shape), a token of that ServiceAccount from the API server's TokenRequest, and
//! a run against policy-server on loopback (`-u`, `--insecure-ssl`: its certificate names the
//! Service), on that token. It is built and run only where kwctl and policy-server are found:
//! `.ci/kubewarden` decides, and prints one `skipped:` line elsewhere.
use crate::modules::{crd_files, module_dir};
use crate::plane::ControlPlane;
use crate::policy_server::NAMESPACE;
use crate::procs::{Process, Supervision};
use anyhow::{anyhow, bail, Context, Result};
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The chart's ServiceAccount of the scanner (`auditScanner.serviceAccountName`), in the
/// release's namespace.
pub const SERVICE_ACCOUNT: &str = "audit-scanner";
/// The chart's own ClusterRole of the scanner: Kubewarden's policies and the reports.
pub const CHART_ROLE: &str = "audit-scanner-cluster-role";
/// How long one scan may take before it is stopped.
const SCAN_WITHIN: Duration = Duration::from_secs(300);
const STEP: &str = "the audit scanner's cases (cluster-test part audit)";

/// The scanner's binary, built by `cluster/deps.sh audit-scanner` where `.ci/kubewarden` finds
/// kwctl and policy-server; `None` (after its `skipped:` line) where it does not, or where
/// `CLUSTER_HOST=policy-host` puts the project's host in policy-server's place (it serves no
/// `/audit`).
pub fn scanner() -> Result<Option<PathBuf>> {
    if std::env::var("CLUSTER_HOST").is_ok_and(|h| h == "policy-host") {
        println!("skipped: {STEP} needs policy-server as the policy's host, not CLUSTER_HOST=policy-host");
        return Ok(None);
    }
    let root = workspace_root();
    let out = std::process::Command::new(root.join(".ci/kubewarden"))
        .args(["step", STEP, "kwctl", "policy-server", "--", "bash"])
        .arg(root.join("cluster/deps.sh"))
        .arg("audit-scanner")
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("cannot run .ci/kubewarden")?;
    let text = String::from_utf8(out.stdout)?;
    let mut binary = None;
    for line in text.lines() {
        match line.strip_prefix("audit-scanner=") {
            Some(path) => binary = Some(PathBuf::from(path)),
            None => println!("{line}"),
        }
    }
    if !out.status.success() {
        bail!("{STEP}: .ci/kubewarden exited with {}", out.status);
    }
    Ok(binary)
}

/// The report CRDs, as kubewarden-crds installs them with both of its report flags: the
/// scanner's `wgpolicyk8s.io` ones and reports-api's `openreports.io` ones, from the module
/// cache.
pub async fn install_report_crds(plane: &ControlPlane) -> Result<()> {
    let mut files = Vec::new();
    for module in [
        "github.com/kubewarden/audit-scanner",
        "github.com/openreports/reports-api",
    ] {
        files.extend(crd_files(
            &module_dir("audit-scanner", module)?.join("config/crd"),
        )?);
    }
    for file in &files {
        plane.cluster.apply_yaml_file(file).await?;
    }
    for file in &files {
        let crd = multislice_host::fixtures::load_yaml(file)?;
        let name = crd["metadata"]["name"]
            .as_str()
            .with_context(|| format!("{}: no name", file.display()))?;
        plane.cluster.wait_crd_established(name).await?;
    }
    Ok(())
}

/// The chart's ServiceAccount and its two ClusterRoleBindings (to `view`, and to the chart's
/// ClusterRole), then a kubeconfig with a token of that ServiceAccount; returns its path.
pub async fn chart_identity(plane: &ControlPlane) -> Result<PathBuf> {
    let cluster = &plane.cluster;
    cluster
        .apply(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}}))
        .await?;
    let read = ["get", "list", "watch"];
    let write = [
        "create",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    cluster
        .apply(&json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": CHART_ROLE},
            "rules": [
                {"apiGroups": ["policies.kubewarden.io"], "verbs": read, "resources": [
                    "clusteradmissionpolicies", "clusteradmissionpolicygroups",
                    "admissionpolicies", "admissionpolicygroups",
                    "clusteradmissionpolicies/status", "clusteradmissionpolicygroups/status",
                    "admissionpolicies/status", "admissionpolicygroups/status",
                    "policyservers", "policyservers/status"]},
                {"apiGroups": ["wgpolicyk8s.io"], "verbs": write,
                 "resources": ["policyreports", "clusterpolicyreports"]},
                {"apiGroups": ["openreports.io"], "verbs": write,
                 "resources": ["reports", "clusterreports"]},
            ],
        }))
        .await?;
    for (binding, role) in [
        ("audit-scanner-cluster-role-viewer", "view"),
        (CHART_ROLE, CHART_ROLE),
    ] {
        cluster
            .apply(&json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": binding},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                              "namespace": NAMESPACE}],
            }))
            .await?;
    }
    let path = format!("/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token");
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        }))?)?;
    let answer: Value = cluster.client.request(request).await?;
    let token = answer["status"]["token"]
        .as_str()
        .ok_or_else(|| anyhow!("the TokenRequest gave no token: {answer}"))?;
    let kubeconfig = plane.dir.join("audit-scanner.kubeconfig");
    let user = format!("system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}");
    std::fs::write(&kubeconfig, plane.token_kubeconfig(&user, token))?;
    Ok(kubeconfig)
}

/// One scan, with the chart's arguments (`--report-kind openreports` among them) and `-u` at
/// policy-server's process on loopback, as the user of `kubeconfig`; returns its log (JSON
/// lines) once it exits 0. `n` numbers the runs, each with a log of its own.
pub async fn scan(
    plane: &ControlPlane,
    binary: &Path,
    kubeconfig: &Path,
    n: usize,
) -> Result<String> {
    let host = plane
        .host
        .as_ref()
        .ok_or_else(|| anyhow!("no policies are installed"))?;
    if host.binary().name() != "policy-server" {
        bail!(
            "the audit scanner needs policy-server, which serves /audit; the host is {}",
            host.binary().name()
        );
    }
    let address = host
        .served_address()
        .ok_or_else(|| anyhow!("no policy-server pod is Ready"))?;
    let args: Vec<String> = [
        "--kubewarden-namespace",
        NAMESPACE,
        "--loglevel",
        "info",
        "--parallel-namespaces",
        "1",
        "--parallel-resources",
        "100",
        "--parallel-policies",
        "5",
        "--page-size",
        "100",
        "--report-kind",
        "openreports",
        "--insecure-ssl",
        "-u",
        &format!("https://{address}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let logs = plane.logs();
    let supervision = Supervision {
        logs: &logs,
        lifetime: SCAN_WITHIN,
    };
    let name = format!("audit-scanner-{n}");
    let env = [("KUBECONFIG", kubeconfig.display().to_string())];
    let mut process = Process::spawn(&name, binary, &args, &env, &supervision)?;
    let deadline = Instant::now() + SCAN_WITHIN + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = process.exited() {
            break status;
        }
        if Instant::now() > deadline {
            bail!(
                "{name} did not end within {SCAN_WITHIN:?}:\n{}",
                process.tail(20)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    if !status.success() {
        bail!("{name} exited ({status}):\n{}", process.tail(20));
    }
    Ok(std::fs::read_to_string(&process.log)?)
}
