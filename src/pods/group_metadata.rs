//! The group labels and annotations of a JobSet pod (SPEC §4.1): JobSet v0.9+ controllers write
//! them; on older ones the policy adds them, from the facts of JobSet admission. Every label value
//! it writes is one the API server takes.
use super::place::PodPlace;
use super::pod_plan::MetadataAdd;
use crate::error::{add_at, InputError};
use crate::json::{map_str, Object};
use crate::k8s_syntax;
use crate::keys;
use crate::views::pod_view::PodView;

/// The group keys the pod lacks, and the warnings about them. Values the controller set (JobSet
/// v0.9+) are never touched.
pub fn missing(
    pod: &PodView,
    place: &PodPlace,
) -> Result<(Vec<MetadataAdd>, Vec<String>), InputError> {
    let maps = [("labels", pod.labels), ("annotations", pod.annotations)];
    let complete = |m: Option<&Object>| keys::GROUP_KEYS.iter().all(|k| map_str(m, k).is_some());
    let mut warnings = Vec::new();
    if maps.iter().all(|(_, m)| complete(*m)) {
        return Ok((Vec::new(), warnings));
    }
    let values: [String; 3] = if let Some(g) = &pod.facts.group {
        [
            g.name.clone(),
            g.replicas.to_string(),
            add_at(g.offset, place.job_index, "metadata.labels")?.to_string(),
        ]
    } else if let [Some(name), Some(replicas), Some(index)] =
        keys::GROUP_KEYS.map(|k| pod.controller_value(k))
    {
        // A v0.9+ controller wrote one of the twins; copy it to the other.
        [name, replicas, index].map(str::to_string)
    } else {
        warnings.push(format!(
            "pod of JobSet {:?}: its JobSet was admitted before this policy, so the pod was put in group \"default\" with group-replicas = global-replicas ({}) and job-group-index = job-global-index ({})",
            place.jobset, place.global_replicas, place.job_global_index
        ));
        [
            keys::DEFAULT_GROUP.to_string(),
            place.global_replicas.to_string(),
            place.job_global_index.to_string(),
        ]
    };
    let mut adds = Vec::new();
    for (map_name, map) in maps {
        for (key, value) in keys::GROUP_KEYS.iter().zip(&values) {
            if map_str(map, key).is_some() {
                continue;
            }
            // The API server refuses a pod with a label value it does not take; the policy judges
            // no such JobSet (G1 refuses its name where it does), so the pod keeps the annotation,
            // and runs (SPEC §4.1).
            let problem = k8s_syntax::label_value_problem(value).filter(|_| map_name == "labels");
            if let Some(problem) = problem {
                warnings.push(format!(
                    "metadata.labels[{key:?}]: {problem}, so the pod gets the group-name annotation only"
                ));
                continue;
            }
            adds.push(MetadataAdd {
                map: map_name,
                key,
                value: value.clone(),
            });
        }
    }
    Ok((adds, warnings))
}
