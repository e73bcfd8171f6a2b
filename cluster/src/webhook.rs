//! Our policies on the control plane: one webhook server of the host crate, logging every
//! review it answers, and each policy of the deployment on it, installed as Kubewarden's
//! controller installs it (its manifest and webhook configuration: policies.rs).
use crate::context_aware::capabilities_for;
use crate::plane::{ControlPlane, Served};
use crate::policies::{Deployment, Installed, Manifest};
use anyhow::{bail, Result};
use multislice_host::capabilities::allowed_by_file;
use multislice_host::webhook_server::{WebhookConfig, WebhookPolicy, WebhookServer};
use multislice_host::{workspace_root, Policy};
use serde_json::Value;
use std::sync::Arc;

/// Our webhook server, and the policies of the deployment: each manifest's webhook
/// configuration, pointed at its path.
pub(crate) async fn install_policies(
    plane: &mut ControlPlane,
    overriding: Option<Value>,
    deployment: Deployment,
) -> Result<()> {
    let module = Arc::new(Policy::load(&multislice_host::default_wasm_path())?);
    let server = WebhookServer::start(WebhookConfig {
        policies: Vec::new(),
        cert: plane.pki.serving_cert(),
        key: plane.pki.serving_key(),
        log: Some(plane.reviews.clone()),
        lifetime: plane.remaining(),
    })?;
    plane.served = Some(Served {
        server,
        module,
        overriding,
    });
    plane.deployment = deployment;
    for (path, scope) in deployment.manifests() {
        let installed = plane.install_policy(path, &scope).await?;
        // The webhook whose verdicts a namespace of the deployment sees: the validating
        // one of the pair, or the single policy.
        if !installed.mutating || deployment == Deployment::Single {
            plane.webhook_name = installed.webhook.clone();
            plane.settings = installed.settings.clone();
        }
    }
    Ok(())
}

impl ControlPlane {
    /// The webhook of an installed manifest (such as [`crate::policies::SINGLE_MANIFEST`]).
    pub fn webhook_of(&self, manifest: &str) -> Option<&str> {
        self.installed
            .iter()
            .find(|i| i.manifest == manifest)
            .map(|i| i.webhook.as_str())
    }

    /// Installs one more policy manifest (such as [`crate::policies::NAMESPACED_MANIFEST`]) on
    /// the running webhook server, with the control plane's settings override, scoped by
    /// `scope`.
    pub async fn install_policy(&mut self, path: &str, scope: &[Value]) -> Result<Installed> {
        let Some(served) = &self.served else {
            bail!("this control plane runs without our webhook");
        };
        let overriding = served.overriding.clone();
        self.install(Manifest::load(path)?, overriding.as_ref(), scope)
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
        self.install(manifest, Some(settings), scope).await
    }

    async fn install(
        &mut self,
        mut manifest: Manifest,
        overriding: Option<&Value>,
        scope: &[Value],
    ) -> Result<Installed> {
        let Some(served) = &self.served else {
            bail!("this control plane runs without our webhook");
        };
        let path = manifest.path.clone();
        let settings = manifest.settings(overriding);
        grant_queue_check(&mut manifest.value, &settings)?;
        let outcome = served.module.validate_settings(&settings)?;
        if !outcome.valid {
            bail!(
                "the policy refuses the settings of {path}: {:?}",
                outcome.message
            );
        }
        let id = manifest.unique_name()?;
        // Its own copy of the module, with what policy-server would grant it.
        let capabilities = capabilities_for(&manifest.value, &self.cluster)?;
        served.server.serve(WebhookPolicy {
            id: id.clone(),
            policy: Arc::new(served.module.with_capabilities(capabilities)),
            settings: settings.clone(),
            mutating: manifest.mutating(),
        })?;
        let configuration = manifest.webhook_configuration(
            &served.server.url(&id),
            &self.pki.ca_bundle_base64()?,
            scope,
        )?;
        self.cluster.apply(&configuration).await?;
        let installed = Installed {
            manifest: path,
            configuration: id,
            webhook: configuration["webhooks"][0]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            mutating: manifest.mutating(),
            settings,
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
