//! Kubewarden as operators install it (part `kubewarden`): the policies kubectl applied from
//! examples/ are `active`, the webhooks the controller wrote are what the examples say, the
//! controller's own validator refuses what Kubewarden refuses, and the host serves the
//! controller's own `policies.yml`.
use crate::common::Failures;
use multislice_cluster::host::served_file;
use multislice_cluster::policies::{disagreements, PAIR_MANIFESTS, SINGLE_MANIFEST};
use multislice_cluster::ControlPlane;
use serde_json::{json, Value};

/// Every policy of the deployment `active`, with its webhook as the example says.
pub(crate) async fn policies_active(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    for manifest in [PAIR_MANIFESTS[0], PAIR_MANIFESTS[1], SINGLE_MANIFEST] {
        let Some(installed) = plane.installed.iter().find(|i| i.manifest == manifest) else {
            f.check(false, || format!("{manifest}: not installed"));
            continue;
        };
        let stored = plane
            .cluster
            .get(&installed.object)
            .await?
            .unwrap_or_default();
        f.eq(
            &stored["status"]["policyStatus"],
            &json!("active"),
            &format!("{manifest}: policyStatus"),
        );
        let kind = if installed.mutating {
            "MutatingWebhookConfiguration"
        } else {
            "ValidatingWebhookConfiguration"
        };
        let written = plane
            .cluster
            .get(
                &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                         "metadata": {"name": installed.configuration}}),
            )
            .await?
            .unwrap_or_default();
        for wrong in disagreements(&installed.object, &written["webhooks"][0]) {
            f.check(false, || wrong.clone());
        }
        f.check(!written["webhooks"][0]["matchConditions"].is_null(), || {
            format!("{manifest}: the controller wrote no matchConditions")
        });
    }
    Ok(f)
}

/// The controller's validator: a policy in `protect` may not move to `monitor` (as
/// operations.md says: create it in monitor mode, or recreate it).
pub(crate) async fn protect_to_monitor_refused(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let kubectl = plane.kubectl()?;
    let answer = kubectl.run(&[
        "patch",
        "clusteradmissionpolicy",
        "jobset-multislice-validate",
        "--type=merge",
        "--dry-run=server",
        "-p",
        r#"{"spec":{"mode":"monitor"}}"#,
    ]);
    match answer {
        Ok(out) => f.check(false, || format!("the change was accepted: {out}")),
        Err(e) => {
            let text = format!("{e:#}");
            f.check(
                // kubectl words an Invalid refusal its own way; the reason is the validator's.
                text.contains(
                    "spec.mode: Forbidden: field cannot transition from protect to monitor. Recreate instead.",
                ),
                || format!("not the controller's refusal: {text}"),
            );
        }
    }
    Ok(f)
}

/// The host serves the ConfigMap the controller wrote, with `hostCapabilities: ["*"]` added to
/// each cluster-wide entry (v1.31 writes none; v1.35 writes that), and nothing else changed.
pub(crate) async fn host_serves_the_controllers_file(
    plane: &ControlPlane,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let config_map = plane
        .cluster
        .get(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "policy-server-default", "namespace": "kubewarden"}}))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no ConfigMap policy-server-default"))?;
    let written = config_map["data"]["policies.yml"].as_str().unwrap_or("{}");
    let controllers: Value = serde_json::from_str(written)?;
    let served: Value = serde_yaml::from_str(&served_file(written)?)?;
    let entries = controllers.as_object().cloned().unwrap_or_default();
    f.check(!entries.is_empty(), || {
        "the controller's file is empty".into()
    });
    for (id, entry) in entries {
        f.check(entry.get("hostCapabilities").is_none(), || {
            format!(
                "{id}: v1.31 wrote hostCapabilities {}",
                entry["hostCapabilities"]
            )
        });
        let mut expected = entry.clone();
        if id.starts_with("clusterwide-") {
            expected["hostCapabilities"] = json!(["*"]);
        }
        f.eq(&served[&id], &expected, &format!("{id}: the entry served"));
    }
    Ok(f)
}
