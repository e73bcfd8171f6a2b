//! JobSet `dependsOn` as the real JobSet controller runs it: the replicated jobs that wait for
//! another to complete are made only once it has (docs/contributing/spec.md §3).
use crate::common::Failures;
use serde_json::Value;

/// The pods of `initializer` succeeded, and every other pod was made no earlier than the last
/// of them finished: the JobSet controller waited, so they never ran together.
pub(crate) fn initializer_first(pods: &[Value], initializer: &str) -> Failures {
    let mut f = Failures::default();
    let of = |p: &&Value| {
        p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == initializer
    };
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
