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
/// controllers sent our webhook: labels, annotations, hostname and subdomain, up to names and
/// uids the API server generates.
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
    f.eq(
        sims.iter()
            .map(|s| s.hostname.clone())
            .collect::<BTreeSet<_>>(),
        real.keys().cloned().collect(),
        &format!("{what}: simulated hostnames"),
    );
    for sim in &sims {
        let Some(pod) = real.get(&sim.hostname) else {
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
    }
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
