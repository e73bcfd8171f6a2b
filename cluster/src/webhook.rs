//! Our policies on the control plane: each policy of the deployment installed as Kubewarden's
//! controller installs it (its manifest and webhook configuration: policies.rs), and served by
//! the policy's host (host.rs), one process for every policy, logging every review it answers.
use crate::host::{Host, Surroundings};
use crate::plane::ControlPlane;
use crate::policies::{Deployment, Installed, Manifest};
use anyhow::Result;
use multislice_host::capabilities::allowed_by_file;
use multislice_host::workspace_root;
use serde_json::Value;
use std::path::Path;
use std::time::Instant;

/// The policies of the deployment: each manifest's entry in the host's file, the host started,
/// then each webhook configuration, pointed at its path.
pub(crate) async fn install_policies(
    plane: &mut ControlPlane,
    overriding: Option<Value>,
    deployment: Deployment,
) -> Result<()> {
    let around = Surroundings {
        dir: plane.dir.clone(),
        logs: plane.logs(),
        cert: plane.pki.serving_cert(),
        key: plane.pki.serving_key(),
        reviews: plane.reviews.clone(),
        kubeconfig: plane.kubeconfig.clone(),
        until: Instant::now() + plane.remaining(),
    };
    let mut host = Host::new(around, overriding)?;
    let mut pending = Vec::new();
    for (path, scope) in deployment.manifests() {
        let manifest = Manifest::load(path)?;
        let overriding = host.overriding.clone();
        pending.push(prepare(&mut host, manifest, overriding.as_ref())?.with_scope(scope));
    }
    plane.host = Some(host);
    plane.deployment = deployment;
    plane.start_host().await?;
    for p in pending {
        let installed = plane.apply_configuration(p).await?;
        // The webhook whose verdicts a namespace of the deployment sees: the validating
        // one of the pair, or the single policy.
        if !installed.mutating || deployment == Deployment::Single {
            plane.webhook_name = installed.webhook.clone();
            plane.settings = installed.settings.clone();
        }
    }
    Ok(())
}

/// A policy entered in the host's file, its webhook configuration not yet applied.
struct Pending {
    manifest: Manifest,
    id: String,
    settings: Value,
    scope: Vec<Value>,
}

impl Pending {
    fn with_scope(mut self, scope: Vec<Value>) -> Pending {
        self.scope = scope;
        self
    }
}

/// Enters a manifest's policy in the host's file, with `overriding` settings (its `role` kept)
/// and what the queue check needs granted.
fn prepare(host: &mut Host, mut manifest: Manifest, overriding: Option<&Value>) -> Result<Pending> {
    let settings = manifest.settings(overriding);
    grant_queue_check(&mut manifest.value, &settings)?;
    let id = manifest.unique_name()?;
    let context_aware = match manifest.value["kind"].as_str() {
        // policy-server grants what a ClusterAdmissionPolicy lists; an AdmissionPolicy's spec
        // has no such field.
        Some("ClusterAdmissionPolicy") => manifest.value["spec"]["contextAwareResources"].clone(),
        _ => Value::Null,
    };
    host.set(&id, &settings, manifest.mutating(), &context_aware)?;
    Ok(Pending {
        manifest,
        id,
        settings,
        scope: Vec::new(),
    })
}

/// The calls that do to the policy's host what an outage and an operator do; they stay the
/// same whatever runs behind them, and each returns once the host answers, or says why not.
impl ControlPlane {
    pub(crate) fn host_mut(&mut self) -> Result<&mut Host> {
        self.host
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("this control plane runs without our policies"))
    }

    /// Starts the host with what is installed (the first start, or after [`Self::kill_host`]),
    /// on the same address, and returns once it serves.
    pub async fn start_host(&mut self) -> Result<()> {
        let host = self.host_mut()?;
        tokio::task::block_in_place(|| host.start())
    }

    /// SIGKILLs the host's process, as an OOM kill or a lost node does: no answer to requests in
    /// flight, and the webhook configurations left in place, so that the API server's calls
    /// fail until [`Self::start_host`].
    pub async fn kill_host(&mut self) -> Result<()> {
        let host = self.host_mut()?;
        tokio::task::block_in_place(|| host.kill())
    }

    /// Every installed policy runs `module` from now on: the upgrade or rollback an operator
    /// makes by changing `module:` in the manifests and applying them. The host serves the old
    /// module until the new one is ready, then the new one alone.
    pub async fn swap_module(&mut self, module: &Path) -> Result<()> {
        let host = self.host_mut()?;
        host.set_module(module)?;
        tokio::task::block_in_place(|| host.reload())
    }

    /// The webhook of an installed manifest (such as [`crate::policies::SINGLE_MANIFEST`]).
    pub fn webhook_of(&self, manifest: &str) -> Option<&str> {
        self.installed
            .iter()
            .find(|i| i.manifest == manifest)
            .map(|i| i.webhook.as_str())
    }

    /// Installs one more policy manifest (such as [`crate::policies::NAMESPACED_MANIFEST`]) on
    /// the running host, with the control plane's settings override, scoped by `scope`.
    pub async fn install_policy(&mut self, path: &str, scope: &[Value]) -> Result<Installed> {
        let host = self.host_mut()?;
        let overriding = host.overriding.clone();
        let pending = prepare(host, Manifest::load(path)?, overriding.as_ref())?;
        self.serve_and_apply(pending.with_scope(scope.to_vec()))
            .await
    }

    /// Installs a policy manifest once more under a name of its own (`<name>-<suffix>`), with
    /// `settings` (the manifest's `role` kept) in place of the control plane's, scoped by
    /// `scope`: the policies of a namespace whose objects carry settings of their own (a rule
    /// fixture's, test_data/rules/expected.yaml).
    pub async fn install_policy_with(
        &mut self,
        path: &str,
        suffix: &str,
        settings: &Value,
        scope: &[Value],
    ) -> Result<Installed> {
        let mut manifest = Manifest::load(path)?;
        let name = manifest.value["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        manifest.value["metadata"]["name"] = Value::String(format!("{name}-{suffix}"));
        let pending = prepare(self.host_mut()?, manifest, Some(settings))?;
        self.serve_and_apply(pending.with_scope(scope.to_vec()))
            .await
    }

    /// The host serves the new entry (a reload, no gap), then the API server calls it.
    async fn serve_and_apply(&mut self, pending: Pending) -> Result<Installed> {
        let host = self.host_mut()?;
        tokio::task::block_in_place(|| host.reload())?;
        self.apply_configuration(pending).await
    }

    async fn apply_configuration(&mut self, pending: Pending) -> Result<Installed> {
        let host = self.host_mut()?;
        let url = host.url(&pending.id);
        let configuration = pending.manifest.webhook_configuration(
            &url,
            &self.pki.ca_bundle_base64()?,
            &pending.scope,
        )?;
        self.cluster.apply(&configuration).await?;
        let installed = Installed {
            manifest: pending.manifest.path.clone(),
            configuration: pending.id,
            webhook: configuration["webhooks"][0]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            mutating: pending.manifest.mutating(),
            settings: pending.settings,
        };
        self.installed.push(installed.clone());
        Ok(installed)
    }
}

/// What examples/cluster-admission-policy-validate-queue-check.yaml adds for its settings: a
/// ClusterAdmissionPolicy whose settings turn the queue check on where it judges (role
/// `validate` or `both`; as `make cluster-preview SETTINGS=…` may, for a manifest that grants
/// nothing) is granted what the check reads, policy-metadata.yml's `contextAwareResources`,
/// where its manifest lists none. Without it, policy-server refuses every lookup as not
/// granted, and the check only warns that the queue was not checked.
fn grant_queue_check(manifest: &mut Value, settings: &Value) -> Result<()> {
    let checks = settings["queueCheck"].as_str().is_some_and(|c| c != "off")
        && settings["role"].as_str() != Some("mutate");
    let grants_nothing = manifest["spec"]["contextAwareResources"].is_null();
    if !checks || !grants_nothing || manifest["kind"] != "ClusterAdmissionPolicy" {
        return Ok(());
    }
    let allowed = allowed_by_file(&workspace_root().join("policy-metadata.yml"))?;
    manifest["spec"]["contextAwareResources"] = serde_json::to_value(allowed)?;
    Ok(())
}
