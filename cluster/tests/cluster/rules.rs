//! The rule fixtures refused through the API server with our exact message, and a bare queue
//! label with no Kueue to act on it.
use crate::common::Failures;
use crate::fixtures::shape;
use crate::shapes::{object_named, rests_on_bare_label, reviews_of};
use multislice_cluster::policies;
use multislice_cluster::run::{self};
use multislice_cluster::ControlPlane;
use multislice_host::fixtures::load_yaml;
use multislice_host::workspace_root;
use serde_json::{json, Value};

/// The rule fixtures' namespaces: the pair's, and the single policy's.
pub(crate) const RULES: &str = "rules";

pub(crate) const RULES_SINGLE: &str = "rules-single";

/// Every rule fixture that must fail is refused by the API server with our exact message,
/// from the webhook that gives the verdicts: the pair's validating one, or the single policy
/// for a fixture that rests on a bare queue label. Validating webhooks are called in parallel
/// and the API server answers with the first refusal to arrive, so where JobSet's own
/// validation (`vjobset.kb.io`) refuses the object too, its message may come first: then our
/// verdict is read from the review log.
pub(crate) async fn rejections(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let expected = load_yaml(&workspace_root().join("test_data/rules/expected.yaml"))?;
    let single = plane
        .webhook_of(policies::SINGLE_MANIFEST)
        .unwrap_or_default()
        .to_string();
    let mut tried = 0;
    let mut by_jobset = Vec::new();
    for (name, want) in expected.as_object().into_iter().flatten() {
        let Some(message) = want["message"].as_str() else {
            continue;
        };
        if !want["settings"].is_null() {
            continue; // this control plane runs the manifest's settings
        }
        let mut object = load_yaml(&workspace_root().join(format!("test_data/rules/{name}.yaml")))?;
        let (namespace, webhook) = if rests_on_bare_label(&object) {
            (RULES_SINGLE, single.as_str())
        } else {
            (RULES, plane.webhook_name.as_str())
        };
        object["metadata"]["namespace"] = json!(namespace);
        let created = plane.cluster.create(&object, false).await?;
        tried += 1;
        let got = created.message().unwrap_or_default().to_string();
        let ours = format!("admission webhook \"{webhook}\" denied the request: {message}");
        if got.starts_with("admission webhook \"vjobset.kb.io\" denied the request: ") {
            by_jobset.push(name.clone());
            let reviews = plane.reviews()?;
            let kind = object["kind"].as_str().unwrap_or_default();
            let object_name = object["metadata"]["name"].as_str().unwrap_or_default();
            let policy = webhook
                .strip_suffix(".kubewarden.admission")
                .unwrap_or(webhook);
            let verdicts: Vec<(&Value, &Value)> =
                reviews_of(&reviews, kind, namespace, object_name)
                    .into_iter()
                    .filter(|r| r["policy"] == policy)
                    .map(|r| (&r["allowed"], &r["message"]))
                    .collect();
            f.eq(
                verdicts,
                vec![(&json!(false), &json!(message))],
                &format!("{name}: our verdict (JobSet's own validation answered first: {got:?})"),
            );
        } else {
            f.eq(created.status, 400, &format!("{name}: status"));
            f.eq(got, ours, &format!("{name}: message"));
        }
    }
    eprintln!(
        "{tried} rule fixtures refused through the API server; JobSet's own validation answered first for {by_jobset:?}"
    );
    f.check(tried > 0, || "no rule fixture tried".to_string());
    Ok(f)
}

/// Where the bare-label case submits: a namespace of the pair, and one of the single policy.
pub(crate) const BARE_PAIR: &str = "bare-pair";

pub(crate) const BARE_SINGLE: &str = "bare-single";

/// T3 on JobSet's own v6e example, which selects neither an accelerator nor a topology.
pub(crate) const V6E_T3: &str = concat!(
    "[T3] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector (replicated job \"slice\"): does not select cloud.google.com/gke-tpu-accelerator, so the pods may land on any TPU node; add cloud.google.com/gke-tpu-accelerator to the nodeSelector, or a required node affinity with one In value, set to the accelerator of your TPU nodes (\"tpu-v4-podslice\" or \"tpu-v5p-slice\" or \"tpu-v5-lite-podslice\" or \"tpu-v6e-slice\" or \"tpu7x\" or \"tpu7\" fit 4 hosts with 4 chips per pod); see docs/rules.md, T3\n",
    "[T3] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector (replicated job \"slice\"): does not select cloud.google.com/gke-tpu-topology, so the pods may land on any TPU node; add cloud.google.com/gke-tpu-topology to the nodeSelector, or a required node affinity with one In value, set to the topology of your accelerator that fits 4 hosts with 4 chips per pod: \"2x2x4\" on tpu-v4-podslice, \"2x2x4\" on tpu-v5p-slice, \"4x4\" on tpu-v5-lite-podslice, \"4x4\" on tpu-v6e-slice, \"2x2x4\" on tpu7x, \"2x2x4\" on tpu7; see docs/rules.md, T3",
);

/// A queue label that no Kueue acts on (this control plane has none): JobSet's own v6e example,
/// with its label, not suspended, and no topology selector. The pair judges the object as it
/// will be stored, not suspended, so T3 refuses it at CREATE; the single policy (role `both`)
/// takes the label for Kueue's suspend to come, and accepts it.
pub(crate) async fn bare_label(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let file = workspace_root().join("test_data/jobsets/jobset-v6e-example.yaml");
    let mut outcomes = Vec::new();
    for namespace in [BARE_PAIR, BARE_SINGLE] {
        let mut object = shape("bare", &file, 0)?.objects.remove(0);
        object["metadata"]["namespace"] = json!(namespace);
        object["metadata"]["name"] = json!("v6e-bare");
        let sub = run::submit(&plane.cluster, &[object]).await?.remove(0);
        let message = sub.created.message().unwrap_or_default().to_string();
        outcomes.push(format!("{namespace}: {} {message}", sub.created.status));
        if namespace == BARE_PAIR {
            f.eq(sub.created.status, 400, "the pair: status");
            f.eq(
                message,
                format!(
                    "admission webhook \"{}\" denied the request: {V6E_T3}",
                    plane.webhook_name
                ),
                "the pair: message",
            );
        } else {
            f.check(sub.allowed(), || {
                format!("the single policy: refused: {message:?}")
            });
            let reviews = plane.reviews()?;
            let verdicts: Vec<(&Value, &Value)> =
                reviews_of(&reviews, "JobSet", namespace, "v6e-bare")
                    .iter()
                    .map(|r| (&r["policy"], &r["allowed"]))
                    .collect();
            f.eq(
                verdicts,
                vec![(&json!("clusterwide-jobset-multislice"), &json!(true))],
                "the single policy: our verdicts at CREATE",
            );
        }
        if sub.allowed() {
            plane.cluster.delete(&object_named(&sub)).await?;
        }
    }
    eprintln!("bare queue label, no Kueue: {outcomes:?}");
    Ok(f)
}
