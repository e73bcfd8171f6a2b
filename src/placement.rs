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
    /// GKE dynamic slicing: the pod template annotation `cloud.google.com/gke-tpu-slice-topology`.
    SliceTopologyAnnotation,
}

impl Pin<'_> {
    /// JSON path of the selector entry under `pod_spec_path` (built for messages only).
    pub fn path(&self, pod_spec_path: &str) -> String {
        match self.source {
            PinSource::NodeSelector => format!("{pod_spec_path}.nodeSelector[{:?}]", self.key),
            PinSource::Affinity(i) => format!(
                "{pod_spec_path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[{i}]"
            ),
            PinSource::SliceTopologyAnnotation => format!(
                "{}.metadata.annotations[{:?}]",
                pod_spec_path
                    .strip_suffix(".spec")
                    .unwrap_or(pod_spec_path),
                keys::SLICE_TOPOLOGY
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

/// The slice topology of a replicated job (SPEC §3): the GKE slice-topology annotation when
/// present (a sub-slice keeps its node pool's larger topology in the nodeSelector; a
/// super-slice has none), else the value its node selection pins for `topology_label`.
pub fn slice_topology<'a>(rjob: &ReplicatedJob<'a>, topology_label: &str) -> Option<Pin<'a>> {
    match rjob.pod_annotation(keys::SLICE_TOPOLOGY) {
        Some(value) => Some(Pin {
            key: keys::SLICE_TOPOLOGY,
            value,
            source: PinSource::SliceTopologyAnnotation,
        }),
        None => pinned(rjob, topology_label).cloned(),
    }
}

/// Whether GKE's slice controller or Kueue TAS places the replicated job's pods as one slice:
/// such JobSets carry no exclusive-topology (a super-slice spans node pools on purpose).
pub fn placed_as_slice(rjob: &ReplicatedJob) -> bool {
    keys::SLICE_PLACEMENT
        .iter()
        .any(|k| rjob.pod_annotation(k).is_some())
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
    /// Whether the child Job ends up with `alpha.jobset.sigs.k8s.io/node-selector`.
    pub node_selector_strategy: bool,
    /// Where the key that won was set.
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

fn has(annotations: Option<&Object>, key: &str) -> bool {
    annotations.is_some_and(|a| a.contains_key(key))
}

/// The exclusive placement a replicated job's child Job ends up with, built as upstream's
/// `constructJob` and `labelAndAnnotateObject` build it (SPEC §2): the Job starts with the
/// replicated job's template annotations (flag included); a JobSet-level key is then set,
/// with the JobSet's flag when it has one; a replicated-job key is set last and wins. So the
/// key is the replicated job's, else the JobSet's, and the flag is on when the replicated job
/// carries it, or when the JobSet carries both key and flag.
pub fn exclusive_placement<'a, 'r>(
    view: &JobSetView<'a>,
    rjob: &'r ReplicatedJob<'a>,
) -> Option<Exclusive<'a, 'r>> {
    let jobset_key = map_str(view.annotations, keys::EXCLUSIVE_TOPOLOGY);
    let (key, level) = match map_str(rjob.job_annotations, keys::EXCLUSIVE_TOPOLOGY) {
        Some(key) => (key, Level::ReplicatedJob(&rjob.path)),
        None => (jobset_key?, Level::JobSet),
    };
    let jobset_flag = jobset_key.is_some() && has(view.annotations, keys::NODE_SELECTOR_STRATEGY);
    Some(Exclusive {
        key,
        node_selector_strategy: has(rjob.job_annotations, keys::NODE_SELECTOR_STRATEGY)
            || jobset_flag,
        level,
    })
}

pub fn job_annotations_path(rjob: &ReplicatedJob) -> String {
    format!("{}.template.metadata.annotations", rjob.path)
}
