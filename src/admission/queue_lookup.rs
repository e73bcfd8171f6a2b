//! The lookup of the queue check (SPEC §8 `queueCheck`): the JobSet's LocalQueue, its ClusterQueue,
//! then each ResourceFlavor of the resource group that covers the TPU resource, read through
//! Kubewarden's `kubernetes.get_resource` host capability. One call per object, in that order,
//! never a list: a recorded session (kwctl's record and replay) answers them in order. Any error is
//! the reason the queue was not checked, never a refusal or a trap; a hung API server is the
//! webhook's `timeoutSeconds` to cut short.
//!
//! The LocalQueue is asked in Kueue's current API first; only where the host answers that the
//! API server does not serve it there (a Kueue before v0.15) is it, and every object after it,
//! read in the deprecated one. A host error is quoted up to its first line: with
//! `RUST_BACKTRACE=1` in the host's environment, policy-evaluator's error (an `anyhow` error
//! printed with `{:?}`) carries a stack backtrace after it.
use crate::queue_fit::Queue;
use crate::views::kueue_queue::{self, API_VERSION, FALLBACK_API_VERSION};
use serde_json::Value;

/// One `get_resource` call: an object of `kind` in `api_version`, namespaced or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetResource<'a> {
    pub api_version: &'a str,
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
        use kubewarden_policy_sdk::host_capabilities::kubernetes::{
            get_resource, GetResourceRequest,
        };
        let request = GetResourceRequest {
            api_version: request.api_version.to_string(),
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

/// policy-evaluator's prefix of a failed callback's error (`runtimes/callback.rs`).
const CALLBACK_FAILURE: &str = "Callback evaluation failure: ";

/// Whether the host's `error` for `request` says that the API server serves no `request.kind`
/// in `request.api_version`, in policy-evaluator's words (`build_kube_resource`, the same in
/// kwctl and policy-server): its discovery of the group version got the API server's 404 (the
/// version is not served), or listed no such kind. Any other error (the object missing, access
/// refused, a timeout) is not that answer.
pub fn not_served(request: &GetResource, error: &str) -> bool {
    let error = error.strip_prefix(CALLBACK_FAILURE).unwrap_or(error);
    let (api_version, kind) = (request.api_version, request.kind);
    let unlisted = format!("Cannot find resource {api_version}/{kind}");
    if first_line(error) == unlisted {
        return true;
    }
    // kube-rs's `ApiError: {status} ({status:?})`, whose debug form carries the code.
    let discovery = format!("error finding resource {api_version} / {kind}: ApiError: ");
    error
        .strip_prefix(&discovery)
        .is_some_and(|status| status.contains("code: 404"))
}

/// The first line of a host error (its text before any backtrace, or any line a Kubernetes
/// status message carries).
pub fn first_line(error: &str) -> &str {
    error.lines().next().unwrap_or_default()
}

/// Reads the queue `queue` of `namespace`, for the TPU resource `resource`.
pub fn look_up(
    reader: &dyn ClusterReader,
    namespace: &str,
    queue: &str,
    resource: &str,
) -> Result<Queue, String> {
    let failed = |kind: &str, name: &str, namespace: Option<&str>, why: &str| match namespace {
        Some(ns) => format!("reading {kind} {name:?} in namespace {ns:?} failed: {why}"),
        None => format!("reading {kind} {name:?} failed: {why}"),
    };
    let local_queue_in = |api_version| GetResource {
        api_version,
        kind: "LocalQueue",
        name: queue,
        namespace: Some(namespace),
    };
    let (api_version, local_queue) = match reader.get(&local_queue_in(API_VERSION)) {
        Err(why) if not_served(&local_queue_in(API_VERSION), &why) => {
            let fallback = local_queue_in(FALLBACK_API_VERSION);
            let answer = reader.get(&fallback).map_err(|why| {
                let why = if not_served(&fallback, &why) {
                    format!(
                        "the API server serves it in neither {API_VERSION} nor {FALLBACK_API_VERSION}: {}",
                        first_line(&why)
                    )
                } else {
                    first_line(&why).to_string()
                };
                failed("LocalQueue", queue, Some(namespace), &why)
            });
            (FALLBACK_API_VERSION, answer)
        }
        answer => (
            API_VERSION,
            answer.map_err(|why| failed("LocalQueue", queue, Some(namespace), first_line(&why))),
        ),
    };
    let local_queue = local_queue?;
    let read = |kind: &str, name: &str| {
        reader
            .get(&GetResource {
                api_version,
                kind,
                name,
                namespace: None,
            })
            .map_err(|why| failed(kind, name, None, first_line(&why)))
    };
    let cluster_queue_name = kueue_queue::cluster_queue_of(&local_queue)
        .map_err(|why| format!("LocalQueue {queue:?} in namespace {namespace:?}: {why}"))?;
    let cluster_queue = read("ClusterQueue", cluster_queue_name)?;
    let flavours = match kueue_queue::flavours_for(&cluster_queue, resource) {
        Some(names) => Some(
            names
                .into_iter()
                .map(|name| Ok(kueue_queue::flavour(name, &read("ResourceFlavor", name)?)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;
    use std::cell::RefCell;

    /// policy-evaluator's error when discovery of `kueue.x-k8s.io/{version}` gets the API
    /// server's 404 (kube-rs's status for a body that is not JSON).
    fn unserved(version: &str) -> String {
        format!("Callback evaluation failure: error finding resource kueue.x-k8s.io/{version} / LocalQueue: ApiError: 404 page not found\n: Failed to parse error data (Status {{ status: Some(Failure), code: 404, message: \"404 page not found\\n\", metadata: None, reason: \"Failed to parse error data\", details: None }})")
    }

    /// Kueue's objects in the API versions it serves, and what it was asked.
    struct Kueue {
        served: &'static [&'static str],
        /// The answer to the LocalQueue in v1beta2, when it is not the object.
        local_queue_v1beta2: Option<String>,
        asked: RefCell<Vec<String>>,
    }

    impl Kueue {
        fn serving(served: &'static [&'static str]) -> Kueue {
            Kueue {
                served,
                local_queue_v1beta2: None,
                asked: RefCell::new(Vec::new()),
            }
        }
    }

    impl ClusterReader for Kueue {
        fn get(&self, r: &GetResource) -> Result<Value, String> {
            self.asked
                .borrow_mut()
                .push(format!("{} {} {}", r.api_version, r.kind, r.name));
            if let (API_VERSION, "LocalQueue", Some(answer)) =
                (r.api_version, r.kind, &self.local_queue_v1beta2)
            {
                return Err(answer.clone());
            }
            let version = r.api_version.trim_start_matches("kueue.x-k8s.io/");
            if !self.served.contains(&version) {
                return Err(unserved(version).replace("LocalQueue", r.kind));
            }
            Ok(match r.kind {
                "LocalQueue" => json!({"spec": {"clusterQueue": "cq"}}),
                "ClusterQueue" => json!({"spec": {"resourceGroups": [
                    {"coveredResources": ["google.com/tpu"], "flavors": [{"name": "f"}]}]}}),
                _ => json!({"spec": {"nodeLabels": {"a": "1"}}}),
            })
        }
    }

    const V1BETA2: [&str; 3] = [
        "kueue.x-k8s.io/v1beta2 LocalQueue q",
        "kueue.x-k8s.io/v1beta2 ClusterQueue cq",
        "kueue.x-k8s.io/v1beta2 ResourceFlavor f",
    ];

    #[rstest]
    #[case::v1beta2_served_is_read_alone(&["v1beta1", "v1beta2"], &V1BETA2)]
    #[case::v1beta2_alone_served(&["v1beta2"], &V1BETA2)]
    #[case::v1beta1_alone_served_is_read_after_one_ask(&["v1beta1"], &[
        "kueue.x-k8s.io/v1beta2 LocalQueue q",
        "kueue.x-k8s.io/v1beta1 LocalQueue q",
        "kueue.x-k8s.io/v1beta1 ClusterQueue cq",
        "kueue.x-k8s.io/v1beta1 ResourceFlavor f",
    ])]
    fn reads_v1beta2_first_and_v1beta1_where_it_is_not_served(
        #[case] served: &'static [&'static str],
        #[case] asked: &[&str],
    ) {
        let kueue = Kueue::serving(served);
        let queue = look_up(&kueue, "ns", "q", "google.com/tpu").unwrap();
        assert_eq!(queue.cluster_queue, "cq");
        assert_eq!(queue.flavours.map(|f| f.len()), Some(1));
        assert_eq!(*kueue.asked.borrow(), asked);
    }

    #[rstest]
    #[case::the_kind_unlisted_in_a_served_version(
        "Callback evaluation failure: Cannot find resource kueue.x-k8s.io/v1beta2/LocalQueue",
        true
    )]
    #[case::the_version_not_served(&unserved("v1beta2"), true)]
    #[case::the_object_missing(
        "Callback evaluation failure: Cannot find kueue.x-k8s.io/v1beta2/LocalQueue named 'q' inside of namespace 'Some(\"ns\")'",
        false
    )]
    #[case::not_granted(
        "Policy has not been granted access to Kubernetes kueue.x-k8s.io/v1beta2/LocalQueue resources. The violation has been reported.",
        false
    )]
    #[case::access_refused(
        "Callback evaluation failure: error finding resource kueue.x-k8s.io/v1beta2 / LocalQueue: ApiError: localqueues.kueue.x-k8s.io is forbidden: Forbidden (Status { status: Some(Failure), code: 403, message: \"forbidden\", metadata: None, reason: \"Forbidden\", details: None })",
        false
    )]
    #[case::another_version_unserved(&unserved("v1beta3"), false)]
    fn only_the_not_served_answer_falls_back(#[case] error: &str, #[case] falls_back: bool) {
        let kueue = Kueue {
            local_queue_v1beta2: Some(error.to_string()),
            ..Kueue::serving(&["v1beta1"])
        };
        let found = look_up(&kueue, "ns", "q", "google.com/tpu");
        assert_eq!(found.is_ok(), falls_back, "{found:?}");
        assert_eq!(kueue.asked.borrow().len(), if falls_back { 4 } else { 1 });
    }

    #[test]
    fn a_host_error_is_quoted_up_to_its_first_line() {
        let kueue = Kueue {
            local_queue_v1beta2: Some("Callback evaluation failure: Cannot find kueue.x-k8s.io/v1beta2/LocalQueue named 'q' inside of namespace 'Some(\"ns\")'\n\nStack backtrace:\n   0: anyhow::error::<impl anyhow::Error>::msg\n   1: policy_evaluator::callback_handler::kubernetes::client::Client::get_resource".to_string()),
            ..Kueue::serving(&["v1beta2"])
        };
        assert_eq!(
            look_up(&kueue, "ns", "q", "google.com/tpu").unwrap_err(),
            "reading LocalQueue \"q\" in namespace \"ns\" failed: Callback evaluation failure: Cannot find kueue.x-k8s.io/v1beta2/LocalQueue named 'q' inside of namespace 'Some(\"ns\")'"
        );
    }

    #[test]
    fn no_kueue_at_all_says_neither_version_is_served() {
        let kueue = Kueue::serving(&[]);
        assert_eq!(
            look_up(&kueue, "ns", "q", "google.com/tpu").unwrap_err(),
            "reading LocalQueue \"q\" in namespace \"ns\" failed: the API server serves it in neither kueue.x-k8s.io/v1beta2 nor kueue.x-k8s.io/v1beta1: Callback evaluation failure: error finding resource kueue.x-k8s.io/v1beta1 / LocalQueue: ApiError: 404 page not found"
        );
    }
}
