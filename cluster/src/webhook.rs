//! Our policies on the control plane, through Kubewarden's controller (kubewarden.rs): the
//! deployment's test kustomizations applied with real `kubectl apply -k` (policies.rs), each
//! policy then `active`, its webhook configuration the controller's, and every review served
//! by the host of policy-server's pods (host.rs), through the kube-proxy shim (kube_proxy.rs).
use crate::host::{Host, HostBinary, Surroundings};
use crate::modules::Binaries;
use crate::plane::ControlPlane;
use crate::policies::{
    disagreements, source_of, unique_name, Deployment, Installed, Kubectl, Overlay, Variant,
    PAIR_MANIFESTS, SINGLE_MANIFEST,
};
use crate::policy_server::{CONFIG_VERSION_LABEL, NAMESPACE, POLICY_SERVER_OBJECTS};
use anyhow::{anyhow, bail, Result};
use multislice_host::default_wasm_path;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a change may take to be served: the controller's reconcile, policy-server's
/// rollout, and the new pod's host compiling its modules.
const SERVED_WITHIN: Duration = Duration::from_secs(300);

/// The kubelet of policy-server's pods, then the deployment's kustomizations, applied; returns
/// once every policy is `active` and served.
pub(crate) async fn install_policies(
    plane: &mut ControlPlane,
    binaries: &Binaries,
    overriding: Option<Value>,
    deployment: Deployment,
) -> Result<()> {
    plane.kubectl = Some(Kubectl {
        binary: binaries.get("kubectl")?.to_path_buf(),
        kubeconfig: plane.kubeconfig.clone(),
    });
    let around = Surroundings {
        binary: HostBinary::find()?,
        dir: plane.dir.join("policy-server"),
        logs: plane.logs(),
        kubeconfig: plane.kubeconfig.clone(),
        ca: plane.kubewarden_ca(),
        until: Instant::now() + plane.remaining(),
    };
    eprintln!("the policies' host: {}", around.binary.name());
    plane.module = around
        .binary
        .servable(&default_wasm_path(), &plane.dir.join("modules"))?;
    let routes = plane.proxy()?.routes();
    plane.host = Some(Host::start(around, plane.cluster.clone(), routes));
    plane.deployment = deployment;
    // Where the settings turn the queue check on (as `make cluster-preview SETTINGS=…` may),
    // the pair that judges is the queue-check pair, which grants what the check reads.
    let queue_check = overriding
        .as_ref()
        .is_some_and(|s| s["queueCheck"].as_str().is_some_and(|c| c != "off"));
    let root = plane.dir.join("kustomize");
    let mut overlays = Vec::new();
    for base in deployment.kustomizations(queue_check) {
        let mut overlay = Overlay::of_test_kustomization(&root, base);
        overlay.settings = overriding.clone();
        overlays.push(overlay);
    }
    for installed in plane.apply_overlays(overlays).await? {
        // The webhook whose verdicts a namespace of the deployment sees: the validating
        // one of the pair, or the single policy where it is the deployment.
        let judges = match deployment {
            Deployment::Pair => PAIR_MANIFESTS[1],
            Deployment::Single => SINGLE_MANIFEST,
        };
        if installed.manifest == judges {
            plane.webhook_name = installed.webhook.clone();
            plane.settings = installed.settings.clone();
        }
    }
    Ok(())
}

/// The calls that do to the policy's host what an outage and an operator do; they stay the
/// same whatever runs behind them, and each returns once the host answers, or says why not.
impl ControlPlane {
    /// Starts the host of the pod that gets policy-server's traffic again (after
    /// [`Self::kill_host`]), on the same address, and returns once it serves.
    pub async fn start_host(&mut self) -> Result<()> {
        let host = self.host()?;
        tokio::task::block_in_place(|| host.restart())
    }

    /// SIGKILLs the host's process, as an OOM kill or a lost node does: no answer to requests in
    /// flight, and the webhook configurations left in place, so that the API server's calls
    /// fail until [`Self::start_host`].
    pub async fn kill_host(&mut self) -> Result<()> {
        let host = self.host()?;
        tokio::task::block_in_place(|| host.kill())
    }

    /// Every installed policy runs `module` from now on: the upgrade or rollback an operator
    /// makes by changing `module:` and applying the kustomizations again. Returns once the
    /// controller's rollout serves it: policy-server's new pod is Ready before the old one goes.
    pub async fn swap_module(&mut self, module: &Path) -> Result<()> {
        self.module = self
            .host()?
            .binary()
            .servable(module, &self.dir.join("modules"))?;
        let overlays = std::mem::take(&mut self.overlays);
        let installed = self.apply_overlays(overlays).await?;
        for i in &mut self.installed {
            if let Some(new) = installed
                .iter()
                .find(|n| n.configuration == i.configuration)
            {
                *i = new.clone();
            }
        }
        Ok(())
    }

    /// The webhook of an installed manifest (such as [`crate::policies::SINGLE_MANIFEST`]).
    pub fn webhook_of(&self, manifest: &str) -> Option<&str> {
        self.installed
            .iter()
            .find(|i| i.manifest == manifest)
            .map(|i| i.webhook.as_str())
    }

    /// Installs a variant of examples/ once more, under names of its own (`<name>-<suffix>`)
    /// where `suffix` is given, with `settings` merged into each policy's (their `role` kept),
    /// for the namespaces of `scope`: the policies of a namespace whose objects carry settings of
    /// their own (a rule fixture's, test_data/rules/expected.yaml), or a variant a case needs.
    pub async fn install_variant(
        &mut self,
        variant: Variant,
        suffix: Option<&str>,
        settings: &Value,
        scope: &[Value],
    ) -> Result<Vec<Installed>> {
        let mut overlay = Overlay::of_variant(&self.dir.join("kustomize"), variant, suffix);
        overlay.settings = Some(settings.clone()).filter(|s| s != &json!({}));
        overlay.scope = scope.to_vec();
        self.apply_overlays(vec![overlay]).await
    }

    fn host(&self) -> Result<&Host> {
        self.host
            .as_ref()
            .ok_or_else(|| anyhow!("no policies are installed"))
    }

    /// kubectl against the control plane, once Kubewarden is installed.
    pub fn kubectl(&self) -> Result<&Kubectl> {
        self.kubectl
            .as_ref()
            .ok_or_else(|| anyhow!("no policies are installed"))
    }

    /// Writes and applies each overlay with `kubectl apply -k`, then waits until the controller
    /// serves every policy they hold; fails where the webhook it wrote disagrees with a policy.
    async fn apply_overlays(&mut self, overlays: Vec<Overlay>) -> Result<Vec<Installed>> {
        let mut applied = Vec::new();
        for overlay in overlays {
            overlay.write(&self.module)?;
            let kubectl = self.kubectl()?.clone();
            let dir = overlay.dir.clone();
            let policies = tokio::task::spawn_blocking(move || kubectl.apply_k(&dir)).await??;
            for policy in policies {
                applied.push((policy, overlay.suffix.clone()));
            }
            self.overlays.retain(|o| o.dir != overlay.dir);
            self.overlays.push(overlay);
        }
        let served: Vec<Value> = applied.iter().map(|(p, _)| p.clone()).collect();
        self.wait_served(&served).await?;
        let mut installed = Vec::new();
        for (policy, suffix) in applied {
            let configuration = unique_name(&policy)?;
            let mutating = policy["spec"]["mutating"] == json!(true);
            let kind = if mutating {
                "MutatingWebhookConfiguration"
            } else {
                "ValidatingWebhookConfiguration"
            };
            let written = self
                .cluster
                .get(
                    &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                             "metadata": {"name": configuration}}),
                )
                .await?
                .ok_or_else(|| anyhow!("the controller wrote no {kind} {configuration}"))?;
            let webhook = &written["webhooks"][0];
            let wrong = disagreements(&policy, webhook);
            if !wrong.is_empty() {
                bail!(
                    "the examples and Kubewarden's controller disagree:\n{}",
                    wrong.join("\n")
                );
            }
            let one = Installed {
                manifest: source_of(&policy, suffix.as_deref()),
                configuration,
                webhook: webhook["name"].as_str().unwrap_or_default().to_string(),
                mutating,
                settings: match &policy["spec"]["settings"] {
                    Value::Null => json!({}),
                    s => s.clone(),
                },
                object: policy,
            };
            self.installed
                .retain(|i| i.configuration != one.configuration);
            self.installed.push(one.clone());
            installed.push(one);
        }
        Ok(installed)
    }

    /// Waits until each policy is `active` and the controller's ConfigMap holds it with its
    /// module and settings, and the Service's traffic goes to a pod serving that ConfigMap.
    async fn wait_served(&mut self, policies: &[Value]) -> Result<()> {
        let deadline = Instant::now() + SERVED_WITHIN;
        let mut why = String::new();
        while Instant::now() < deadline {
            self.check_alive()?;
            match self.not_served(policies).await {
                Ok(None) => return Ok(()),
                Ok(Some(reason)) => why = reason,
                Err(e) => why = format!("{e:#}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        bail!("the policies were not served within {SERVED_WITHIN:?}: {why}")
    }

    /// What is not served yet, if anything.
    async fn not_served(&self, policies: &[Value]) -> Result<Option<String>> {
        for policy in policies {
            let name = policy["metadata"]["name"].as_str().unwrap_or_default();
            let stored = self.cluster.get(policy).await?;
            let status = stored
                .as_ref()
                .map(|s| s["status"].clone())
                .unwrap_or_default();
            if status["policyStatus"] != "active" {
                return Ok(Some(format!(
                    "{name} is {}: {}",
                    status["policyStatus"], status["conditions"]
                )));
            }
        }
        let config_map = self
            .cluster
            .get(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": POLICY_SERVER_OBJECTS, "namespace": NAMESPACE}}))
            .await?
            .ok_or_else(|| anyhow!("no ConfigMap {POLICY_SERVER_OBJECTS}"))?;
        let entries: Value =
            serde_json::from_str(config_map["data"]["policies.yml"].as_str().unwrap_or("{}"))?;
        for policy in policies {
            let id = unique_name(policy)?;
            let entry = &entries[&id];
            let settings = |v: &Value| if v.is_null() { json!({}) } else { v.clone() };
            if entry["module"] != policy["spec"]["module"]
                || settings(&entry["settings"]) != settings(&policy["spec"]["settings"])
            {
                return Ok(Some(format!("the ConfigMap's {id} is {entry}")));
            }
        }
        let version = config_map["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        let served = self.host()?.served_version();
        if served.as_deref() != Some(version) {
            return Ok(Some(format!(
                "ConfigMap version {version} is not served yet (served: {served:?}; pods carry {CONFIG_VERSION_LABEL})"
            )));
        }
        Ok(None)
    }
}
