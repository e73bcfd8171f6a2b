//! The policy's `get_resource` host calls against the real API server (the cluster crate's
//! backend, context_aware.rs): Kueue's objects read back exactly as the API server serves
//! them, in Kueue's deprecated v1beta1 too (the API server converts), from a webhook thread
//! and from the runtime alike; a missing object, and a namespaced kind asked without a
//! namespace, fail in policy-evaluator's words; and a policy gets the backend only when its
//! ClusterAdmissionPolicy grants the kind.
use super::shared::V6E_4X4;
use crate::common::Failures;
use multislice_cluster::context_aware::{capabilities_for, ClusterBackend};
use multislice_cluster::kueue;
use multislice_cluster::policies::{self, Manifest};
use multislice_cluster::ControlPlane;
use multislice_host::capabilities::{GetResource, KubernetesBackend};
use serde_json::{json, Value};
use std::sync::Arc;

const NAMESPACE: &str = "context-aware";
const V1BETA1: &str = "kueue.x-k8s.io/v1beta1";

/// The object as the API server serves it at `api_version`, read by the backend, retried
/// while Kueue changes it between the two reads.
async fn read_back(
    plane: &ControlPlane,
    backend: &Arc<ClusterBackend>,
    request: &GetResource,
    from_webhook_thread: bool,
) -> anyhow::Result<(Value, Value)> {
    let object = json!({
        "apiVersion": request.api_version, "kind": request.kind,
        "metadata": {"name": request.name, "namespace": request.namespace},
    });
    for _ in 0..20 {
        let before = plane.cluster.get(&object).await?;
        let answer = if from_webhook_thread {
            let (backend, request) = (backend.clone(), request.clone());
            std::thread::spawn(move || backend.get_resource(&request))
                .join()
                .map_err(|_| anyhow::anyhow!("the webhook thread panicked"))?
        } else {
            backend.get_resource(request)
        };
        let answer: Value = serde_json::from_slice(&answer.map_err(anyhow::Error::msg)?)?;
        if before.as_ref() == plane.cluster.get(&object).await?.as_ref() {
            return Ok((answer, before.unwrap_or(Value::Null)));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    anyhow::bail!("{request:?} kept changing")
}

pub(crate) async fn objects_read_through_the_backend(
    plane: &ControlPlane,
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    policies::namespace(&plane.cluster, NAMESPACE, None).await?;
    plane
        .cluster
        .apply(&kueue::local_queue(NAMESPACE, "lookup", "tpu"))
        .await?;
    let backend = Arc::new(ClusterBackend::new(&plane.cluster));
    let local_queue = GetResource::new(V1BETA1, "LocalQueue", "lookup", Some(NAMESPACE));
    for from_webhook_thread in [true, false] {
        let (answer, served) =
            read_back(plane, &backend, &local_queue, from_webhook_thread).await?;
        let what = format!("the LocalQueue, read from a webhook thread: {from_webhook_thread}");
        f.eq(&answer, &served, &what);
        f.eq(&answer["apiVersion"], &json!(V1BETA1), &what);
        f.eq(&answer["spec"]["clusterQueue"], &json!("tpu"), &what);
    }
    let flavour = GetResource::new(V1BETA1, "ResourceFlavor", V6E_4X4.name, None);
    let (answer, served) = read_back(plane, &backend, &flavour, true).await?;
    f.eq(&answer, &served, "a cluster-scoped ResourceFlavor");
    f.check(answer["spec"]["nodeLabels"].is_object(), || {
        format!("the ResourceFlavor has no nodeLabels: {answer}")
    });

    let missing = GetResource::new(V1BETA1, "LocalQueue", "no-such-queue", Some(NAMESPACE));
    f.eq(
        backend.get_resource(&missing),
        Err(
            "Cannot find kueue.x-k8s.io/v1beta1/LocalQueue named 'no-such-queue' inside of namespace 'Some(\"context-aware\")'"
                .to_string(),
        ),
        "a missing LocalQueue",
    );
    let no_namespace = GetResource::new(V1BETA1, "LocalQueue", "lookup", None);
    f.eq(
        backend.get_resource(&no_namespace),
        Err("Resource kueue.x-k8s.io/v1beta1/LocalQueue is namespaced, but no namespace was provided".to_string()),
        "a namespaced kind without a namespace",
    );
    let unknown = GetResource::new(V1BETA1, "Nonesuch", "x", None);
    f.eq(
        backend.get_resource(&unknown),
        Err("Cannot find resource kueue.x-k8s.io/v1beta1/Nonesuch".to_string()),
        "a kind the group does not serve",
    );
    granted_by_the_manifest(plane, &local_queue, &mut f)?;
    Ok(f)
}

/// What policy-server gives each manifest: the backend behind its `spec.contextAwareResources`,
/// or nothing.
fn granted_by_the_manifest(
    plane: &ControlPlane,
    request: &GetResource,
    f: &mut Failures,
) -> anyhow::Result<()> {
    let payload = serde_json::to_vec(request)?;
    let call = |manifest: &Value| -> anyhow::Result<Result<Value, String>> {
        let capabilities = capabilities_for(manifest, &plane.cluster)?;
        let answer = capabilities.host_call("kubewarden", "kubernetes", "get_resource", &payload);
        Ok(answer.map(|bytes| serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    };
    let refused = Err(
        "Policy has not been granted access to Kubernetes kueue.x-k8s.io/v1beta1/LocalQueue resources. The violation has been reported."
            .to_string(),
    );
    let mut granted = Manifest::load(policies::SINGLE_MANIFEST)?.value;
    f.eq(
        call(&granted)?,
        refused.clone(),
        "the example ClusterAdmissionPolicy",
    );
    granted["spec"]["contextAwareResources"] =
        json!([{"apiVersion": V1BETA1, "kind": "LocalQueue"}]);
    let answer = call(&granted)?;
    f.eq(
        answer.as_ref().map(|q| &q["metadata"]["name"]),
        Ok(&json!("lookup")),
        "a ClusterAdmissionPolicy granting LocalQueues",
    );
    let mut namespaced = Manifest::load(policies::NAMESPACED_MANIFEST)?.value;
    namespaced["spec"]["contextAwareResources"] =
        json!([{"apiVersion": V1BETA1, "kind": "LocalQueue"}]);
    f.eq(
        call(&namespaced)?,
        refused,
        "an AdmissionPolicy, which gets no context",
    );
    Ok(())
}
