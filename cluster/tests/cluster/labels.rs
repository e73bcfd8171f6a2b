//! Every label value the policy writes is one the API server takes (issue 51). A JobSet from
//! before JobSet v0.9 (its CRD prunes `groupName`) names its group only by the template
//! annotation `jobset.sigs.k8s.io/group-name`, here `train/eval`: valid as an annotation, not
//! as a label value. The policy does not judge such a CPU-only JobSet, so nothing refuses it,
//! and its pods must still be created.
//!
//! No JobSet v0.8 controller runs here (the control plane runs v0.12, whose CRD keeps
//! `groupName`), so the case creates the pods directly: the JobSet as a v0.8 API server hands it
//! to the mutating policy, stamped by the module in this process under the control plane's
//! settings, and its pods as the v0.8 JobSet and Job controllers make them (the host crate's
//! simulation, which `make cluster-test` holds to the real controllers). The real API server
//! then calls our webhook on each pod and judges the labels it ends up with.
use crate::common::Failures;
use crate::shapes::reviews_of;
use multislice_cluster::{policies, ControlPlane};
use multislice_host::controller::{as_served, jobset_pods, JobSetApi};
use multislice_host::request::{admission_request, Kind};
use multislice_host::{default_wasm_path, Policy};
use serde_json::{json, Value};

pub(crate) const NAMESPACE: &str = "label-values";
const GROUP: &str = "train/eval";

fn jobset() -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "eval", "namespace": NAMESPACE},
        "spec": {"replicatedJobs": [{
            "name": "evaluate",
            "replicas": 2,
            "template": {
                "metadata": {"annotations": {"jobset.sigs.k8s.io/group-name": GROUP}},
                "spec": {
                    "parallelism": 1,
                    "completions": 1,
                    "template": {"spec": {"containers": [{
                        "name": "eval",
                        "image": "python:3.11",
                        "command": ["python", "eval.py"],
                    }]}},
                },
            },
        }]},
    })
}

pub(crate) async fn invalid_group_label_is_not_written(
    plane: &ControlPlane,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let mutate = plane
        .installed
        .iter()
        .find(|i| i.mutating && i.manifest == policies::PAIR_MANIFESTS[0])
        .ok_or_else(|| anyhow::anyhow!("the pair's mutating policy is not installed"))?;
    let served = as_served(&jobset(), JobSetApi::V08);
    let module = Policy::load(&default_wasm_path())?;
    let request = admission_request(Kind::JobSet, "CREATE", &served, None);
    let outcome = module.validate(&request, &mutate.settings)?;
    f.check(outcome.accepted, || {
        format!("the JobSet's CREATE was refused: {:?}", outcome.message)
    });
    let stamped = outcome.mutated_object.unwrap_or(served);
    for sim in jobset_pods(&stamped)? {
        let mut pod = sim.object.clone();
        // No Job owns these pods here, and the garbage collector would remove a pod whose
        // owner does not exist.
        if let Some(metadata) = pod["metadata"].as_object_mut() {
            metadata.remove("ownerReferences");
        }
        pod["metadata"]["namespace"] = json!(NAMESPACE);
        let created = plane.cluster.create(&pod, false).await?;
        let hostname = pod["spec"]["hostname"].as_str().unwrap_or_default();
        let what = format!("pod {hostname}");
        f.eq(
            created.status,
            201,
            &format!("{what}: the API server's answer"),
        );
        if created.status >= 300 {
            f.0.push(format!("{what}: {:?}", created.message()));
            continue;
        }
        let metadata = &created.body["metadata"];
        f.eq(
            &metadata["labels"]["jobset.sigs.k8s.io/group-name"],
            &Value::Null,
            &format!("{what}: group-name label"),
        );
        f.eq(
            &metadata["annotations"]["jobset.sigs.k8s.io/group-name"],
            &json!(GROUP),
            &format!("{what}: group-name annotation"),
        );
        for key in [
            "jobset.sigs.k8s.io/group-replicas",
            "jobset.sigs.k8s.io/job-group-index",
        ] {
            f.check(metadata["labels"][key].is_string(), || {
                format!("{what}: no {key} label")
            });
        }
        // What our webhook answered for the pod reached its creator, and says why.
        let reviews = plane.reviews()?;
        let name = metadata["name"].as_str().unwrap_or_default();
        let answered: Vec<Value> = reviews_of(&reviews, "Pod", NAMESPACE, name)
            .iter()
            .flat_map(|r| r["warnings"].as_array().cloned().unwrap_or_default())
            .collect();
        f.eq(
            created
                .warnings
                .iter()
                .map(|w| json!(w))
                .collect::<Vec<_>>(),
            answered.clone(),
            &format!("{what}: warnings that reached the client"),
        );
        f.check(
            answered
                .iter()
                .any(|w| w.as_str().is_some_and(|w| w.contains(GROUP))),
            || format!("{what}: no warning names {GROUP:?}: {answered:?}"),
        );
        plane.cluster.delete_now(&created.body).await?;
    }
    Ok(f)
}

/// Creates the case's namespace, for the pair.
pub(crate) async fn namespace(plane: &ControlPlane) -> anyhow::Result<()> {
    policies::namespace(&plane.cluster, NAMESPACE, None).await
}
