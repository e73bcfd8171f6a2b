//! The queue check (SPEC §8 `queueCheck`) and its lookup through Kubewarden's
//! `kubernetes.get_resource` host capability. One call per object, in the order of SPEC §8, never
//! a list: a recorded session (kwctl's record and replay) answers them in order. Any error is the
//! reason the queue was not checked, never a refusal or a trap; a hung API server is the webhook's
//! `timeoutSeconds` to cut short. The host's wording decides nothing; its error is quoted up to its
//! first line: with `RUST_BACKTRACE=1` in the host's environment, policy-evaluator's error (an
//! `anyhow` error printed with `{:?}`) carries a stack backtrace after it.
use crate::groups::JobSetPlan;
use crate::queue_fit::{self, Queue};
use crate::settings::QueueCheck;
use crate::views::kueue_queue::{self, Flavour, API_VERSION, FALLBACK_API_VERSION};
use crate::violation::Findings;
/// The SDK's request for one object, re-exported for the hosts that answer the module natively.
pub use kubewarden_policy_sdk::host_capabilities::kubernetes::GetResourceRequest;
use serde_json::Value;

/// Where the request's JobSet lives, how to read the cluster's objects, and who asks.
pub struct Cluster<'a> {
    pub namespace: &'a str,
    pub reader: &'a dyn ClusterReader,
    pub requester: &'a str,
}

/// The queue check of a TPU JobSet judged at CREATE that waits in its queue for a flavour (a
/// running one is never looked up). Under `warn`, what `refuse` refuses is a warning.
pub(super) fn check_queue(plan: &JobSetPlan, cluster: &Cluster) -> Findings {
    let settings = plan.settings;
    let (Some(queue), false) = (plan.view.queue, settings.queue_check == QueueCheck::Off) else {
        return Findings::default();
    };
    let Cluster {
        reader, namespace, ..
    } = *cluster;
    // A Topology is read only for a JobSet that asks for topology-aware placement.
    let tas = plan.view.tpu_jobs().any(|(i, _)| plan.tas[i].is_any());
    let found = look_up(reader, namespace, queue.name, &settings.tpu_resource, tas);
    let judged = match found {
        Ok(q) => queue_fit::judge_flavours(plan, &q),
        Err(why) => {
            let name = format!("{namespace}/{}", queue.name);
            let warning = format!("{}: queue {name:?} was not checked: {why}", queue.path());
            return Findings::warnings(vec![warning]);
        }
    };
    match settings.queue_check {
        QueueCheck::Refuse => judged,
        _ => judged.as_warnings(ToString::to_string),
    }
}

/// Where cluster objects are read from: the host's capability in the module, a fake in tests.
pub trait ClusterReader {
    fn get(&self, request: &GetResourceRequest) -> Result<Value, String>;
}

/// Kubewarden's `kubernetes.get_resource` host capability (the SDK's `cluster-context`).
pub struct HostCapabilities;

impl ClusterReader for HostCapabilities {
    #[cfg(target_arch = "wasm32")]
    fn get(&self, request: &GetResourceRequest) -> Result<Value, String> {
        use kubewarden_policy_sdk::host_capabilities::kubernetes::get_resource;
        use std::error::Error;
        get_resource::<Value>(request).map_err(|e| {
            let text = e.source().map_or_else(|| e.to_string(), |s| s.to_string());
            text.strip_prefix("Host error: ")
                .unwrap_or(&text)
                .to_string()
        })
    }

    /// Outside a Kubewarden host there is no capability to call.
    #[cfg(not(target_arch = "wasm32"))]
    fn get(&self, _: &GetResourceRequest) -> Result<Value, String> {
        Err("there is no Kubewarden host outside the module".to_string())
    }
}

/// Reads the queue `queue` of `namespace`, for the TPU resource `resource`, with each flavour's
/// Topology where `topologies`.
fn look_up(
    reader: &dyn ClusterReader,
    namespace: &str,
    queue: &str,
    resource: &str,
    topologies: bool,
) -> Result<Queue, String> {
    // One object, namespaced or not (`None`). policy-server caches answers for 5 seconds: fresh
    // enough for a queue's setup.
    let get = |api_version: &str, kind: &str, name: &str, namespace: Option<&str>| {
        reader.get(&GetResourceRequest {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
            namespace: namespace.map(str::to_string),
            disable_cache: false,
            field_masks: None,
        })
    };
    let failed = |kind: &str, name: &str, namespace: Option<&str>, error: &str| {
        // Before any backtrace, or any line a Kubernetes status message carries.
        let why = error.lines().next().unwrap_or_default();
        match namespace {
            Some(ns) => format!("reading {kind} {name:?} in namespace {ns:?} failed: {why}"),
            None => format!("reading {kind} {name:?} failed: {why}"),
        }
    };
    let local_queue_in = |api_version| get(api_version, "LocalQueue", queue, Some(namespace));
    let (api_version, local_queue) = match local_queue_in(API_VERSION) {
        Ok(local_queue) => (API_VERSION, local_queue),
        Err(why) => {
            let local_queue = local_queue_in(FALLBACK_API_VERSION)
                .map_err(|_| failed("LocalQueue", queue, Some(namespace), &why))?;
            (FALLBACK_API_VERSION, local_queue)
        }
    };
    let read = |kind: &str, name: &str| {
        get(api_version, kind, name, None).map_err(|why| failed(kind, name, None, &why))
    };
    let cluster_queue_name = kueue_queue::cluster_queue_of(&local_queue)
        .map_err(|why| format!("LocalQueue {queue:?} in namespace {namespace:?}: {why}"))?;
    let cluster_queue = read("ClusterQueue", cluster_queue_name)?;
    let mut multikueue_check = None;
    for check in kueue_queue::admission_checks(&cluster_queue) {
        if kueue_queue::is_multikueue(&read("AdmissionCheck", check)?) {
            multikueue_check = Some(check.to_string());
            break;
        }
    }
    // A MultiKueue queue's flavours run nothing here: they are not read.
    let covering = match multikueue_check {
        Some(_) => None,
        None => kueue_queue::flavours_for(&cluster_queue, resource),
    };
    let flavours = match covering {
        Some(names) => Some(read_flavours(&read, names, topologies)?),
        None => None,
    };
    Ok(Queue {
        namespace: namespace.to_string(),
        local_queue: queue.to_string(),
        cluster_queue: cluster_queue_name.to_string(),
        flavours,
        multikueue_check,
    })
}

/// The flavours named `names`, in order, then each one's Topology's levels where `topologies`;
/// each Topology read once, however many flavours name it.
fn read_flavours(
    read: &dyn Fn(&str, &str) -> Result<Value, String>,
    names: Vec<&str>,
    topologies: bool,
) -> Result<Vec<Flavour>, String> {
    let flavour =
        |name| Ok::<_, String>(kueue_queue::flavour(name, &read("ResourceFlavor", name)?));
    let mut flavours: Vec<Flavour> = names.into_iter().map(flavour).collect::<Result<_, _>>()?;
    let mut read_levels: Vec<(String, Vec<String>)> = Vec::new();
    for f in flavours.iter_mut().filter(|_| topologies) {
        let Some(topology) = &f.topology_name else {
            continue;
        };
        let levels = match read_levels.iter().find(|(n, _)| n == topology) {
            Some((_, levels)) => levels.clone(),
            None => {
                let levels = kueue_queue::levels(&read("Topology", topology)?);
                read_levels.push((topology.clone(), levels.clone()));
                levels
            }
        };
        f.levels = Some(levels);
    }
    Ok(flavours)
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
        fn new(served: &'static [&'static str], local_queue_v1beta2: Option<&str>) -> Kueue {
            Kueue {
                served,
                local_queue_v1beta2: local_queue_v1beta2.map(str::to_string),
                asked: RefCell::new(Vec::new()),
            }
        }
    }

    impl ClusterReader for Kueue {
        fn get(&self, r: &GetResourceRequest) -> Result<Value, String> {
            self.asked
                .borrow_mut()
                .push(format!("{} {} {}", r.api_version, r.kind, r.name));
            if let (API_VERSION, "LocalQueue", Some(answer)) = (
                r.api_version.as_str(),
                r.kind.as_str(),
                &self.local_queue_v1beta2,
            ) {
                return Err(answer.clone());
            }
            let version = r.api_version.trim_start_matches("kueue.x-k8s.io/");
            if !self.served.contains(&version) {
                return Err(unserved(version).replace("LocalQueue", &r.kind));
            }
            Ok(match r.kind.as_str() {
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
    fn reads_v1beta2_first_and_v1beta1_where_it_fails(
        #[case] served: &'static [&'static str],
        #[case] asked: &[&str],
    ) {
        let kueue = Kueue::new(served, None);
        let queue = look_up(&kueue, "ns", "q", "google.com/tpu", false).unwrap();
        assert_eq!(queue.cluster_queue, "cq");
        assert_eq!(queue.flavours.map(|f| f.len()), Some(1));
        assert_eq!(*kueue.asked.borrow(), asked);
    }

    /// Whatever v1beta2's error says, v1beta1 is asked once: the host's wording is not read.
    #[rstest]
    #[case::the_kind_unlisted_in_a_served_version(
        "Callback evaluation failure: Cannot find resource kueue.x-k8s.io/v1beta2/LocalQueue"
    )]
    #[case::the_version_not_served(&unserved("v1beta2"))]
    #[case::the_object_missing(
        "Callback evaluation failure: Cannot find kueue.x-k8s.io/v1beta2/LocalQueue named 'q' inside of namespace 'Some(\"ns\")'"
    )]
    #[case::not_granted(
        "Policy has not been granted access to Kubernetes kueue.x-k8s.io/v1beta2/LocalQueue resources. The violation has been reported."
    )]
    #[case::access_refused(
        "Callback evaluation failure: error finding resource kueue.x-k8s.io/v1beta2 / LocalQueue: ApiError: localqueues.kueue.x-k8s.io is forbidden: Forbidden (Status { status: Some(Failure), code: 403, message: \"forbidden\", metadata: None, reason: \"Forbidden\", details: None })"
    )]
    fn any_v1beta2_failure_asks_v1beta1_once(#[case] error: &str) {
        let kueue = Kueue::new(&["v1beta1"], Some(error));
        let found = look_up(&kueue, "ns", "q", "google.com/tpu", false);
        assert!(found.is_ok(), "{found:?}");
        assert_eq!(kueue.asked.borrow().len(), 4);
    }

    #[rstest]
    #[case::a_host_error_is_quoted_up_to_its_first_line(&["v1beta2"], Some("Callback evaluation failure: Cannot find kueue.x-k8s.io/v1beta2/LocalQueue named 'q' inside of namespace 'Some(\"ns\")'\n\nStack backtrace:\n   0: anyhow::error::<impl anyhow::Error>::msg\n   1: policy_evaluator::callback_handler::kubernetes::client::Client::get_resource"),
        "reading LocalQueue \"q\" in namespace \"ns\" failed: Callback evaluation failure: Cannot find kueue.x-k8s.io/v1beta2/LocalQueue named 'q' inside of namespace 'Some(\"ns\")'")]
    #[case::no_kueue_at_all_quotes_the_v1beta2_error(&[], None,
        "reading LocalQueue \"q\" in namespace \"ns\" failed: Callback evaluation failure: error finding resource kueue.x-k8s.io/v1beta2 / LocalQueue: ApiError: 404 page not found")]
    fn a_failed_lookup_quotes_one_line_of_v1beta2s_error(
        #[case] served: &'static [&'static str],
        #[case] local_queue_v1beta2: Option<&str>,
        #[case] error: &str,
    ) {
        let kueue = Kueue::new(served, local_queue_v1beta2);
        assert_eq!(
            look_up(&kueue, "ns", "q", "google.com/tpu", false).unwrap_err(),
            error
        );
        assert_eq!(kueue.asked.borrow().len(), 2);
    }
}
