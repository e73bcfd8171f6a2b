//! The lookup of the queue check (docs/contributing/spec.md §8 `queueCheck`): the JobSet's LocalQueue, its
//! ClusterQueue, then each ResourceFlavor of the resource group that covers the TPU resource,
//! read through Kubewarden's `kubernetes.get_resource` host capability. One call per object,
//! in that order, never a list: a recorded session (kwctl's record and replay) answers them
//! in order. Any error is the reason the queue was not checked, never a refusal or a trap; a
//! hung API server is the webhook's `timeoutSeconds` to cut short.
use crate::queue_fit::Queue;
use crate::views::kueue_queue;
use serde_json::Value;

/// One `get_resource` call: an object of `kind` in `API_VERSION`, namespaced or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetResource<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
}

/// Where cluster objects are read from: the host's capability in the module, a fake in tests.
pub trait ClusterReader {
    fn get(&self, request: &GetResource) -> Result<Value, String>;
}

/// Kubewarden's `kubernetes.get_resource` host capability (the SDK's `cluster-context`).
pub struct HostCapabilities;

impl ClusterReader for HostCapabilities {
    #[cfg(target_arch = "wasm32")]
    fn get(&self, request: &GetResource) -> Result<Value, String> {
        use crate::views::kueue_queue::API_VERSION;
        use kubewarden_policy_sdk::host_capabilities::kubernetes::{
            get_resource, GetResourceRequest,
        };
        let request = GetResourceRequest {
            api_version: API_VERSION.to_string(),
            kind: request.kind.to_string(),
            name: request.name.to_string(),
            namespace: request.namespace.map(str::to_string),
            // policy-server caches answers for 5 seconds: fresh enough for a queue's setup.
            disable_cache: false,
            field_masks: None,
        };
        get_resource::<Value>(&request).map_err(|e| {
            let text =
                std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
            text.strip_prefix("Host error: ")
                .unwrap_or(&text)
                .to_string()
        })
    }

    /// Outside a Kubewarden host there is no capability to call.
    #[cfg(not(target_arch = "wasm32"))]
    fn get(&self, _: &GetResource) -> Result<Value, String> {
        Err("there is no Kubewarden host outside the module".to_string())
    }
}

/// Reads the queue `queue` of `namespace`, for the TPU resource `resource`.
pub fn look_up(
    reader: &dyn ClusterReader,
    namespace: &str,
    queue: &str,
    resource: &str,
) -> Result<Queue, String> {
    let read = |kind: &str, name: &str, namespace: Option<&str>| {
        reader
            .get(&GetResource {
                kind,
                name,
                namespace,
            })
            .map_err(|why| match namespace {
                Some(ns) => format!("reading {kind} {name:?} in namespace {ns:?} failed: {why}"),
                None => format!("reading {kind} {name:?} failed: {why}"),
            })
    };
    let local_queue = read("LocalQueue", queue, Some(namespace))?;
    let cluster_queue_name = kueue_queue::cluster_queue_of(&local_queue)
        .map_err(|why| format!("LocalQueue {queue:?} in namespace {namespace:?}: {why}"))?;
    let cluster_queue = read("ClusterQueue", cluster_queue_name, None)?;
    let flavours = match kueue_queue::flavours_for(&cluster_queue, resource) {
        Some(names) => Some(
            names
                .into_iter()
                .map(|name| {
                    Ok(kueue_queue::flavour(
                        name,
                        &read("ResourceFlavor", name, None)?,
                    ))
                })
                .collect::<Result<Vec<_>, String>>()?,
        ),
        None => None,
    };
    Ok(Queue {
        namespace: namespace.to_string(),
        local_queue: queue.to_string(),
        cluster_queue: cluster_queue_name.to_string(),
        flavours,
    })
}
