//! Validation rules of SPEC §6, one small function per rule over the JobSet view. A rule
//! returns violations; warnings (suspicious but valid) come from their own functions.
pub mod groups;
pub mod network;
pub mod placement;
pub mod tpu;

use crate::groups::slice_groups;
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

/// Every rule in the order a rejection lists them. T3 and T4 judge node selectors, which Kueue
/// injects when it unsuspends a JobSet, so they wait while the JobSet is suspended.
const RULES: [(RuleFn, bool); 13] = [
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
];

pub fn check(view: &JobSetView, settings: &Settings) -> Findings {
    let violations = RULES
        .iter()
        .filter(|(_, deferred_while_suspended)| !(view.suspend && *deferred_while_suspended))
        .flat_map(|(rule, _)| rule(view, settings))
        .collect();
    let mut warnings = placement::single_slice_by_hostname(view, settings);
    if !view.suspend {
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
