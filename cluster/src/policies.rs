//! The policies on the control plane, installed as an operator installs them: real
//! `kubectl apply -k` of a kustomization over examples/ (each variant: the pair, the pair with
//! the queue check, the single policy, the namespaced policy), then Kubewarden's controller
//! does the rest (kubewarden.rs). Each apply goes through a small kustomization written into the
//! control plane's folder, whose base is a test kustomization of `cluster/kustomize/` or a
//! folder of examples/, and which only sets `module:` to the local build (a `file://` URL), and
//! where a case asks, a name suffix, settings and the namespaces it judges.
//!
//! By default the control plane runs the recommended deployment, the pair, and the single
//! `both` policy beside it: a namespace label chooses which one a namespace sees. Where the
//! settings turn the queue check on, the pair is the queue-check pair.
//! `CLUSTER_DEPLOYMENT=single` installs only the single policy, everywhere: the deployment of a
//! module that has no `role` setting.
use crate::kube_api::Cluster;
use anyhow::{anyhow, bail, Context, Result};
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The namespace Kubewarden's controller keeps out of every policy (its own).
pub const KUBEWARDEN_NAMESPACE: &str = crate::policy_server::NAMESPACE;

/// The single policy, role `both` (Kubewarden names its configuration `clusterwide-<name>`).
pub const SINGLE_MANIFEST: &str = "examples/single/cluster-admission-policy.yaml";
/// The pair: the mutating policy, then the validating one.
pub const PAIR_MANIFESTS: [&str; 2] = [
    "examples/cluster-admission-policy-mutate.yaml",
    "examples/cluster-admission-policy-validate.yaml",
];
/// The namespaced policy (`namespaced-<namespace>-<name>`), installed by a case that asks.
pub const NAMESPACED_MANIFEST: &str = "examples/namespaced/admission-policy.yaml";

/// The test's device for running both deployments on one control plane: a namespace labelled
/// with this key is judged by the single policy (`single`) or by no cluster-wide policy of the
/// deployment (`none`: a namespaced policy alone, or policies a case installs for it); an
/// unlabelled one by the pair. `cluster/kustomize/` scopes each variant by it. A cluster runs
/// one deployment and needs no such label.
pub const DEPLOYMENT_LABEL: &str = "multislice.test/deployment";
pub const SINGLE: &str = "single";
pub const NONE: &str = "none";

/// What examples/ deploys, each from its own kustomization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// examples/: the mutating and the validating policy.
    Pair,
    /// examples/ with the queue-check component on the validating policy.
    QueueCheck,
    /// examples/single/: the single policy, role `both`.
    Single,
    /// examples/namespaced/: the AdmissionPolicy of namespace `training`.
    Namespaced,
}

impl Variant {
    /// Its kustomization folder of examples/, and the components it adds.
    fn examples(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Variant::Pair => ("examples", &[]),
            Variant::QueueCheck => ("examples", &["examples/queue-check"]),
            Variant::Single => ("examples/single", &[]),
            Variant::Namespaced => ("examples/namespaced", &[]),
        }
    }
}

/// Which cluster-wide policies the control plane installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deployment {
    /// The pair where no label says otherwise, and the single policy in `single` namespaces.
    Pair,
    /// Only the single policy, in every namespace but `none` ones.
    Single,
}

impl Deployment {
    /// `CLUSTER_DEPLOYMENT`: `pair` (the default) or `single`.
    pub fn from_env() -> Result<Deployment> {
        match std::env::var("CLUSTER_DEPLOYMENT")
            .unwrap_or_default()
            .as_str()
        {
            "" | "pair" => Ok(Deployment::Pair),
            "single" => Ok(Deployment::Single),
            other => bail!("CLUSTER_DEPLOYMENT is `pair` or `single`, not {other:?}"),
        }
    }

    /// The test kustomizations it applies (cluster/kustomize/), each scoped by
    /// [`DEPLOYMENT_LABEL`]; the queue-check pair in place of the pair when `queue_check`.
    pub(crate) fn kustomizations(self, queue_check: bool) -> Vec<&'static str> {
        match (self, queue_check) {
            (Deployment::Pair, false) => vec!["cluster/kustomize/pair", "cluster/kustomize/single"],
            (Deployment::Pair, true) => {
                vec!["cluster/kustomize/queue-check", "cluster/kustomize/single"]
            }
            (Deployment::Single, _) => vec!["cluster/kustomize/single-everywhere"],
        }
    }
}

/// A kustomization of ours written into the control plane's folder over a base, which sets the
/// module and, where a case asks, a name suffix, settings and a scope.
#[derive(Debug, Clone)]
pub struct Overlay {
    /// The folder it is written to (its name is the overlay's).
    pub dir: PathBuf,
    /// A test kustomization (cluster/kustomize/…) or a folder of examples/, from the root.
    pub base: String,
    pub components: Vec<String>,
    pub suffix: Option<String>,
    /// Merged into every policy's `spec.settings` (its `role` left out: a pair's halves keep
    /// theirs).
    pub settings: Option<Value>,
    /// matchExpressions added to every policy's namespaceSelector.
    pub scope: Vec<Value>,
    /// The policies' kind, for the settings patch.
    pub kind: &'static str,
}

impl Overlay {
    /// A test kustomization of cluster/kustomize/ as it is, with the local module.
    pub fn of_test_kustomization(root: &Path, base: &str) -> Overlay {
        Overlay {
            dir: root.join(base.rsplit('/').next().unwrap_or(base)),
            base: base.to_string(),
            components: Vec::new(),
            suffix: None,
            settings: None,
            scope: Vec::new(),
            kind: "ClusterAdmissionPolicy",
        }
    }

    /// A variant of examples/ under a name of its own, for the namespaces of `scope`.
    pub fn of_variant(root: &Path, variant: Variant, suffix: Option<&str>) -> Overlay {
        let (base, components) = variant.examples();
        let name = format!("{variant:?}-{}", suffix.unwrap_or("examples")).to_lowercase();
        Overlay {
            dir: root.join(name),
            base: base.to_string(),
            components: components.iter().map(|c| c.to_string()).collect(),
            suffix: suffix.map(str::to_string),
            settings: None,
            scope: Vec::new(),
            kind: if variant == Variant::Namespaced {
                "AdmissionPolicy"
            } else {
                "ClusterAdmissionPolicy"
            },
        }
    }

    /// Writes its kustomization.yaml, with `module` as every policy's module.
    pub fn write(&self, module: &Path) -> Result<()> {
        // kustomize takes no absolute path for a base: each is reached from the overlay's
        // folder, up to `/` and down again.
        let up = "../".repeat(self.dir.components().count().saturating_sub(1));
        let root = workspace_root();
        let abs = |p: &str| {
            let path = root.join(p).display().to_string();
            format!("{up}{}", path.trim_start_matches('/'))
        };
        let target = json!({"group": "policies.kubewarden.io"});
        let mut patches = vec![json!({
            "target": target,
            "patch": json!([{"op": "add", "path": "/spec/module",
                             "value": format!("file://{}", module.display())}]).to_string(),
        })];
        if let Some(settings) = &self.settings {
            let mut settings = settings.clone();
            if let Some(map) = settings.as_object_mut() {
                map.remove("role");
            }
            patches.push(json!({
                "target": target,
                "patch": json!({"apiVersion": "policies.kubewarden.io/v1", "kind": self.kind,
                                "metadata": {"name": "settings"},
                                "spec": {"settings": settings}}).to_string(),
            }));
        }
        for expression in &self.scope {
            patches.push(json!({
                "target": target,
                "patch": json!([{"op": "add", "path": "/spec/namespaceSelector/matchExpressions/-",
                                 "value": expression}]).to_string(),
            }));
        }
        let mut kustomization = json!({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [abs(&self.base)],
            "patches": patches,
        });
        if !self.components.is_empty() {
            kustomization["components"] =
                json!(self.components.iter().map(|c| abs(c)).collect::<Vec<_>>());
        }
        if let Some(suffix) = &self.suffix {
            kustomization["nameSuffix"] = json!(format!("-{suffix}"));
        }
        std::fs::create_dir_all(&self.dir)?;
        std::fs::write(
            self.dir.join("kustomization.yaml"),
            serde_yaml::to_string(&kustomization)?,
        )?;
        Ok(())
    }
}

/// kubectl, built from k8s.io/kubernetes by `cluster/deps.sh`, against the control plane.
#[derive(Debug, Clone)]
pub struct Kubectl {
    pub binary: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Kubectl {
    /// Runs kubectl; its stdout, or an error with what it printed.
    pub fn run(&self, args: &[&str]) -> Result<String> {
        let out = std::process::Command::new(&self.binary)
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(args)
            .output()
            .with_context(|| format!("cannot run {}", self.binary.display()))?;
        if !out.status.success() {
            bail!(
                "kubectl {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8(out.stdout)?)
    }

    /// `kubectl apply -k <dir>`, then what it applied (`kubectl kustomize <dir>`).
    pub fn apply_k(&self, dir: &Path) -> Result<Vec<Value>> {
        let d = dir.display().to_string();
        self.run(&["apply", "-k", &d])?;
        self.kustomize(dir)
    }

    /// What a kustomization renders.
    pub fn kustomize(&self, dir: &Path) -> Result<Vec<Value>> {
        let text = self.run(&["kustomize", &dir.display().to_string()])?;
        Ok(multislice_host::preview::yaml_documents(&text)?
            .into_iter()
            .filter(Value::is_object)
            .collect())
    }
}

/// A policy manifest (a file of examples/, read as it is).
#[derive(Debug, Clone)]
pub struct Manifest {
    pub path: String,
    pub value: Value,
}

impl Manifest {
    pub fn load(path: &str) -> Result<Manifest> {
        let value = multislice_host::fixtures::load_yaml(&workspace_root().join(path))?;
        Ok(Manifest {
            path: path.to_string(),
            value,
        })
    }
}

/// Kubewarden's name for a policy: its webhook configuration's, and the `<id>` of its path.
pub fn unique_name(policy: &Value) -> Result<String> {
    let name = policy["metadata"]["name"]
        .as_str()
        .ok_or_else(|| anyhow!("a policy without a name"))?;
    Ok(match policy["kind"].as_str() {
        Some("ClusterAdmissionPolicy") => format!("clusterwide-{name}"),
        Some("AdmissionPolicy") => format!(
            "namespaced-{}-{name}",
            policy["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
        ),
        other => bail!("{other:?} is not a Kubewarden policy"),
    })
}

/// The file of examples/ a rendered policy comes from, by its name before any suffix.
pub fn source_of(policy: &Value, suffix: Option<&str>) -> String {
    let name = policy["metadata"]["name"].as_str().unwrap_or_default();
    let name = suffix
        .and_then(|s| name.strip_suffix(&format!("-{s}")))
        .unwrap_or(name);
    match (policy["kind"].as_str(), name) {
        (_, "jobset-multislice-mutate") => PAIR_MANIFESTS[0].to_string(),
        (_, "jobset-multislice-validate") => PAIR_MANIFESTS[1].to_string(),
        (Some("AdmissionPolicy"), _) => NAMESPACED_MANIFEST.to_string(),
        _ => SINGLE_MANIFEST.to_string(),
    }
}

/// One installed policy: what kubectl applied, and the names Kubewarden's controller gave it.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The file of examples/ it comes from.
    pub manifest: String,
    /// Its webhook configuration (`clusterwide-<policy>`, `namespaced-<ns>-<policy>`).
    pub configuration: String,
    /// The one webhook of that configuration.
    pub webhook: String,
    pub mutating: bool,
    /// Its settings, as applied (`{}` for none).
    pub settings: Value,
    /// The policy as kustomize rendered it.
    pub object: Value,
}

/// Where the webhook configuration the controller wrote says something else than the policy
/// kubectl applied: the matchConditions (dropped where the controller found the API server
/// without them), the rules, the failure policy, the timeout, and the namespaceSelector (the
/// controller keeps only a cluster-wide policy's matchExpressions, after its own namespace's
/// exclusion). Each difference in one line.
pub fn disagreements(policy: &Value, webhook: &Value) -> Vec<String> {
    let spec = &policy["spec"];
    let name = policy["metadata"]["name"].as_str().unwrap_or_default();
    let mut out = Vec::new();
    let mut same = |field: &str, wanted: Value, written: &Value| {
        if &wanted != written {
            out.push(format!(
                "{name}: the controller wrote {field} {written}, the policy says {wanted}"
            ));
        }
    };
    let or = |v: &Value, default: Value| if v.is_null() { default } else { v.clone() };
    same(
        "matchConditions",
        or(&spec["matchConditions"], Value::Null),
        &webhook["matchConditions"],
    );
    same(
        "failurePolicy",
        or(&spec["failurePolicy"], json!("Fail")),
        &webhook["failurePolicy"],
    );
    same(
        "timeoutSeconds",
        or(&spec["timeoutSeconds"], json!(10)),
        &webhook["timeoutSeconds"],
    );
    if policy["kind"] == "ClusterAdmissionPolicy" {
        // The API server stores a rule's default scope, `*`.
        let mut rules = spec["rules"].clone();
        for rule in rules.as_array_mut().into_iter().flatten() {
            if rule["scope"].is_null() {
                rule["scope"] = json!("*");
            }
        }
        same("rules", rules, &webhook["rules"]);
        let selector = &spec["namespaceSelector"];
        if !selector["matchLabels"].is_null() {
            out.push(format!(
                "{name}: namespaceSelector.matchLabels {} is dropped by the controller (v1.31 keeps only matchExpressions)",
                selector["matchLabels"]
            ));
        }
        let written = webhook["namespaceSelector"]["matchExpressions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for expression in selector["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if !written.contains(expression) {
                out.push(format!(
                    "{name}: the namespaceSelector expression {expression} is not in the written {written:?}"
                ));
            }
        }
    }
    out
}

/// Creates a namespace (if missing) and labels it for a deployment (`Some(SINGLE)`,
/// `Some(NONE)`), or for the pair (`None`). The label is a merge patch, not part of the
/// server-side apply: `run::submit` applies each object's namespace again, by name only, and
/// would take off a label it had applied.
pub async fn namespace(cluster: &Cluster, name: &str, deployment: Option<&str>) -> Result<()> {
    let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    cluster.apply(&object).await?;
    cluster
        .patch_merge(
            &object,
            &json!({"metadata": {"labels": {DEPLOYMENT_LABEL: deployment}}}),
        )
        .await
}
