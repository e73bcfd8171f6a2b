//! docs/spec.md §4.7: the slice shapes where a TPU replicated job fits, read from its own node
//! selection and the accelerator table. Kueue picks a flavour for each pod set and skips one
//! whose node labels its required affinity rules out, so a JobSet narrowed to these pairs is
//! admitted only where it can run; G5 and T4 judge what is left.
use crate::accelerators;
use crate::affinity_mark::{AffinityMark, Pairs};
use crate::placement::{pinned, placed_as_slice};
use crate::settings::Settings;
use crate::slice_fit::{fitting_topologies, misfit};
use crate::views::jobset_view::{JobSetView, ReplicatedJob};
use std::collections::BTreeMap;

/// How a TPU replicated job's own selection leaves its slice shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shapes {
    /// Not for the table to judge: GKE's slice controller or Kueue TAS places the slice, the
    /// chips per pod cannot be read, or the pinned accelerator is not in the table.
    Unjudged,
    /// Accelerator and topology are both pinned: the pair, if it fits, else none.
    Fixed(Pairs),
    /// The accelerator or the topology is left open: every pair of the table that fits.
    Open(Pairs),
}

impl Shapes {
    pub fn pairs(&self) -> Option<&Pairs> {
        match self {
            Shapes::Unjudged => None,
            Shapes::Fixed(p) | Shapes::Open(p) => Some(p),
        }
    }
}

/// What a replicated job's own shapes depend on: identical replicated jobs (a multislice is
/// made of them, G4) share one computation of their shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ShapeInputs<'a> {
    /// Neither placed as a slice by GKE or Kueue TAS, nor of chips that cannot be read.
    judged: bool,
    accelerator: Option<&'a str>,
    topology: Option<&'a str>,
    chips_per_pod: u32,
    parallelism: u32,
}

impl<'a> ShapeInputs<'a> {
    fn of(rjob: &ReplicatedJob<'a>, settings: &Settings) -> Self {
        let chips_known = rjob.template.containers.iter().all(|c| c.tpu_chips.is_ok());
        ShapeInputs {
            judged: chips_known && !placed_as_slice(rjob),
            accelerator: pinned(rjob, &settings.accelerator_label).map(|p| p.value),
            topology: pinned(rjob, &settings.topology_label).map(|p| p.value),
            chips_per_pod: rjob.chips_per_pod,
            parallelism: rjob.parallelism,
        }
    }
}

/// The shapes a TPU replicated job's own selection leaves.
fn shapes_of(inputs: ShapeInputs, settings: &Settings) -> Shapes {
    let ShapeInputs {
        judged,
        accelerator,
        topology,
        chips_per_pod: per_pod,
        parallelism: hosts,
    } = inputs;
    if !judged {
        return Shapes::Unjudged;
    }
    let names: Vec<&str> = match accelerator {
        Some(name) => vec![name],
        None => accelerators::known_names(&settings.accelerators),
    };
    let mut pairs = Pairs::new();
    for name in names {
        let Some(acc) = accelerators::lookup(&settings.accelerators, name) else {
            return Shapes::Unjudged; // only a pinned name can be unknown
        };
        let fits: Vec<String> = match topology {
            Some(t) => misfit(&acc, t, per_pod, hosts)
                .is_none()
                .then(|| t.to_string())
                .into_iter()
                .collect(),
            None => fitting_topologies(&acc, per_pod, hosts),
        };
        if !fits.is_empty() {
            pairs.insert(name.to_string(), fits);
        }
    }
    if accelerator.is_some() && topology.is_some() {
        Shapes::Fixed(pairs)
    } else {
        Shapes::Open(pairs)
    }
}

/// Narrows `acc` to the pairs `theirs` leaves too: the accelerators of both, each with the
/// topologies of both. In place: a slice group of thousands of replicated jobs narrows once
/// for each, and makes nothing new.
fn narrow_to(acc: &mut Pairs, theirs: &Pairs) {
    acc.retain(|accelerator, topologies| match theirs.get(accelerator) {
        Some(their_topologies) => {
            topologies.retain(|t| their_topologies.contains(t));
            !topologies.is_empty()
        }
        None => false,
    });
}

/// Each TPU replicated job's own shapes, and the pairs its slice group leaves: every member
/// gets the same pairs, since Kueue assigns each pod set alone and a multislice is made of
/// identical slices (G4). Each is held once, for the replicated jobs that share it.
pub struct ShapePlan {
    /// The distinct own shapes.
    shapes: Vec<Shapes>,
    /// Each replicated job's own shapes in `shapes`: `None` for a job that is not TPU.
    own_of: Vec<Option<usize>>,
    /// The pairs each slice group with a judged member leaves.
    groups: Vec<Pairs>,
    /// Each replicated job's slice group in `groups`: `None` for a job whose own shapes are
    /// unjudged, or not TPU.
    group_of: Vec<Option<usize>>,
}

impl ShapePlan {
    /// Replicated job `index`'s own shapes, if it is TPU.
    pub fn own(&self, index: usize) -> Option<&Shapes> {
        self.shapes.get((*self.own_of.get(index)?)?)
    }

    /// The pairs replicated job `index`'s slice group leaves, if the job is judged.
    pub fn group(&self, index: usize) -> Option<&Pairs> {
        self.groups.get((*self.group_of.get(index)?)?)
    }
}

/// `slice_groups` are the members of each slice group.
pub fn plan<'g, 'v: 'g, 'a: 'v>(
    view: &JobSetView,
    slice_groups: impl Iterator<Item = &'g [&'v ReplicatedJob<'a>]>,
    settings: &Settings,
) -> ShapePlan {
    let mut shapes = Vec::new();
    let mut known: BTreeMap<ShapeInputs, usize> = BTreeMap::new();
    let own_of: Vec<Option<usize>> = view
        .replicated_jobs
        .iter()
        .map(|r| {
            r.is_tpu().then(|| {
                *known
                    .entry(ShapeInputs::of(r, settings))
                    .or_insert_with_key(|inputs| {
                        shapes.push(shapes_of(*inputs, settings));
                        shapes.len() - 1
                    })
            })
        })
        .collect();
    let mut groups = Vec::new();
    let mut group_of = vec![None; view.replicated_jobs.len()];
    for members in slice_groups {
        // The members with pairs: their index, their shapes' index, and the pairs.
        let mut judged = members.iter().filter_map(|m| {
            let at = (*own_of.get(m.index)?)?;
            Some((m.index, at, shapes.get(at)?.pairs()?))
        });
        let Some((first_index, first_at, first_pairs)) = judged.next() else {
            continue;
        };
        let mut common = first_pairs.clone();
        group_of[first_index] = Some(groups.len());
        let mut narrowed_by = first_at;
        for (index, at, pairs) in judged {
            // Narrowing by the same pairs again changes nothing.
            if at != narrowed_by {
                narrow_to(&mut common, pairs);
                narrowed_by = at;
            }
            group_of[index] = Some(groups.len());
        }
        groups.push(common);
    }
    ShapePlan {
        shapes,
        own_of,
        groups,
        group_of,
    }
}

/// The narrowing each replicated job gets (docs/spec.md §4.7): where its own selection leaves the
/// accelerator or the topology open and its group leaves some pair, the mark of those pairs.
pub fn marks(shapes: &ShapePlan, settings: &Settings) -> Vec<Option<AffinityMark>> {
    if !settings.narrow_queued_jobsets {
        return vec![None; shapes.own_of.len()];
    }
    (0..shapes.own_of.len())
        .map(|i| match (shapes.own(i), shapes.group(i)) {
            (Some(Shapes::Open(_)), Some(pairs)) if !pairs.is_empty() => Some(AffinityMark {
                accelerator: settings.accelerator_label.to_string(),
                topology: settings.topology_label.to_string(),
                pairs: pairs.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// `tpu-v6e-slice 4x4, tpu-v5p-slice 2x2x4`, for messages.
pub fn describe(pairs: &Pairs) -> String {
    pairs
        .iter()
        .flat_map(|(acc, topologies)| topologies.iter().map(move |t| format!("{acc} {t}")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How many (accelerator, topology) pairs are left.
pub fn count(pairs: &Pairs) -> usize {
    pairs.values().map(Vec::len).sum()
}

/// The CREATE warning that says what the narrowing added, in words.
pub fn warning(rjob: &ReplicatedJob, pairs: &Pairs) -> String {
    format!(
        "{}: replicated job {:?} leaves its slice shape to the queue, so it is limited to slices of {} hosts with {} chips per pod: {} (a required node affinity, so that Kueue admits it only into a flavour where it fits)",
        rjob.at.pod_template().spec_field("affinity"),
        rjob.name,
        rjob.parallelism,
        rjob.chips_per_pod,
        describe(pairs)
    )
}
