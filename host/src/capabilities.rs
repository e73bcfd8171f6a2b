//! The host capabilities a policy reaches through waPC host calls, as Kubewarden's hosts
//! answer them (policy-evaluator, `src/runtimes/callback.rs`): `kubewarden/tracing/log`, and
//! `kubewarden/kubernetes/get_resource` answered by a [`KubernetesBackend`] behind the
//! allow-list that policy-server builds from a policy's `spec.contextAwareResources` (and
//! kwctl, under `--allow-context-aware`, from the metadata's `contextAwareResources`).
//!
//! Backends: a recorded session in kwctl's format ([`crate::session::Session`]), or (in the
//! cluster crate, which alone depends on kube-rs) the real API server.
//!
//! Every refusal is worded as policy-evaluator words it, since the policy sees the text:
//! - a kind not granted: [`not_granted`];
//! - granted, but no backend to ask: [`NO_CALLBACK_CHANNEL`];
//! - the backend's own error, prefixed as policy-evaluator prefixes a failed callback:
//!   [`CALLBACK_FAILURE`].
use anyhow::{anyhow, Context};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// policy-evaluator's answer to a granted call on a host without a callback channel.
pub const NO_CALLBACK_CHANNEL: &str =
    "Cannot process Wasm guest request: callback channel not provided";
/// policy-evaluator's prefix of a callback's error (`Callback evaluation failure: {e:?}`).
pub const CALLBACK_FAILURE: &str = "Callback evaluation failure: ";

/// The payload of `kubewarden/kubernetes/get_resource`, the SDK's `GetResourceRequest`, and
/// the fields of kwctl's recorded `!KubernetesGetResource` request. `field_masks` (newer SDKs
/// and kwctl) is kept so a recorded request compares field for field; backends ignore it and
/// answer the whole object.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GetResource {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    pub disable_cache: bool,
    #[serde(default)]
    pub field_masks: Option<BTreeSet<String>>,
}

impl GetResource {
    /// A request for a namespaced object (`namespace: Some`) or a cluster-scoped one (`None`),
    /// without `disable_cache` or field masks, as the SDK's defaults send it.
    pub fn new(api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> GetResource {
        GetResource {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
            namespace: namespace.map(str::to_string),
            disable_cache: false,
            field_masks: None,
        }
    }
}

/// Printed as kwctl prints policy-evaluator's `CallbackRequestType::KubernetesGetResource` in
/// its replay errors.
impl fmt::Debug for GetResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubernetesGetResource")
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("disable_cache", &self.disable_cache)
            .field("field_masks", &self.field_masks)
            .finish()
    }
}

/// What answers a policy's `get_resource` calls: the object's JSON, or an error whose text the
/// policy receives after [`CALLBACK_FAILURE`].
pub trait KubernetesBackend: Send + Sync {
    fn get_resource(&self, request: &GetResource) -> Result<Vec<u8>, String>;
}

/// One entry of an allow-list: `spec.contextAwareResources` of a ClusterAdmissionPolicy, and
/// the metadata's `contextAwareResources`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextAwareResource {
    pub api_version: String,
    pub kind: String,
}

impl ContextAwareResource {
    pub fn new(api_version: &str, kind: &str) -> ContextAwareResource {
        ContextAwareResource {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        }
    }

    /// The list under `contextAwareResources` of a policy manifest's `spec` or of the policy
    /// metadata (`value` is the manifest or the metadata); absent is empty.
    pub fn list_of(value: &Value) -> Result<BTreeSet<ContextAwareResource>, String> {
        let list = value
            .pointer("/spec/contextAwareResources")
            .or_else(|| value.get("contextAwareResources"));
        match list {
            None | Some(Value::Null) => Ok(BTreeSet::new()),
            Some(list) => serde_json::from_value(list.clone())
                .map_err(|e| format!("bad contextAwareResources: {e}")),
        }
    }
}

/// What kwctl's `--allow-context-aware` grants: the `contextAwareResources` of a policy
/// metadata file (`policy-metadata.yml`) or a policy manifest.
pub fn allowed_by_file(path: &Path) -> anyhow::Result<BTreeSet<ContextAwareResource>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: Value =
        serde_yaml::from_str(&text).with_context(|| format!("{} is not YAML", path.display()))?;
    ContextAwareResource::list_of(&value).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// policy-evaluator's refusal of a call for a kind the policy was not granted.
pub fn not_granted(api_version: &str, kind: &str) -> String {
    format!(
        "Policy has not been granted access to Kubernetes {api_version}/{kind} resources. The violation has been reported."
    )
}

/// What a policy's host calls reach: the allow-list and the backend behind it. The default,
/// [`Capabilities::none`], is kwctl without `--allow-context-aware` and policy-server for a
/// policy without `spec.contextAwareResources`: every Kubernetes kind is refused.
#[derive(Clone, Default)]
pub struct Capabilities {
    kubernetes: Option<Arc<dyn KubernetesBackend>>,
    allowed: BTreeSet<ContextAwareResource>,
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capabilities")
            .field("kubernetes", &self.kubernetes.as_ref().map(|_| "…"))
            .field("allowed", &self.allowed)
            .finish()
    }
}

impl Capabilities {
    /// No Kubernetes kind granted, no backend.
    pub fn none() -> Capabilities {
        Capabilities::default()
    }

    /// `allowed` kinds, answered by `backend`.
    pub fn kubernetes(
        backend: Arc<dyn KubernetesBackend>,
        allowed: impl IntoIterator<Item = ContextAwareResource>,
    ) -> Capabilities {
        Capabilities {
            kubernetes: Some(backend),
            allowed: allowed.into_iter().collect(),
        }
    }

    /// `allowed` kinds with no backend to ask (a host without a callback channel).
    pub fn granted_without_backend(
        allowed: impl IntoIterator<Item = ContextAwareResource>,
    ) -> Capabilities {
        Capabilities {
            kubernetes: None,
            allowed: allowed.into_iter().collect(),
        }
    }

    pub fn allowed(&self) -> &BTreeSet<ContextAwareResource> {
        &self.allowed
    }

    /// Answers one waPC host call; an `Err` is the text the guest reads as the host's error.
    pub fn host_call(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, String> {
        match (binding, namespace, operation) {
            ("kubewarden", "tracing", "log") => Ok(Vec::new()),
            ("kubewarden", "kubernetes", "get_resource") => self.get_resource(payload),
            _ => Err(format!(
                "host call {binding}/{namespace}/{operation} is not supported"
            )),
        }
    }

    fn get_resource(&self, payload: &[u8]) -> Result<Vec<u8>, String> {
        let request: GetResource = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
        let wanted = ContextAwareResource::new(&request.api_version, &request.kind);
        if !self.allowed.contains(&wanted) {
            return Err(not_granted(&request.api_version, &request.kind));
        }
        let backend = self
            .kubernetes
            .as_ref()
            .ok_or_else(|| NO_CALLBACK_CHANNEL.to_string())?;
        backend
            .get_resource(&request)
            .map_err(|e| format!("{CALLBACK_FAILURE}{e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    const KUEUE: &str = "kueue.x-k8s.io/v1beta1";

    /// Answers with the request's name, and keeps what it was asked.
    #[derive(Default)]
    struct Echo {
        asked: Mutex<Vec<GetResource>>,
    }

    impl KubernetesBackend for Echo {
        fn get_resource(&self, request: &GetResource) -> Result<Vec<u8>, String> {
            self.asked.lock().unwrap().push(request.clone());
            match request.name.as_str() {
                "missing" => Err("not there".to_string()),
                name => Ok(name.as_bytes().to_vec()),
            }
        }
    }

    fn payload(kind: &str, name: &str, namespace: Option<&str>) -> Vec<u8> {
        // As the SDK 0.17 serializes a GetResourceRequest.
        serde_json::to_vec(&json!({
            "api_version": KUEUE, "kind": kind, "name": name, "namespace": namespace,
            "disable_cache": false, "field_masks": null,
        }))
        .unwrap()
    }

    fn call(caps: &Capabilities, kind: &str, name: &str) -> Result<Vec<u8>, String> {
        caps.host_call(
            "kubewarden",
            "kubernetes",
            "get_resource",
            &payload(kind, name, None),
        )
    }

    #[test]
    fn a_granted_kind_reaches_the_backend_with_the_guest_request() {
        let echo = Arc::new(Echo::default());
        let caps = Capabilities::kubernetes(
            echo.clone(),
            [ContextAwareResource::new(KUEUE, "LocalQueue")],
        );
        let answer = caps.host_call(
            "kubewarden",
            "kubernetes",
            "get_resource",
            &payload("LocalQueue", "q", Some("team-a")),
        );
        assert_eq!(answer, Ok(b"q".to_vec()));
        assert_eq!(
            *echo.asked.lock().unwrap(),
            [GetResource::new(KUEUE, "LocalQueue", "q", Some("team-a"))]
        );
        assert_eq!(
            call(&caps, "LocalQueue", "missing"),
            Err("Callback evaluation failure: not there".to_string())
        );
    }

    #[test]
    fn a_kind_not_granted_is_refused_as_policy_evaluator_refuses_it() {
        let echo = Arc::new(Echo::default());
        let caps = Capabilities::kubernetes(
            echo.clone(),
            [ContextAwareResource::new(KUEUE, "LocalQueue")],
        );
        assert_eq!(
            call(&caps, "ClusterQueue", "cq"),
            Err("Policy has not been granted access to Kubernetes kueue.x-k8s.io/v1beta1/ClusterQueue resources. The violation has been reported.".to_string())
        );
        assert!(
            echo.asked.lock().unwrap().is_empty(),
            "the backend is never asked"
        );
    }

    #[test]
    fn no_capabilities_refuse_every_kind_as_kwctl_without_allow_context_aware() {
        assert_eq!(
            call(&Capabilities::none(), "LocalQueue", "q"),
            Err(not_granted(KUEUE, "LocalQueue"))
        );
        let granted =
            Capabilities::granted_without_backend([ContextAwareResource::new(KUEUE, "LocalQueue")]);
        assert_eq!(
            call(&granted, "LocalQueue", "q"),
            Err("Cannot process Wasm guest request: callback channel not provided".to_string())
        );
    }

    #[test]
    fn logs_are_taken_and_other_calls_refused() {
        let caps = Capabilities::none();
        assert_eq!(
            caps.host_call("kubewarden", "tracing", "log", b"{}"),
            Ok(vec![])
        );
        assert_eq!(
            caps.host_call("kubewarden", "kubernetes", "list_resources_all", b"{}"),
            Err("host call kubewarden/kubernetes/list_resources_all is not supported".to_string())
        );
        assert_eq!(
            caps.host_call("kubewarden", "kubernetes", "get_resource", b"{}"),
            Err("missing field `api_version` at line 1 column 2".to_string())
        );
    }

    #[test]
    fn allow_lists_come_from_a_manifest_or_the_metadata() {
        let manifest = json!({"spec": {"contextAwareResources": [
            {"apiVersion": KUEUE, "kind": "LocalQueue"},
            {"apiVersion": KUEUE, "kind": "ResourceFlavor"},
        ]}});
        assert_eq!(
            ContextAwareResource::list_of(&manifest),
            Ok(BTreeSet::from([
                ContextAwareResource::new(KUEUE, "LocalQueue"),
                ContextAwareResource::new(KUEUE, "ResourceFlavor"),
            ]))
        );
        let metadata =
            json!({"contextAwareResources": [{"apiVersion": "v1", "kind": "Namespace"}]});
        assert_eq!(
            ContextAwareResource::list_of(&metadata),
            Ok(BTreeSet::from([ContextAwareResource::new(
                "v1",
                "Namespace"
            )]))
        );
        assert_eq!(
            ContextAwareResource::list_of(&json!({"spec": {}})),
            Ok(BTreeSet::new())
        );
        assert_eq!(
            ContextAwareResource::list_of(&json!({"contextAwareResources": [{"kind": "X"}]})),
            Err("bad contextAwareResources: missing field `apiVersion`".to_string())
        );
    }

    #[test]
    fn a_request_prints_as_kwctl_prints_it() {
        assert_eq!(
            format!("{:?}", GetResource::new(KUEUE, "ResourceFlavor", "f", None)),
            r#"KubernetesGetResource { api_version: "kueue.x-k8s.io/v1beta1", kind: "ResourceFlavor", name: "f", namespace: None, disable_cache: false, field_masks: None }"#
        );
    }
}
