//! A namespaced AdmissionPolicy beside JobSet's and Kueue's webhooks.
use super::runs::unlabelled_v6e;
use super::shared::TRAINING;
use crate::common::Failures;
use crate::shapes::{object_named, reviews_of};
use multislice_cluster::kueue::{self, DEFAULT_QUEUE};
use multislice_cluster::policies;
use multislice_cluster::run::{self};
use multislice_cluster::ControlPlane;
use serde_json::{json, Value};

/// What a namespaced AdmissionPolicy (examples/namespaced/admission-policy.yaml, role `both`) sees at a
/// JobSet's CREATE. Its configuration, `namespaced-<namespace>-<name>`, sorts after JobSet's
/// (`jobset-…`) and Kueue's (`kueue-…`), and the API server calls mutating webhooks in the
/// order of their configurations' names: the policy sees JobSet's defaults and Kueue's queue
/// label and `suspend`. No cluster-wide policy judges the namespace (labelled `none`).
pub(crate) async fn namespaced_policy_sees(
    plane: &ControlPlane,
    installed: &policies::Installed,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let object = unlabelled_v6e(TRAINING, "v6e-namespaced")?;
    let mut order: Vec<String> = plane
        .cluster
        .list(
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            None,
            None,
        )
        .await?
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    order.sort();
    let position = |prefix: &str| order.iter().position(|n| n.starts_with(prefix));
    let ours = position(&installed.configuration);
    for other in ["jobset-", "kueue-"] {
        f.check(
            matches!((position(other), ours), (Some(o), Some(p)) if o < p),
            || {
                format!(
                    "{other}… does not sort before {}: {order:?}",
                    installed.configuration
                )
            },
        );
    }
    let sub = run::submit(&plane.cluster, std::slice::from_ref(&object))
        .await?
        .remove(0);
    let what = format!("JobSet {TRAINING}/{}", sub.name);
    f.check(sub.allowed(), || {
        format!("{what}: CREATE refused: {:?}", sub.created.message())
    });
    let reviews = plane.reviews()?;
    let created = reviews_of(&reviews, "JobSet", TRAINING, &sub.name);
    let policies_called: Vec<&Value> = created.iter().map(|r| &r["policy"]).collect();
    f.eq(
        policies_called,
        vec![&json!(installed.configuration)],
        &format!("{what}: the policies called at CREATE"),
    );
    let Some(review) = created.first() else {
        return Ok(f);
    };
    let seen = &review["object"];
    let rjob = &seen["spec"]["replicatedJobs"][0]["template"]["spec"];
    f.eq(
        &seen["spec"]["suspend"],
        &json!(true),
        &format!("{what}: spec.suspend as the policy saw it (Kueue's)"),
    );
    f.eq(
        kueue::queue_name(seen),
        Some(DEFAULT_QUEUE),
        &format!("{what}: queue label as the policy saw it (Kueue's)"),
    );
    f.eq(
        &rjob["completionMode"],
        &json!("Indexed"),
        &format!("{what}: completionMode as the policy saw it (JobSet's default)"),
    );
    f.eq(
        &review["allowed"],
        &json!(true),
        &format!("{what}: the policy's verdict"),
    );
    eprintln!(
        "kueue: namespaced AdmissionPolicy: mutating configurations in the order the API server calls them: {order:?}"
    );
    eprintln!(
        "kueue: namespaced AdmissionPolicy: {} (role both) saw at the CREATE of {what}: spec.suspend={}, labels={}, replicatedJobs[0] completionMode={} podReplacementPolicy={}, spec.network={}, spec.successPolicy={}, spec.startupPolicy={}; answered allowed={} with a patch of {} operations",
        installed.configuration,
        seen["spec"]["suspend"],
        seen["metadata"]["labels"],
        rjob["completionMode"],
        rjob["podReplacementPolicy"],
        seen["spec"]["network"],
        seen["spec"]["successPolicy"],
        seen["spec"]["startupPolicy"],
        review["allowed"],
        review["patch"].as_array().map_or(0, Vec::len),
    );
    if sub.allowed() {
        plane.cluster.delete(&object_named(&sub)).await?;
    }
    Ok(f)
}
