//! The policy's `kubernetes/get_resource` host calls answered by the real API server, as
//! policy-server answers them (policy-evaluator, `src/callback_handler/kubernetes/client.rs`):
//! the kind's resource found by discovery of its group version, the object read as JSON, and
//! policy-evaluator's words for what goes wrong. It lives here, not in the host crate, to keep
//! kube-rs out of every `cargo test`; the host sees only its [`KubernetesBackend`].
//!
//! Differences from policy-server, on purpose: it reads with the test's admin client (not a
//! service account that `policyServer.permissions` limits), and it caches nothing
//! (policy-server keeps an answer 5 s unless `disable_cache`).
//!
//! The webhook server calls it from its connection threads, which are not the runtime's: the
//! request runs as a task of the runtime whose [`Handle`] it was made with, and the calling
//! thread waits for the answer on a channel (inside a multi-thread runtime's worker, under
//! `block_in_place`; never on a current-thread runtime, where waiting would deadlock).
use crate::kube_api::Cluster;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use multislice_host::capabilities::{
    Capabilities, ContextAwareResource, GetResource, KubernetesBackend,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::runtime::{Handle, RuntimeFlavor};

/// A call that gets no answer in this long fails (the API server's own timeouts are longer).
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// The API server behind the policy's `get_resource` calls.
pub struct ClusterBackend {
    reader: Arc<Reader>,
    runtime: Handle,
}

impl ClusterBackend {
    /// A backend whose requests run on the current tokio runtime.
    pub fn new(cluster: &Cluster) -> ClusterBackend {
        ClusterBackend::with_runtime(cluster, Handle::current())
    }

    pub fn with_runtime(cluster: &Cluster, runtime: Handle) -> ClusterBackend {
        ClusterBackend {
            reader: Arc::new(Reader {
                client: cluster.client.clone(),
                resources: Mutex::new(BTreeMap::new()),
            }),
            runtime,
        }
    }
}

/// The async side: the client, and what discovery found.
struct Reader {
    client: Client,
    /// Discovery's answer for each apiVersion and kind: the resource, and whether namespaced.
    resources: Mutex<BTreeMap<(String, String), (ApiResource, bool)>>,
}

impl Reader {
    /// policy-evaluator's `build_kube_resource`: the kind in its group version's resource list.
    async fn resource(&self, api_version: &str, kind: &str) -> anyhow::Result<(ApiResource, bool)> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(known) = self
            .resources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(known.clone());
        }
        let list = match api_version {
            "v1" => self.client.list_core_api_resources(api_version).await?,
            _ => self
                .client
                .list_api_group_resources(api_version)
                .await
                .map_err(|e| {
                    anyhow::anyhow!("error finding resource {api_version} / {kind}: {e}")
                })?,
        };
        let found = list
            .resources
            .iter()
            // Subresources (`localqueues/status`) carry the kind too.
            .find(|r| r.kind == kind && !r.name.contains('/'))
            .ok_or_else(|| anyhow::anyhow!("Cannot find resource {api_version}/{kind}"))?;
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, kind),
            &found.name,
        );
        let known = (resource, found.namespaced);
        self.resources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, known.clone());
        Ok(known)
    }

    /// policy-evaluator's `get_resource`, and its serialization of the answer.
    async fn get(&self, request: &GetResource) -> anyhow::Result<Vec<u8>> {
        let GetResource {
            api_version,
            kind,
            name,
            namespace,
            ..
        } = request;
        let (resource, namespaced) = self.resource(api_version, kind).await?;
        let api: Api<DynamicObject> = if namespaced {
            let namespace = namespace.as_deref().ok_or_else(|| {
                anyhow::anyhow!(
                    "Resource {api_version}/{kind} is namespaced, but no namespace was provided"
                )
            })?;
            Api::namespaced_with(self.client.clone(), namespace, &resource)
        } else {
            Api::all_with(self.client.clone(), &resource)
        };
        let object = api.get_opt(name).await?.ok_or_else(|| {
            anyhow::anyhow!(
                "Cannot find {api_version}/{kind} named '{name}' inside of namespace '{:?}'",
                namespace.as_deref()
            )
        })?;
        serde_json::to_vec(&object).map_err(|e| anyhow::anyhow!("error serializing payload: {e:?}"))
    }
}

impl KubernetesBackend for ClusterBackend {
    fn get_resource(&self, request: &GetResource) -> Result<Vec<u8>, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (reader, request) = (self.reader.clone(), request.clone());
        self.runtime.spawn(async move {
            let _ = tx.send(reader.get(&request).await);
        });
        let wait = || rx.recv_timeout(ANSWER_WITHIN);
        let received = match Handle::try_current().map(|h| h.runtime_flavor()) {
            Err(_) => wait(),
            Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(wait),
            Ok(_) => {
                return Err(
                    "ClusterBackend: called on a current-thread runtime, which cannot \
                            answer while it waits"
                        .to_string(),
                )
            }
        };
        received
            .map_err(|_| format!("no answer from the API server within {ANSWER_WITHIN:?}"))?
            .map_err(|e| format!("{e}"))
    }
}

/// What policy-server gives a policy of a manifest: a ClusterAdmissionPolicy's
/// `spec.contextAwareResources`, answered by the API server; nothing for one without, and
/// nothing for a namespaced AdmissionPolicy (its spec has no such field).
pub fn capabilities_for(manifest: &Value, cluster: &Cluster) -> anyhow::Result<Capabilities> {
    let allowed = match manifest["kind"].as_str() {
        Some("ClusterAdmissionPolicy") => {
            ContextAwareResource::list_of(manifest).map_err(|e| anyhow::anyhow!(e))?
        }
        _ => Default::default(),
    };
    Ok(if allowed.is_empty() {
        Capabilities::none()
    } else {
        Capabilities::kubernetes(Arc::new(ClusterBackend::new(cluster)), allowed)
    })
}
