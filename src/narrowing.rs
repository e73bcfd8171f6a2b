//! SPEC §4.7: the slice shapes where a TPU replicated job fits, read from its own node selection
//! and the accelerator table. Kueue picks a flavour for each pod set and skips one whose node
//! labels its required affinity rules out, so a JobSet narrowed to these pairs is admitted only
//! where it can run; G5 and T4 judge what is left.
use crate::accelerators;
use crate::affinity_mark::{AffinityMark, Pairs};
use crate::placement::{pinned, placed_as_slice};
use crate::settings::Settings;
use crate::slice_fit::{fitting_topologies, misfit};
use crate::views::jobset_view::{JobSetView, ReplicatedJob};

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

pub fn own_shapes(rjob: &ReplicatedJob, settings: &Settings) -> Shapes {
    let chips_known = rjob.template.containers.iter().all(|c| c.tpu_chips.is_ok());
    if placed_as_slice(rjob) || !chips_known {
        return Shapes::Unjudged;
    }
    let accelerator = pinned(rjob, &settings.accelerator_label).map(|p| p.value);
    let topology = pinned(rjob, &settings.topology_label).map(|p| p.value);
    let names: Vec<&str> = match accelerator {
        Some(name) => vec![name],
        None => accelerators::known_names(&settings.accelerators),
    };
    let mut pairs = Pairs::new();
    for name in names {
        let Some(acc) = accelerators::lookup(&settings.accelerators, name) else {
            return Shapes::Unjudged; // only a pinned name can be unknown
        };
        let (per_pod, hosts) = (rjob.chips_per_pod, rjob.parallelism);
        let fits = match topology {
            Some(t) if misfit(acc, t, per_pod, hosts).is_none() => vec![t.to_string()],
            Some(_) => Vec::new(),
            None => fitting_topologies(acc, per_pod, hosts),
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

/// The pairs both leave: the accelerators of both, each with the topologies of both.
fn intersect(a: &Pairs, b: &Pairs) -> Pairs {
    a.iter()
        .filter_map(|(acc, topologies)| {
            let theirs = b.get(acc)?;
            let common: Vec<String> = topologies
                .iter()
                .filter(|t| theirs.contains(t))
                .cloned()
                .collect();
            (!common.is_empty()).then(|| (acc.clone(), common))
        })
        .collect()
}

/// Each TPU replicated job's own shapes, and the pairs its slice group leaves: every member
/// gets the same pairs, since Kueue assigns each pod set alone and a multislice is made of
/// identical slices (G4). Indexed like `view.replicated_jobs`; `None` for non-TPU jobs.
pub struct ShapePlan {
    pub own: Vec<Option<Shapes>>,
    pub group: Vec<Option<Pairs>>,
    /// Whether a flavour of an accelerator the table lacks is left open to the replicated job:
    /// it leaves the accelerator to the queue, alone in its slice group (two members could get
    /// two such flavours, which G5 exists to prevent), and the table does not refuse what it
    /// does not know (`rejectUnknownAccelerators`).
    pub unknown_open: Vec<bool>,
}

pub fn plan<'g, 'v: 'g, 'a: 'v>(
    view: &JobSetView,
    slice_groups: impl Iterator<Item = &'g [&'v ReplicatedJob<'a>]>,
    settings: &Settings,
) -> ShapePlan {
    let own: Vec<Option<Shapes>> = view
        .replicated_jobs
        .iter()
        .map(|r| r.is_tpu().then(|| own_shapes(r, settings)))
        .collect();
    let mut group = vec![None; view.replicated_jobs.len()];
    let mut unknown_open: Vec<bool> = view
        .replicated_jobs
        .iter()
        .map(|r| {
            r.is_tpu()
                && !settings.reject_unknown_accelerators
                && pinned(r, &settings.accelerator_label).is_none()
        })
        .collect();
    for members in slice_groups {
        if members.len() > 1 {
            for m in members {
                unknown_open[m.index] = false;
            }
        }
        let mut judged = members
            .iter()
            .filter_map(|m| own[m.index].as_ref()?.pairs());
        let Some(first) = judged.next() else {
            continue;
        };
        let common = judged.fold(first.clone(), |acc, p| intersect(&acc, p));
        for m in members {
            if own[m.index].as_ref().and_then(Shapes::pairs).is_some() {
                group[m.index] = Some(common.clone());
            }
        }
    }
    ShapePlan {
        own,
        group,
        unknown_open,
    }
}

/// The narrowing each replicated job gets (SPEC §4.7): where its own selection leaves the
/// accelerator or the topology open and its group leaves some pair, the mark of those pairs, and of
/// the accelerators the table lacks where those are left open. None where the nodes carry no GKE
/// labels to select (`requireTpuNodeSelectors: false`).
pub fn marks(shapes: &ShapePlan, settings: &Settings) -> Vec<Option<AffinityMark>> {
    if !settings.narrow_queued_jobsets || !settings.require_tpu_node_selectors {
        return vec![None; shapes.own.len()];
    }
    let known: Vec<String> = accelerators::known_names(&settings.accelerators)
        .into_iter()
        .map(str::to_string)
        .collect();
    shapes
        .own
        .iter()
        .zip(shapes.group.iter().cloned())
        .zip(&shapes.unknown_open)
        .map(|((own, group), &unknown_open)| match (own, group) {
            (Some(Shapes::Open(_)), Some(pairs)) if !pairs.is_empty() => Some(AffinityMark {
                accelerator: settings.accelerator_label.clone(),
                topology: settings.topology_label.clone(),
                pairs,
                any_accelerator_but: if unknown_open { known.clone() } else { vec![] },
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

/// The CREATE warning that says what the narrowing added, in words. A long list of shapes is cut
/// with the warning (SPEC §4.2): the affinity itself lists them all.
pub fn warning(rjob: &ReplicatedJob, mark: &AffinityMark) -> String {
    let unknown = if mark.any_accelerator_but.is_empty() {
        ""
    } else {
        " (or an unknown accelerator)"
    };
    let plural = if rjob.parallelism == 1 { "" } else { "s" };
    format!(
        "{}: replicated job {:?} leaves its slice shape open, so a required node affinity limits it to slices of {} host{plural} of {} chips{unknown}: {}",
        rjob.at.pod_template().spec_field("affinity"),
        rjob.name,
        rjob.parallelism,
        rjob.chips_per_pod,
        describe(&mark.pairs)
    )
}
