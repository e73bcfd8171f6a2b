//! JobSet `dependsOn` as the real JobSet controller runs it: the replicated jobs that wait for
//! another to complete are made only once it has (docs/contributing/spec.md §3).
use crate::common::Failures;
use serde_json::Value;
use std::collections::BTreeMap;

/// Whether the pod belongs to replicated job `rjob`.
pub(crate) fn of_rjob(pod: &Value, rjob: &str) -> bool {
    pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == rjob
}

/// The `JAX_*` literals of the pod's first container.
fn jax_env(pod: &Value) -> BTreeMap<String, String> {
    pod["spec"]["containers"][0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str()?)))
        .filter(|(name, _)| name.starts_with("JAX_"))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

/// test_data/jobsets/trainer-initializer: the two node pods are the JAX job, with ids 0 and 1
/// and `tj-node-0-0` as coordinator; the dataset initializer, which the nodes wait for to
/// complete, gets no JAX env (docs/contributing/spec.md §3).
pub(crate) fn jax_env_of_trainer(pods: &[Value]) -> Failures {
    let mut f = Failures::default();
    let mut ids = Vec::new();
    for p in pods {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let env = jax_env(p);
        if of_rjob(p, "dataset-initializer") {
            f.eq(&env, &BTreeMap::new(), &format!("{name}: JAX env"));
            continue;
        }
        f.eq(
            env.get("JAX_NUM_PROCESSES").map(String::as_str),
            Some("2"),
            &format!("{name}: JAX_NUM_PROCESSES"),
        );
        f.eq(
            env.get("JAX_COORDINATOR_ADDRESS").map(String::as_str),
            Some("tj-node-0-0.tj:6666"),
            &format!("{name}: JAX_COORDINATOR_ADDRESS"),
        );
        ids.push(env.get("JAX_PROCESS_ID").cloned().unwrap_or_default());
    }
    ids.sort();
    f.eq(
        &ids,
        &vec!["0".to_string(), "1".to_string()],
        "the node pods' JAX_PROCESS_IDs",
    );
    f
}

/// The pods of `initializer` succeeded, and every other pod was made no earlier than the last
/// of them finished: the JobSet controller waited, so they never ran together.
pub(crate) fn initializer_first(pods: &[Value], initializer: &str) -> Failures {
    let mut f = Failures::default();
    let of = |p: &&Value| of_rjob(p, initializer);
    let (first, rest): (Vec<&Value>, Vec<&Value>) = pods.iter().partition(of);
    f.check(!first.is_empty() && !rest.is_empty(), || {
        format!(
            "{} {initializer} pods and {} others",
            first.len(),
            rest.len()
        )
    });
    // RFC 3339 at second precision, in UTC: ordered as text.
    let mut finished = String::new();
    for p in &first {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        f.eq(
            p["status"]["phase"].as_str(),
            Some("Succeeded"),
            &format!("{name} phase"),
        );
        for c in p["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let at = c["state"]["terminated"]["finishedAt"]
                .as_str()
                .unwrap_or_default();
            f.check(!at.is_empty(), || format!("{name}: no finishedAt in {c}"));
            finished = finished.max(at.to_string());
        }
    }
    for p in &rest {
        let made = p["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or_default();
        f.check(made >= finished.as_str(), || {
            format!(
                "{} was made at {made}, before {initializer} finished at {finished}",
                p["metadata"]["name"]
            )
        });
    }
    f
}
