//! Read-only views over the Kueue objects the queue check reads (SPEC §8 `queueCheck`). They are
//! read as `kueue.x-k8s.io/v1beta2`, Kueue's API from v0.15 (its storage version from v0.16, where
//! v1beta1 became deprecated), and as v1beta1 after any v1beta2 failure (a Kueue before v0.15
//! serves only it; docs/kueue-gke-xpk.md). The fields read here are the same in both.
use crate::keys;
use serde_json::Value;
use std::collections::BTreeMap;

pub const API_VERSION: &str = "kueue.x-k8s.io/v1beta2";
pub const FALLBACK_API_VERSION: &str = "kueue.x-k8s.io/v1beta1";

/// A ResourceFlavor as Kueue's flavour assigner reads it: its name and node labels, and for a
/// JobSet that asks for topology-aware placement, its Topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flavour {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `spec.topologyName`.
    pub topology_name: Option<String>,
    /// That Topology's levels (`spec.levels[].nodeLabel`), highest first, where it was read.
    pub levels: Option<Vec<String>>,
}

pub fn cluster_queue_of(local_queue: &Value) -> Result<&str, String> {
    local_queue
        .pointer("/spec/clusterQueue")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .ok_or_else(|| "it names no spec.clusterQueue".to_string())
}

/// The flavours of the ClusterQueue's resource group that covers `resource`, in order; `None`
/// when no group covers it (Kueue then admits no pod that asks for it).
pub fn flavours_for<'a>(cluster_queue: &'a Value, resource: &str) -> Option<Vec<&'a str>> {
    let groups = cluster_queue.pointer("/spec/resourceGroups")?.as_array()?;
    let group = groups.iter().find(|g| {
        g.get("coveredResources")
            .and_then(Value::as_array)
            .is_some_and(|covered| covered.iter().any(|r| r.as_str() == Some(resource)))
    })?;
    let flavours = group.get("flavors")?.as_array()?.iter();
    Some(flavours.filter_map(|f| f.get("name")?.as_str()).collect())
}

/// The admission checks a ClusterQueue names: v1beta2's
/// `spec.admissionChecksStrategy.admissionChecks[].name`, and v1beta1's `spec.admissionChecks`,
/// which only an object stored before v1beta2 still shows.
pub fn admission_checks(cluster_queue: &Value) -> Vec<&str> {
    let list = |at| {
        cluster_queue
            .pointer(at)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    };
    let names = list("/spec/admissionChecksStrategy/admissionChecks");
    let old = list("/spec/admissionChecks").filter_map(Value::as_str);
    names
        .filter_map(|c| c.get("name")?.as_str())
        .chain(old)
        .collect()
}

/// Whether an AdmissionCheck is MultiKueue's: the manager's Kueue then dispatches the queue's
/// workloads to worker clusters.
pub fn is_multikueue(admission_check: &Value) -> bool {
    admission_check
        .pointer("/spec/controllerName")
        .and_then(Value::as_str)
        == Some(keys::MULTIKUEUE_CONTROLLER)
}

/// The flavour named `name`, from its ResourceFlavor: `spec.nodeLabels` (none when absent).
pub fn flavour(name: &str, resource_flavor: &Value) -> Flavour {
    let labels = resource_flavor
        .pointer("/spec/nodeLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let topology_name = resource_flavor.pointer("/spec/topologyName");
    Flavour {
        name: name.to_string(),
        labels,
        topology_name: topology_name.and_then(Value::as_str).map(str::to_string),
        levels: None,
    }
}

/// A Topology's levels, highest first: `spec.levels[].nodeLabel`.
pub fn levels(topology: &Value) -> Vec<String> {
    let levels = topology.pointer("/spec/levels").and_then(Value::as_array);
    let label = |l: &Value| Some(l.get("nodeLabel")?.as_str()?.to_string());
    levels.into_iter().flatten().filter_map(label).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_fields_kueue_reads() {
        let lq = json!({"spec": {"clusterQueue": "cq"}});
        assert_eq!(cluster_queue_of(&lq), Ok("cq"));
        assert_eq!(
            cluster_queue_of(&json!({"spec": {}})),
            Err("it names no spec.clusterQueue".to_string())
        );
        let cq = json!({"spec": {"resourceGroups": [
            {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default"}]},
            {"coveredResources": ["google.com/tpu"], "flavors": [{"name": "v6e-2x4"}, {"name": "v6e-4x4"}]}
        ]}});
        assert_eq!(
            flavours_for(&cq, "google.com/tpu"),
            Some(vec!["v6e-2x4", "v6e-4x4"])
        );
        assert_eq!(flavours_for(&cq, "nvidia.com/gpu"), None);
        assert_eq!(admission_checks(&cq), Vec::<&str>::new());
        let checked = json!({"spec": {
            "admissionChecksStrategy": {"admissionChecks": [{"name": "mk"}, {"name": "prov"}]},
            "admissionChecks": ["old"]
        }});
        assert_eq!(admission_checks(&checked), ["mk", "prov", "old"]);
        let check = |controller| json!({"spec": {"controllerName": controller}});
        assert!(is_multikueue(&check("kueue.x-k8s.io/multikueue")));
        assert!(!is_multikueue(&check(
            "kueue.x-k8s.io/provisioning-request"
        )));
        let rf = json!({"spec": {"nodeLabels": {"a": "1", "b": 2}, "topologyName": "t"}});
        assert_eq!(
            flavour("f", &rf),
            Flavour {
                name: "f".into(),
                labels: [("a".to_string(), "1".to_string())].into(),
                topology_name: Some("t".into()),
                levels: None,
            }
        );
        let topology = json!({"spec": {"levels": [{"nodeLabel": "b"}, {"nodeLabel": "h"}, {}]}});
        assert_eq!(levels(&topology), ["b", "h"]);
    }
}
