//! Validation rules of SPEC §6, one small function per rule over the JobSet view. A rule
//! returns violations; warnings (suspicious but valid) come from their own functions.
pub mod elastic;
pub mod groups;
pub mod job;
pub mod network;
pub mod placement;
pub mod tpu;

use crate::error::InputError;
use crate::groups::{jax_enabled, slice_groups};
use crate::jobset::{JobSetView, ReplicatedJob};
use crate::settings::Settings;
use crate::violation::Violation;

/// What validation found in a JobSet.
#[derive(Debug, Default, PartialEq)]
pub struct Findings {
    pub violations: Vec<Violation>,
    pub warnings: Vec<String>,
}

type RuleFn = fn(&JobSetView, &Settings) -> Vec<Violation>;

/// When the object is judged: at CREATE (and in background audit), or at an UPDATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    Create,
    Update,
}

/// Every rule in the order a rejection lists them. T3 and T4 judge node selectors, which Kueue
/// injects when it unsuspends a JobSet, so they wait while the JobSet is suspended.
const RULES: [(RuleFn, bool); 14] = [
    (groups::g1, false),
    (groups::g2, false),
    (groups::g3, false),
    (groups::g4, false),
    (tpu::t1, false),
    (tpu::t2, false),
    (tpu::t3, true),
    (tpu::t4, true),
    (placement::x1, false),
    (placement::x2, false),
    (placement::x3, false),
    (placement::x4, false),
    (network::n1, false),
    (network::n2, false),
];

/// Whether the policy judges this JobSet at all: it has a TPU replicated job or the JAX env
/// is on. Other JobSets are JobSet's own webhook's to judge (SPEC §6, last paragraph).
pub fn judged(view: &JobSetView, settings: &Settings) -> bool {
    tpu_jobs(view).next().is_some() || jax_enabled(view, settings)
}

/// Whether T3 and T4 wait: the JobSet is suspended, or, at CREATE, queued in Kueue, whose
/// webhook suspends it after this policy has run (SPEC §2 "Admission order", §5). At an UPDATE
/// the stored object already shows Kueue's `suspend`, and the unsuspending UPDATE is judged.
pub fn deferred(view: &JobSetView, moment: Moment) -> bool {
    view.suspend || (moment == Moment::Create && view.queued)
}

/// The verdict on a JobSet the policy judges; nothing for one it does not.
pub fn judge(
    view: &JobSetView,
    settings: &Settings,
    moment: Moment,
) -> Result<Findings, InputError> {
    if !judged(view, settings) {
        return Ok(Findings::default());
    }
    view.check_coordinator()?;
    Ok(check(view, settings, moment))
}

fn check(view: &JobSetView, settings: &Settings, moment: Moment) -> Findings {
    let deferred = deferred(view, moment);
    let violations = RULES
        .iter()
        .filter(|(_, deferred_while_suspended)| !(deferred && *deferred_while_suspended))
        .flat_map(|(rule, _)| rule(view, settings))
        .collect();
    let mut warnings = placement::single_slice_by_hostname(view, settings);
    if !deferred {
        warnings.extend(tpu::unknown_accelerators(view, settings));
    }
    Findings {
        violations,
        warnings,
    }
}

/// The TPU replicated jobs, with their index.
pub fn tpu_jobs<'v, 'a>(
    view: &'v JobSetView<'a>,
) -> impl Iterator<Item = (usize, &'v ReplicatedJob<'a>)> {
    view.replicated_jobs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_tpu())
}

/// Slice groups with more than one member, as (group name, member indexes).
pub fn multi_member_slice_groups<'a>(view: &JobSetView<'a>) -> Vec<(&'a str, Vec<usize>)> {
    slice_groups(view)
        .into_iter()
        .filter(|(_, members)| members.len() > 1)
        .collect()
}
