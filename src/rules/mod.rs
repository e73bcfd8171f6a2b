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

use crate::error::InputError;
use crate::groups::JobSetPlan;
use crate::multikueue;
use crate::settings::Role;
use crate::views::jobset_view::JobSetView;
use crate::violation::Violation;

/// What validation found in a JobSet.
#[derive(Debug, Default, PartialEq)]
pub struct Findings {
    pub violations: Vec<Violation>,
    pub warnings: Vec<String>,
    /// Whether the JobSet is the policy's, has TPU replicated jobs, and T3 and T4 waited for
    /// its flavour: what the queue check asks of a JobSet before it looks its queue up.
    pub waits_for_a_flavour: bool,
}

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
    /// T3 and T4 judge node selectors, which Kueue injects when it unsuspends a JobSet, so they
    /// wait while it is suspended or queued; at the moment given, if one is.
    Unsuspended(Option<Moment>),
    /// What no flavour can mend is said at CREATE, while the JobSet waits in the queue
    /// (§4.7). Only at CREATE: at an UPDATE that unsuspends, the old object's findings must not
    /// hold T4's violation, or the unsuspend would not count as new.
    SuspendedAtCreate,
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
        When::SuspendedAtCreate,
    ),
    rule(tpu::t1_indexed_completion),
    rule(tpu::t2_all_hosts_at_once),
    (
        tpu::t3_accelerator_and_topology_selected,
        When::Unsuspended(Some(Moment::Create)),
    ),
    (
        tpu::t3_selected_once_a_flavour_is_chosen,
        When::Unsuspended(Some(Moment::Update)),
    ),
    (tpu::t4_topology_fits_the_slice, When::Unsuspended(None)),
    (tpu::t4_some_slice_fits, When::SuspendedAtCreate),
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
    (tpu::unknown_accelerators, When::Unsuspended(None)),
];

/// What the checks of `table` that apply find, in the table's order.
fn found<T>(
    table: &[(Check<T>, When)],
    plan: &JobSetPlan,
    deferred: bool,
    moment: Moment,
) -> Vec<T> {
    table
        .iter()
        .filter(|(_, when)| when.applies(deferred, moment))
        .flat_map(|(check, _)| check(plan))
        .collect()
}

impl When {
    fn applies(self, deferred: bool, moment: Moment) -> bool {
        match self {
            When::Always => true,
            When::Unsuspended(only) => !deferred && only.is_none_or(|m| m == moment),
            When::SuspendedAtCreate => deferred && moment == Moment::Create,
        }
    }
}

/// Whether the policy judges this JobSet at all: it has a TPU replicated job or the JAX env is on.
/// Other JobSets are JobSet's own webhook's to judge (SPEC §6, last paragraph).
pub fn in_scope(plan: &JobSetPlan) -> bool {
    plan.view.tpu_jobs().next().is_some() || plan.jax_enabled
}

/// Whether T3 and T4 wait: the JobSet is suspended; or a MultiKueue manager dispatches it, and
/// the flavour of the manager's unsuspend goes nowhere; or, at CREATE in the role `both`, it is
/// queued in Kueue, whose webhook suspends it after this mutating policy has run (SPEC §5; the
/// role `validate` sees Kueue's `suspend` in the stored object).
pub fn deferred(view: &JobSetView, moment: Moment, role: Role) -> bool {
    view.suspend
        || multikueue::dispatched_elsewhere(view)
        || (moment == Moment::Create && role == Role::Both && view.queued())
}

/// The input errors of a JobSet the policy judges (SPEC §6): a coordinator that names no pod, on
/// which every process would wait. Every role refuses them, since the plan of the env reads it.
pub fn check_input(plan: &JobSetPlan) -> Result<(), InputError> {
    let view = plan.view;
    let Some(c) = view.coordinator.as_ref().filter(|_| in_scope(plan)) else {
        return Ok(());
    };
    let Some(rjob) = view.replicated_job(c.replicated_job) else {
        return Err(InputError::invalid(
            "spec.coordinator.replicatedJob",
            format!("no replicated job is named {:?}", c.replicated_job),
        ));
    };
    // The one error of an index past the `count` things that `rjob` has.
    let past = |field: &str, index: u32, count: u32, has: String| {
        let last = count.saturating_sub(1);
        let name = rjob.name;
        let reason = format!("is {index} but replicated job {name:?} {has}; use 0 to {last}");
        Err(InputError::invalid(field, reason))
    };
    if c.job_index >= rjob.replicas {
        let has = format!("has {} replicas", rjob.replicas);
        return past("spec.coordinator.jobIndex", c.job_index, rjob.replicas, has);
    }
    // The completions the Job controller runs: the field, else parallelism (the API server
    // refuses an Indexed Job without it, which T2 reports).
    let pods = rjob.completions.unwrap_or(rjob.parallelism);
    if c.pod_index >= pods {
        let has = format!("runs {pods} pods per job");
        return past("spec.coordinator.podIndex", c.pod_index, pods, has);
    }
    Ok(())
}

/// The findings at JobSet CREATE (SPEC §5): the verdict where the role judges; in the role
/// `mutate`, which judges nothing, only the input errors.
pub fn judge_create(plan: &JobSetPlan) -> Result<Findings, InputError> {
    if !plan.settings.role.validates() {
        check_input(plan)?;
        return Ok(Findings::default());
    }
    judge(plan, Moment::Create)
}

/// The verdict on a JobSet the policy judges; for one it does not, only the warnings about
/// what its pods will not get.
pub fn judge(plan: &JobSetPlan, moment: Moment) -> Result<Findings, InputError> {
    check_input(plan)?;
    if !in_scope(plan) {
        return Ok(Findings {
            warnings: replica_groups::names_without_a_label(plan),
            ..Findings::default()
        });
    }
    let deferred = deferred(plan.view, moment, plan.settings.role);
    Ok(Findings {
        violations: found(&RULES, plan, deferred, moment),
        warnings: found(&WARNINGS, plan, deferred, moment),
        waits_for_a_flavour: deferred && plan.view.tpu_jobs().next().is_some(),
    })
}
