//! Node selection and exclusive placement, read the way the scheduler and JobSet read them.
use crate::error::InputError;
use crate::jobset::{JobSetView, ReplicatedJob};
use crate::json::{self, join, map_str, Object};
use crate::keys;

/// A node label a pod template pins to one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin<'a> {
    pub key: &'a str,
    pub value: &'a str,
    pub source: PinSource,
}

/// Where a pin stands in the pod spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinSource {
    NodeSelector,
    /// The `matchExpressions` index in the single required node selector term.
    Affinity(usize),
}

impl Pin<'_> {
    /// JSON path of the selector entry under `pod_spec_path` (built for messages only).
    pub fn path(&self, pod_spec_path: &str) -> String {
        match self.source {
            PinSource::NodeSelector => format!("{pod_spec_path}.nodeSelector[{:?}]", self.key),
            PinSource::Affinity(i) => format!(
                "{pod_spec_path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[{i}]"
            ),
        }
    }
}

/// The labels a pod spec pins: `nodeSelector` entries, and the `In` expressions with exactly
/// one value of a required node affinity with exactly one term. Several terms are ORed, and
/// several values allow several nodes, so neither pins a label.
pub fn pins<'a>(pod_spec: &'a Object, path: &str) -> Result<Vec<Pin<'a>>, InputError> {
    let mut out = Vec::new();
    if let Some(selector) = json::opt_string_map(pod_spec, "nodeSelector", path)? {
        for (key, value) in selector {
            out.push(Pin {
                key,
                value: value.as_str().unwrap_or(""),
                source: PinSource::NodeSelector,
            });
        }
    }
    let Some(affinity) = json::opt_object(pod_spec, "affinity", path)? else {
        return Ok(out);
    };
    let mut p = join(path, "affinity");
    let Some(node) = json::opt_object(affinity, "nodeAffinity", &p)? else {
        return Ok(out);
    };
    p = join(&p, "nodeAffinity");
    let required_key = "requiredDuringSchedulingIgnoredDuringExecution";
    let Some(required) = json::opt_object(node, required_key, &p)? else {
        return Ok(out);
    };
    p = join(&p, required_key);
    let terms = json::opt_array(required, "nodeSelectorTerms", &p)?.map_or(&[][..], Vec::as_slice);
    p = join(&p, "nodeSelectorTerms");
    let [term] = terms else {
        return Ok(out);
    };
    let t_path = json::index(&p, 0);
    let term = json::as_object(term, &t_path)?;
    let exprs = json::opt_array(term, "matchExpressions", &t_path)?.map_or(&[][..], Vec::as_slice);
    let e_list = join(&t_path, "matchExpressions");
    for (i, expr) in exprs.iter().enumerate() {
        let e_path = json::index(&e_list, i);
        let e = json::as_object(expr, &e_path)?;
        let key = json::opt_str(e, "key", &e_path)?.unwrap_or("");
        let operator = json::opt_str(e, "operator", &e_path)?.unwrap_or("");
        let values = json::opt_array(e, "values", &e_path)?.map_or(&[][..], Vec::as_slice);
        if let ("In", [value]) = (operator, values) {
            let value = value.as_str().ok_or_else(|| InputError::WrongType {
                path: format!("{e_path}.values[0]"),
                expected: "a string",
                found: json::type_name(value),
            })?;
            // A nodeSelector entry for the same key comes first and wins in messages.
            if !out.iter().any(|p| p.key == key) {
                out.push(Pin {
                    key,
                    value,
                    source: PinSource::Affinity(i),
                });
            }
        }
    }
    Ok(out)
}

/// The pin of `key`, if the replicated job's pods pin it.
pub fn pinned<'r, 'a>(rjob: &'r ReplicatedJob<'a>, key: &str) -> Option<&'r Pin<'a>> {
    rjob.pins.iter().find(|p| p.key == key)
}

/// Where an exclusive-placement setting was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level<'r> {
    JobSet,
    /// The replicated job's `spec.replicatedJobs[i]` path.
    ReplicatedJob(&'r str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusive<'a, 'r> {
    pub key: &'a str,
    /// `alpha.jobset.sigs.k8s.io/node-selector` at the same level.
    pub node_selector_strategy: bool,
    pub level: Level<'r>,
}

impl Exclusive<'_, '_> {
    /// JSON path of the exclusive-topology annotation that decided it (built for messages only).
    pub fn path(&self) -> String {
        let annotations = match self.level {
            Level::JobSet => "metadata.annotations".to_string(),
            Level::ReplicatedJob(rjob_path) => format!("{rjob_path}.template.metadata.annotations"),
        };
        format!("{annotations}[{:?}]", keys::EXCLUSIVE_TOPOLOGY)
    }
}

fn at_level<'a, 'r>(
    annotations: Option<&'a Object>,
    level: Level<'r>,
) -> Option<Exclusive<'a, 'r>> {
    map_str(annotations, keys::EXCLUSIVE_TOPOLOGY).map(|key| Exclusive {
        key,
        node_selector_strategy: map_str(annotations, keys::NODE_SELECTOR_STRATEGY).is_some(),
        level,
    })
}

/// The exclusive placement a replicated job ends up with: its own level overrides the
/// JobSet's, and the node-selector flag only counts beside exclusive-topology at one level.
pub fn exclusive_placement<'a, 'r>(
    view: &JobSetView<'a>,
    rjob: &'r ReplicatedJob<'a>,
) -> Option<Exclusive<'a, 'r>> {
    at_level(rjob.job_annotations, Level::ReplicatedJob(&rjob.path))
        .or_else(|| at_level(view.annotations, Level::JobSet))
}

pub fn job_annotations_path(rjob: &ReplicatedJob) -> String {
    format!("{}.template.metadata.annotations", rjob.path)
}
