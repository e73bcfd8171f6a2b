//! Validation rules of SPEC §6, one small function per rule over the JobSet view. A rule returns
//! violations; warnings (suspicious but valid) come from their own functions.
pub mod elastic;
pub mod exclusive_placement;
pub mod indexed_job;
pub mod jax_processes;
pub mod kueue_topology;
pub mod network;
pub mod replica_groups;
pub mod tpu;

use crate::groups::JobSetPlan;
use crate::multikueue;
use crate::settings::Role;
use crate::violation::{Findings, Violation};

/// A check of the tables: a rule finds violations, a warning finds warnings.
type Check<T> = fn(&JobSetPlan) -> Vec<T>;
type RuleFn = Check<Violation>;
type WarningFn = Check<String>;

/// When the object is judged: at CREATE (and in background audit), or at an UPDATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    Create,
    Update,
}

/// When a rule of the table applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Always,
    /// T3 and T4 judge node selectors, which Kueue's flavour brings when it unsuspends a JobSet,
    /// so they apply once the JobSet no longer waits for a flavour; at the moment given, if one is.
    FlavourChosen(Option<Moment>),
    /// What no flavour can mend is said at CREATE, while the JobSet waits for one (§4.7). Only
    /// at CREATE: at an UPDATE that unsuspends, the old object's findings must not hold T4's
    /// violation, or the unsuspend would not count as new.
    WaitingAtCreate,
}

const fn rule(check: RuleFn) -> (RuleFn, When) {
    (check, When::Always)
}

/// Every rule in the order a rejection lists them: what a JobSet's shape needs (G, T, X, K, N),
/// then what its JAX processes need (P), whose fixes may rest on the shape's.
const RULES: [(RuleFn, When); 23] = [
    rule(replica_groups::g1_group_name_is_a_label),
    rule(replica_groups::g2_field_and_annotation_agree),
    rule(replica_groups::g3_no_cpu_job_among_slices),
    rule(replica_groups::g4_identical_slices),
    (
        replica_groups::g5_one_shape_per_queued_slice_group,
        When::WaitingAtCreate,
    ),
    rule(tpu::t1_indexed_completion),
    rule(tpu::t2_all_hosts_at_once),
    (
        tpu::t3_accelerator_and_topology_selected,
        When::FlavourChosen(Some(Moment::Create)),
    ),
    (
        tpu::t3_selected_once_a_flavour_is_chosen,
        When::FlavourChosen(Some(Moment::Update)),
    ),
    (tpu::t4_topology_fits_the_slice, When::FlavourChosen(None)),
    (tpu::t4_some_slice_fits, When::WaitingAtCreate),
    rule(exclusive_placement::x1_exclusive_placement),
    rule(exclusive_placement::x2_one_placement_per_slice_group),
    rule(exclusive_placement::x3_node_selector_flag_takes_effect),
    rule(exclusive_placement::x4_exclusive_key_not_pinned),
    rule(kueue_topology::k1_required_domain_holds_every_pod),
    rule(kueue_topology::k2_slice_size_keeps_slices_whole),
    rule(kueue_topology::k3_a_slice_stays_in_one_domain),
    rule(network::n1_hostnames_resolve),
    rule(network::n2_pods_resolve_cluster_dns),
    rule(jax_processes::p1_indexed),
    rule(jax_processes::p2_all_processes_at_once),
    rule(jax_processes::p3_coordinator_runs_from_the_start),
];

/// Every warning about a JobSet the policy judges (suspicious but valid), in the order a response
/// lists them.
const WARNINGS: [(WarningFn, When); 4] = [
    (exclusive_placement::single_slice_by_hostname, When::Always),
    (jax_processes::batch_jobs_beside_jax, When::Always),
    (replica_groups::coordinator_without_tpus, When::Always),
    (tpu::unknown_accelerators, When::FlavourChosen(None)),
];

/// What the checks of `table` that apply find, in the table's order.
fn found<T>(table: &[(Check<T>, When)], plan: &JobSetPlan, waits: bool, moment: Moment) -> Vec<T> {
    table
        .iter()
        .filter(|(_, when)| when.applies(waits, moment))
        .flat_map(|(check, _)| check(plan))
        .collect()
}

impl When {
    fn applies(self, waits: bool, moment: Moment) -> bool {
        match self {
            When::Always => true,
            When::FlavourChosen(only) => !waits && only.is_none_or(|m| m == moment),
            When::WaitingAtCreate => waits && moment == Moment::Create,
        }
    }
}

/// Whether the JobSet waits for a flavour, so that T3 and T4 wait too: it is suspended; or a
/// MultiKueue manager dispatches it, and the flavour of the manager's unsuspend goes nowhere; or,
/// at CREATE in the role `both`, it is queued in Kueue, whose webhook suspends it after this
/// mutating policy has run (SPEC §5; the role `validate` sees Kueue's `suspend` in the stored
/// object).
fn waits_for_a_flavour(plan: &JobSetPlan, moment: Moment) -> bool {
    let view = plan.view;
    view.suspend
        || multikueue::dispatched_elsewhere(view)
        || (moment == Moment::Create && plan.settings.role == Role::Both && view.queued())
}

/// Whether a JobSet at CREATE is the policy's, has TPU replicated jobs and waits in its queue for
/// a flavour: what the queue check asks before it looks the queue up.
pub fn waits_in_its_queue(plan: &JobSetPlan) -> bool {
    plan.in_scope
        && plan.view.tpu_jobs().next().is_some()
        && waits_for_a_flavour(plan, Moment::Create)
}

/// The verdict on a JobSet the policy judges; for one it does not, only the warnings about
/// what its pods will not get.
pub fn judge(plan: &JobSetPlan, moment: Moment) -> Findings {
    if !plan.in_scope {
        let warnings = replica_groups::names_without_a_label(plan);
        return Findings {
            violations: Vec::new(),
            warnings,
        };
    }
    let waits = waits_for_a_flavour(plan, moment);
    Findings {
        violations: found(&RULES, plan, waits, moment),
        warnings: found(&WARNINGS, plan, waits, moment),
    }
}
