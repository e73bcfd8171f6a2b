//! P1–P3: the JAX processes of a JobSet (docs/rules.md): one per pod, all at once, with the
//! ids exactly 0..N-1. A TPU member's mode and counts are T1's and T2's, so P1 and P2 leave them
//! alone.
use crate::groups::JobSetPlan;
use crate::views::jobset_view::{CoordinatorRef, ReplicatedJob};
use crate::violation::{Rule, Violation};

/// The alternative each fix offers, true as a conditional: such a job, alone in its group
/// beside a JAX group that keeps P1–P3, is a batch job beside the JAX run.
const OWN_GROUP: &str =
    "or, if its pods run no JAX while other replicated jobs do, give it a groupName of its own";

/// What a member breaks: the field, the fact, what follows from it, and the fix.
struct Finding<'a> {
    rule: Rule,
    path: String,
    /// The replicated job the path is in; `None` for the JobSet's own fields.
    job: Option<&'a str>,
    fact: String,
    consequence: String,
    fix: String,
}

/// P1: Indexed, or its pods have no completion index, and so no process id.
fn p1<'a>(r: &ReplicatedJob<'a>) -> Option<Finding<'a>> {
    (!r.is_indexed()).then(|| Finding {
        rule: Rule::P1,
        job: Some(r.name),
        path: r.at.pod_template().job_spec_field("completionMode"),
        fact: format!("is {:?}", r.completion_mode.unwrap_or_default()),
        consequence: "so its pods have no completion index to take a JAX process id from".into(),
        fix: format!("remove it or set it to Indexed; {OWN_GROUP}"),
    })
}

/// P2: every pod at once, or fewer run than JAX_NUM_PROCESSES counts, or they run in waves.
fn p2<'a>(r: &ReplicatedJob<'a>) -> Option<Finding<'a>> {
    let p = r.parallelism;
    let at = r.at.pod_template();
    let (path, fact, consequence, set) = match r.completions {
        // A NonIndexed job may leave it out; P1 reports that mode.
        None if !r.is_indexed() => return None,
        None => (
            at.job_spec_field("completions"),
            "is not set, and the API server refuses an Indexed Job without it".to_string(),
            "so no child Job would ever be created".to_string(),
            format!("set completions and parallelism to {p}"),
        ),
        Some(c) if c == p => return None,
        Some(c) => (
            at.job_spec_field("parallelism"),
            format!("is {p} but completions is {c}"),
            if c < p {
                format!("so each Job runs only {c} pods where JAX_NUM_PROCESSES counts {p}, and jax.distributed.initialize waits for ever")
            } else {
                "so its pods run in waves, with process ids that collide or pass JAX_NUM_PROCESSES"
                    .to_string()
            },
            format!("set both to {c}"),
        ),
    };
    Some(Finding {
        rule: Rule::P2,
        job: Some(r.name),
        path,
        fact,
        consequence,
        fix: format!("every JAX process must run at once, {set}; {OWN_GROUP}"),
    })
}

/// P3: the coordinator, JAX process 0, is a pod that runs from the start.
fn p3<'a>(r: &ReplicatedJob<'a>, coordinator: Option<&CoordinatorRef>) -> Option<Finding<'a>> {
    let c = coordinator.filter(|c| c.replicated_job == r.name && c.pod_index >= r.parallelism)?;
    Some(Finding {
        rule: Rule::P3,
        job: None,
        path: "spec.coordinator.podIndex".into(),
        fact: format!(
            "is {}, but replicated job {:?} runs {} pods at once",
            c.pod_index, r.name, r.parallelism
        ),
        consequence: "so JAX process 0 would be a pod that starts only once others have ended".into(),
        fix: format!(
            "name a pod below {}; or, if the pods of {:?} run no JAX while other replicated jobs do, give it a groupName of its own",
            r.parallelism, r.name
        ),
    })
}

/// What `check` finds among the members with pods of the JAX groups of a JobSet opted in by its
/// own annotation (the plan has left out the batch jobs beside the JAX run).
fn judge_members<'a>(
    plan: &JobSetPlan<'_, 'a>,
    check: impl Fn(&ReplicatedJob<'a>) -> Option<Finding<'a>>,
) -> Vec<Violation> {
    plan.jax_groups
        .iter()
        .filter(|_| plan.jax_opted_in)
        .flat_map(|g| g.members.iter().copied())
        .filter(|r| r.replicas > 0)
        .filter_map(check)
        .map(|f| Violation {
            job: f.job.map(str::to_string),
            ..Violation::new(
                f.rule,
                f.path,
                format!("{}, {}", f.fact, f.consequence),
                f.fix,
            )
        })
        .collect()
}

pub fn p1_indexed(plan: &JobSetPlan) -> Vec<Violation> {
    judge_members(plan, |r| p1(r).filter(|_| !r.is_tpu()))
}

pub fn p2_all_processes_at_once(plan: &JobSetPlan) -> Vec<Violation> {
    judge_members(plan, |r| p2(r).filter(|_| !r.is_tpu()))
}

pub fn p3_coordinator_runs_from_the_start(plan: &JobSetPlan) -> Vec<Violation> {
    judge_members(plan, |r| p3(r, plan.coordinator))
}

/// A warning for each batch job beside the JAX run, naming what it breaks first: its pods get
/// no JAX env.
pub fn batch_jobs_beside_jax(plan: &JobSetPlan) -> Vec<String> {
    let why = if plan.jax_opted_in {
        "so it is taken for a batch job beside the JAX run, and its pods get no JAX env"
    } else {
        "so under jaxEnv: always its pods get no JAX env"
    };
    plan.batch_beside_jax
        .iter()
        .filter_map(|r| {
            let f = p1(r)
                .or_else(|| p2(r))
                .or_else(|| p3(r, plan.coordinator))?;
            let named = f
                .job
                .map(|name| format!(" (replicated job {name:?})"))
                .unwrap_or_default();
            Some(format!("{}{named}: {}, {why}", f.path, f.fact))
        })
        .collect()
}
