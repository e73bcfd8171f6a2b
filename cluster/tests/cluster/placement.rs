//! What the real controllers did with the template: nothing the user wrote is lost, exclusive
//! placement holds on the real nodes, and the host crate's simulation of the JobSet controller
//! builds the same pods.
use crate::common::Failures;
use crate::pods::label;
use jobset_multislice_policy::quantity::parse_whole;
use multislice_cluster::fleet::{self};
use multislice_host::controller;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Nothing of the template is lost: every field the user wrote is in every pod, quantities
/// compared by value (the API server writes `4000m` as `4`).
pub(crate) fn check_nothing_lost_jobset(
    f: &mut Failures,
    what: &str,
    jobset: &Value,
    pods: &[Value],
) {
    for p in pods {
        let rjob = label(p, "jobset.sigs.k8s.io/replicatedjob-name");
        let Some(r) = jobset["spec"]["replicatedJobs"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["name"] == rjob))
        else {
            f.0.push(format!("{what}: pod of unknown replicated job {rjob}"));
            continue;
        };
        let template = &r["template"]["spec"]["template"];
        let mut missing = Vec::new();
        subset(&template["spec"], &p["spec"], "spec", &mut missing);
        subset(
            &template["metadata"]["labels"],
            &p["metadata"]["labels"],
            "labels",
            &mut missing,
        );
        subset(
            &template["metadata"]["annotations"],
            &p["metadata"]["annotations"],
            "annotations",
            &mut missing,
        );
        f.check(missing.is_empty(), || {
            format!("{what}: {} lost {missing:?}", p["metadata"]["name"])
        });
    }
}

/// Every leaf of `want` is in `got`; list entries are matched by `name` when they have one.
pub(crate) fn subset(want: &Value, got: &Value, path: &str, missing: &mut Vec<String>) {
    match (want, got) {
        (Value::Null, _) => {}
        (Value::Object(w), Value::Object(g)) => {
            for (k, v) in w {
                subset(
                    v,
                    g.get(k).unwrap_or(&Value::Null),
                    &format!("{path}.{k}"),
                    missing,
                );
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            for (i, v) in w.iter().enumerate() {
                let other = match v.get("name") {
                    Some(n) => g.iter().find(|x| x.get("name") == Some(n)),
                    None => g.get(i),
                };
                match other {
                    Some(o) => subset(v, o, &format!("{path}[{i}]"), missing),
                    None => missing.push(format!("{path}[{i}]")),
                }
            }
        }
        // The API server drops empty strings (omitempty), as it does `serviceAccountName: ""`.
        (Value::String(w), Value::Null) if w.is_empty() => {}
        (w, g) if same_value(w, g) => {}
        (w, g) => missing.push(format!("{path}: {w} became {g}")),
    }
}

pub(crate) fn same_value(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match (text(a), text(b)) {
        // Whole quantities by value, with the policy's parser (`4000m` is `4`).
        (Some(x), Some(y)) => {
            x == y || matches!((parse_whole(&x), parse_whole(&y)), (Ok(i), Ok(j)) if i == j)
        }
        _ => false,
    }
}

/// Under exclusive placement by a node label, each Job's pods share one value of it and no two
/// Jobs share one.
pub(crate) async fn check_exclusive_placement(
    f: &mut Failures,
    what: &str,
    jobset: &Value,
    pods: &[Value],
    cluster: &multislice_cluster::Cluster,
) {
    let Some(key) =
        jobset["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"].as_str()
    else {
        return;
    };
    let nodes = fleet::nodes_by_name(cluster).await.unwrap_or_default();
    let mut domains: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in pods {
        let node = p["spec"]["nodeName"].as_str().unwrap_or_default();
        let domain = nodes
            .get(node)
            .and_then(|n| n["metadata"]["labels"][key].as_str())
            .unwrap_or("?")
            .to_string();
        let job = format!(
            "{}-{}",
            label(p, "jobset.sigs.k8s.io/replicatedjob-name"),
            label(p, "jobset.sigs.k8s.io/job-index")
        );
        domains.entry(job).or_default().insert(domain);
    }
    let mut seen = BTreeSet::new();
    for (job, d) in &domains {
        f.eq(
            d.len(),
            1,
            &format!("{what}: Job {job} spans {key} values {d:?}"),
        );
        for v in d {
            f.check(seen.insert(v.clone()), || {
                format!("{what}: {key}={v} holds two Jobs")
            });
        }
    }
}

/// The pods the host crate's simulation builds from the stored JobSet carry what the real
/// controllers sent our webhook: labels, annotations, hostname, subdomain, nodeSelector
/// (JobSet's node-selector strategy) and tolerations, up to names and uids the API server
/// generates, what its admission plugins add, and the follower key JobSet's pod webhook
/// writes once a leader is bound.
pub(crate) fn check_simulation(
    f: &mut Failures,
    what: &str,
    jobset: &Value,
    reviews: &[Value],
    namespace: &str,
) {
    let name = jobset["metadata"]["name"].as_str().unwrap_or_default();
    let real: BTreeMap<String, &Value> = reviews
        .iter()
        .filter(|r| r["kind"] == "Pod" && r["operation"] == "CREATE" && r["namespace"] == namespace)
        .filter(|r| r["object"]["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == name)
        .map(|r| {
            (
                r["object"]["spec"]["hostname"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                &r["object"],
            )
        })
        .collect();
    let sims = match controller::jobset_pods(jobset) {
        Ok(s) => s,
        Err(e) => {
            f.0.push(format!("{what}: simulation: {e:#}"));
            return;
        }
    };
    // A pod of a NonIndexed Job has no hostname: "" stands for it, in both.
    let hostname = |pod: &Value| {
        pod["spec"]["hostname"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    f.eq(
        sims.iter()
            .map(|s| hostname(&s.object))
            .collect::<BTreeSet<_>>(),
        real.keys().cloned().collect(),
        &format!("{what}: simulated hostnames"),
    );
    for sim in &sims {
        let Some(pod) = real.get(&hostname(&sim.object)) else {
            continue;
        };
        for map in ["labels", "annotations"] {
            let s = comparable(&sim.object["metadata"][map]);
            let r = comparable(&pod["metadata"][map]);
            let differ: Vec<String> = s
                .keys()
                .chain(r.keys())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .filter(|k| s.get(*k) != r.get(*k))
                .map(|k| format!("{k}: simulated {:?}, real {:?}", s.get(k), r.get(k)))
                .collect();
            f.check(differ.is_empty(), || {
                format!("{what}: {} {map}: {differ:?}", sim.hostname)
            });
        }
        for field in ["hostname", "subdomain"] {
            f.eq(
                sim.object["spec"][field].clone(),
                pod["spec"][field].clone(),
                &format!("{what}: {} spec.{field}: simulated vs real", sim.hostname),
            );
        }
        let follower = follower_key(jobset, pod);
        f.eq(
            node_selector(&sim.object, follower),
            node_selector(pod, follower),
            &format!(
                "{what}: {} spec.nodeSelector: simulated vs real",
                sim.hostname
            ),
        );
        f.eq(
            tolerations(&sim.object),
            tolerations(pod),
            &format!(
                "{what}: {} spec.tolerations: simulated vs real",
                sim.hostname
            ),
        );
    }
}

const EXCLUSIVE: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";

/// The key JobSet's pod webhook sets on a follower pod (completion index > 0) under exclusive
/// placement by affinity: the leader's node's value of the exclusive key, known only once the
/// leader is bound, so no simulation has it. Not under the node-selector strategy, where the
/// webhook leaves the pod alone (the pod then carries `alpha.jobset.sigs.k8s.io/node-selector`).
fn follower_key<'a>(jobset: &'a Value, pod: &Value) -> Option<&'a str> {
    let annotations = &pod["metadata"]["annotations"];
    if annotations["alpha.jobset.sigs.k8s.io/node-selector"].is_string()
        || label(pod, "batch.kubernetes.io/job-completion-index") == "0"
    {
        return None;
    }
    let rjob = label(pod, "jobset.sigs.k8s.io/replicatedjob-name");
    let own = jobset["spec"]["replicatedJobs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == rjob)
        .and_then(|r| r["template"]["metadata"]["annotations"][EXCLUSIVE].as_str());
    own.or(jobset["metadata"]["annotations"][EXCLUSIVE].as_str())
}

/// A pod's nodeSelector, without the follower key JobSet's webhook writes ([`follower_key`]).
fn node_selector(pod: &Value, follower: Option<&str>) -> BTreeMap<String, String> {
    comparable(&pod["spec"]["nodeSelector"])
        .into_iter()
        .filter(|(k, _)| Some(k.as_str()) != follower)
        .collect()
}

/// A pod's tolerations, without those the API server's admission plugins add before any
/// webhook sees the pod: DefaultTolerationSeconds' (not-ready, unreachable) and
/// ExtendedResourceToleration's (one per extended resource the pod requests).
fn tolerations(pod: &Value) -> Vec<Value> {
    let requested: BTreeSet<String> = ["containers", "initContainers"]
        .iter()
        .flat_map(|l| pod["spec"][l].as_array().into_iter().flatten())
        .flat_map(|c| {
            ["limits", "requests"]
                .iter()
                .flat_map(|k| c["resources"][k].as_object().into_iter().flatten())
                .map(|(name, _)| name.clone())
                .collect::<Vec<_>>()
        })
        .filter(|name| name.contains('/') && !name.starts_with("kubernetes.io/"))
        .collect();
    pod["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| {
            let key = t["key"].as_str().unwrap_or_default();
            let by_seconds = matches!(
                key,
                "node.kubernetes.io/not-ready" | "node.kubernetes.io/unreachable"
            ) && t["effect"] == "NoExecute"
                && t["tolerationSeconds"] == 300;
            let by_resource =
                requested.contains(key) && t["operator"] == "Exists" && t["effect"] == "NoSchedule";
            !(by_seconds || by_resource)
        })
        .cloned()
        .collect()
}

/// A label or annotation map without what only the API server knows (uids).
pub(crate) fn comparable(map: &Value) -> BTreeMap<String, String> {
    map.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !k.ends_with("controller-uid") && !k.ends_with("jobset-uid"))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}
