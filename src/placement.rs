//! Node selection and exclusive placement of a replicated job, read the way the scheduler and
//! JobSet read them, from the pins and annotations of the JobSet view.
use crate::json::{map_str, Object};
use crate::keys;
use crate::paths::ReplicatedJobAt;
use crate::views::jobset_view::{JobSetView, ReplicatedJob};
use crate::views::node_pins::{Pin, PinSource};

pub fn pinned<'r, 'a>(rjob: &'r ReplicatedJob<'a>, key: &str) -> Option<&'r Pin<'a>> {
    rjob.pins.iter().find(|p| p.key == key)
}

/// The slice topology of a replicated job (SPEC §3): the GKE slice-topology annotation when present
/// (a sub-slice keeps its node pool's larger topology in the nodeSelector; a super-slice has none),
/// else the value its node selection pins for `topology_label`.
pub fn slice_topology<'a>(rjob: &ReplicatedJob<'a>, topology_label: &str) -> Option<Pin<'a>> {
    match rjob.template.annotation(keys::SLICE_TOPOLOGY) {
        Some(value) => Some(Pin {
            key: keys::SLICE_TOPOLOGY,
            value,
            source: PinSource::SliceTopologyAnnotation,
        }),
        None => pinned(rjob, topology_label).cloned(),
    }
}

/// Whether GKE's slice controller or Kueue TAS places the replicated job's pods: such JobSets
/// carry no exclusive-topology (a super-slice spans node pools on purpose), and K1–K3 judge
/// whether Kueue keeps each slice whole.
pub fn placed_as_slice(rjob: &ReplicatedJob) -> bool {
    std::iter::once(keys::SLICE_TOPOLOGY)
        .chain(keys::KUEUE_TOPOLOGY_REQUEST)
        .any(|k| rjob.template.annotation(k).is_some())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusive<'a> {
    pub key: &'a str,
    /// Whether the child Job ends up with `alpha.jobset.sigs.k8s.io/node-selector`.
    pub node_selector_strategy: bool,
    /// The replicated job whose own annotation set the key that won; `None` for the JobSet's.
    pub own: Option<ReplicatedJobAt>,
}

impl Exclusive<'_> {
    /// JSON path of the exclusive-topology annotation that decided it (built for messages only).
    pub fn path(&self) -> String {
        match self.own {
            Some(at) => at.job_annotation(keys::EXCLUSIVE_TOPOLOGY),
            None => format!("metadata.annotations[{:?}]", keys::EXCLUSIVE_TOPOLOGY),
        }
    }

    pub fn is_own(&self) -> bool {
        self.own.is_some()
    }
}

/// Whether `annotations` hold `key`, whatever its value (a flag counts by its presence).
pub fn has(annotations: Option<&Object>, key: &str) -> bool {
    annotations.is_some_and(|a| a.contains_key(key))
}

/// The exclusive placement a replicated job's child Job ends up with, built as upstream's
/// `constructJob` and `labelAndAnnotateObject` build it (SPEC §2): the Job starts with the
/// replicated job's template annotations (flag included); a JobSet-level key is then set, with the
/// JobSet's flag when it has one; a replicated-job key is set last and wins. So the key is the
/// replicated job's, else the JobSet's, and the flag is on when the replicated job carries it, or
/// when the JobSet carries both key and flag.
pub fn exclusive_placement<'a>(
    view: &JobSetView<'a>,
    rjob: &ReplicatedJob<'a>,
) -> Option<Exclusive<'a>> {
    let jobset_key = map_str(view.annotations, keys::EXCLUSIVE_TOPOLOGY);
    let (key, own) = match map_str(rjob.job_annotations, keys::EXCLUSIVE_TOPOLOGY) {
        Some(key) => (key, Some(rjob.at)),
        None => (jobset_key?, None),
    };
    let jobset_flag = jobset_key.is_some() && has(view.annotations, keys::NODE_SELECTOR_STRATEGY);
    Some(Exclusive {
        key,
        node_selector_strategy: has(rjob.job_annotations, keys::NODE_SELECTOR_STRATEGY)
            || jobset_flag,
        own,
    })
}
