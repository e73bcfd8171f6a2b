//! The policies on the control plane, installed as Kubewarden's controller installs them: for
//! each (Cluster)AdmissionPolicy manifest of examples/, a webhook configuration named as the
//! controller names it (kubewarden-controller's policy_subreconciler_webhook.go), and the
//! policy served at its path by one webhook server of the host crate, with the manifest's
//! settings and its `mutating` flag.
//!
//! By default the control plane runs the recommended deployment, the pair (a mutating and a
//! validating ClusterAdmissionPolicy from one module), and the single `both` policy beside it:
//! a namespace label chooses which one a namespace sees. `CLUSTER_DEPLOYMENT=single` installs
//! only the single policy, everywhere: the deployment of a module that has no `role` setting.
use crate::kube_api::Cluster;
use anyhow::{anyhow, bail, Result};
use multislice_host::workspace_root;
use serde_json::{json, Value};

/// The namespace Kubewarden's controller keeps out of every policy (its own).
pub const KUBEWARDEN_NAMESPACE: &str = "kubewarden";

/// The single policy, role `both` (Kubewarden names its configuration `clusterwide-<name>`).
pub const SINGLE_MANIFEST: &str = "examples/cluster-admission-policy.yaml";
/// The pair: the mutating policy, then the validating one.
pub const PAIR_MANIFESTS: [&str; 2] = [
    "examples/cluster-admission-policy-mutate.yaml",
    "examples/cluster-admission-policy-validate.yaml",
];
/// The namespaced policy (`namespaced-<namespace>-<name>`), installed by a case that asks.
pub const NAMESPACED_MANIFEST: &str = "examples/admission-policy.yaml";

/// The test's device for running both deployments on one control plane: a namespace labelled
/// with this key is judged by the single policy (`single`) or by no cluster-wide policy at all
/// (`none`, for a namespaced policy alone); every other namespace by the pair. A cluster runs
/// one deployment and needs no such label.
pub const DEPLOYMENT_LABEL: &str = "multislice.test/deployment";
pub const SINGLE: &str = "single";
pub const NONE: &str = "none";

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

    /// Each manifest it installs, with the matchExpressions that scope it to its namespaces.
    pub(crate) fn manifests(self) -> Vec<(&'static str, Vec<Value>)> {
        let label = |operator: &str, values: &[&str]| {
            vec![json!({"key": DEPLOYMENT_LABEL, "operator": operator, "values": values})]
        };
        match self {
            Deployment::Pair => {
                let mut out: Vec<(&str, Vec<Value>)> = PAIR_MANIFESTS
                    .iter()
                    .map(|m| (*m, label("NotIn", &[SINGLE, NONE])))
                    .collect();
                out.push((SINGLE_MANIFEST, label("In", &[SINGLE])));
                out
            }
            Deployment::Single => vec![(SINGLE_MANIFEST, label("NotIn", &[NONE]))],
        }
    }
}

/// A policy manifest of examples/.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub path: String,
    pub value: Value,
}

impl Manifest {
    pub fn load(path: &str) -> Result<Manifest> {
        let value = multislice_host::fixtures::load_yaml(&workspace_root().join(path))?;
        let manifest = Manifest {
            path: path.to_string(),
            value,
        };
        manifest.name()?;
        Ok(manifest)
    }

    fn name(&self) -> Result<&str> {
        self.value["metadata"]["name"]
            .as_str()
            .ok_or_else(|| anyhow!("{} has no name", self.path))
    }

    pub fn mutating(&self) -> bool {
        self.value["spec"]["mutating"] == json!(true)
    }

    /// The namespace of an AdmissionPolicy; `None` for a ClusterAdmissionPolicy.
    fn namespace(&self) -> Result<Option<&str>> {
        match self.value["kind"].as_str() {
            Some("ClusterAdmissionPolicy") => Ok(None),
            Some("AdmissionPolicy") => self.value["metadata"]["namespace"]
                .as_str()
                .map(Some)
                .ok_or_else(|| anyhow!("{} has no namespace", self.path)),
            other => bail!("{}: {other:?} is not a Kubewarden policy", self.path),
        }
    }

    /// Kubewarden's name for the policy: its configuration's, and the `<id>` of its path.
    pub fn unique_name(&self) -> Result<String> {
        Ok(match self.namespace()? {
            None => format!("clusterwide-{}", self.name()?),
            Some(namespace) => format!("namespaced-{namespace}-{}", self.name()?),
        })
    }

    /// The settings it runs with: the manifest's, or `overriding` with the manifest's `role`
    /// kept (a pair's two policies differ only in it).
    pub fn settings(&self, overriding: Option<&Value>) -> Value {
        let own = match &self.value["spec"]["settings"] {
            Value::Null => json!({}),
            s => s.clone(),
        };
        let Some(overriding) = overriding else {
            return own;
        };
        let mut settings = overriding.clone();
        if let (Some(map), Some(role)) = (settings.as_object_mut(), own.get("role")) {
            map.insert("role".to_string(), role.clone());
        }
        settings
    }

    /// The MutatingWebhookConfiguration (`mutating: true`) or ValidatingWebhookConfiguration
    /// Kubewarden's controller makes for the policy, with a URL on loopback where a cluster has
    /// the policy-server Service. `scope` adds matchExpressions to its namespaceSelector.
    pub fn webhook_configuration(
        &self,
        url: &str,
        ca_bundle: &str,
        scope: &[Value],
    ) -> Result<Value> {
        let spec = &self.value["spec"];
        let unique_name = self.unique_name()?;
        let namespace = self.namespace()?;
        let (rules, selector) = match namespace {
            // The controller puts its own namespace's exclusion first, then the policy's.
            None => {
                let mut expressions = vec![json!({
                    "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                    "values": [KUBEWARDEN_NAMESPACE],
                })];
                if let Some(own) = spec["namespaceSelector"]["matchExpressions"].as_array() {
                    expressions.extend(own.iter().cloned());
                }
                expressions.extend(scope.iter().cloned());
                (
                    spec["rules"].clone(),
                    json!({"matchExpressions": expressions}),
                )
            }
            // An AdmissionPolicy: its namespace alone, and namespaced resources only.
            Some(namespace) => {
                let mut rules = spec["rules"].clone();
                for rule in rules.as_array_mut().into_iter().flatten() {
                    rule["scope"] = json!("Namespaced");
                }
                let mut selector =
                    json!({"matchLabels": {"kubernetes.io/metadata.name": namespace}});
                if !scope.is_empty() {
                    selector["matchExpressions"] = json!(scope);
                }
                (rules, selector)
            }
        };
        let mut webhook = json!({
            "name": format!("{unique_name}.kubewarden.admission"),
            "clientConfig": {"url": url, "caBundle": ca_bundle},
            "rules": rules,
            "failurePolicy": spec.get("failurePolicy").cloned().unwrap_or(json!("Fail")),
            "namespaceSelector": selector,
            "sideEffects": spec.get("sideEffects").cloned().unwrap_or(json!("None")),
            "timeoutSeconds": spec.get("timeoutSeconds").cloned().unwrap_or(json!(10)),
            "admissionReviewVersions": ["v1"],
        });
        for key in ["matchPolicy", "objectSelector", "matchConditions"] {
            if let Some(v) = spec.get(key) {
                webhook[key] = v.clone();
            }
        }
        let kind = if self.mutating() {
            "MutatingWebhookConfiguration"
        } else {
            "ValidatingWebhookConfiguration"
        };
        Ok(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {
                "name": unique_name,
                "labels": {"app.kubernetes.io/part-of": "kubewarden"},
                "annotations": {
                    "kubewardenPolicyName": self.name()?,
                    "kubewardenPolicyNamespace": namespace.unwrap_or(""),
                },
            },
            "webhooks": [webhook],
        }))
    }
}

/// One installed policy: its configuration's and its webhook's names.
#[derive(Debug, Clone)]
pub struct Installed {
    pub manifest: String,
    pub configuration: String,
    pub webhook: String,
    pub mutating: bool,
    pub settings: Value,
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
