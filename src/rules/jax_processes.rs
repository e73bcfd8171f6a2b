//! P1–P3: the JAX processes of a JobSet (docs/rules.md): one per pod, all at once, with the
//! ids exactly 0..N-1. A TPU member's mode and counts are T1's and T2's, so P1 and P2 leave them
//! alone. What breaks them is read once, by `broken`, for the refusals and the warnings about the
//! batch jobs beside the JAX run alike, so the two cannot drift.
use crate::groups::JobSetPlan;
use crate::views::job_view::{Counts, NO_CHILD_JOB};
use crate::views::jobset_view::{CoordinatorRef, ReplicatedJob};
use crate::violation::{Rule, Violation};

/// The alternative each fix offers, true as a conditional: such a job, alone in its group
/// beside a JAX group that keeps P1–P3, is a batch job beside the JAX run.
const OWN_GROUP: &str =
    "or, if its pods run no JAX while other replicated jobs do, give it a groupName of its own";

/// What `r` breaks of P1–P3, in the rules' order, each fact followed by what follows from it, or
/// by `why` instead (the warning about a batch job beside the JAX run). P1: without a completion
/// index there is no process id; P2: fewer pods run than JAX_NUM_PROCESSES counts, or in waves;
/// P3: the coordinator, JAX process 0, starts only once others have ended.
fn broken(
    r: &ReplicatedJob,
    coordinator: Option<&CoordinatorRef>,
    why: Option<&str>,
) -> Vec<Violation> {
    let launch = r.launch(coordinator);
    let (p, at) = (launch.parallelism, r.at.pod_template());
    let said = |fact: String, so: &str| format!("{fact}, {}", why.unwrap_or(so));
    let mut out = Vec::new();
    if !launch.indexed {
        let fact = format!("is {:?}", r.completion_mode.unwrap_or_default());
        let so = "so its pods have no completion index to take a JAX process id from";
        let fix = format!("remove it or set it to Indexed; {OWN_GROUP}");
        let path = at.job_spec_field("completionMode");
        out.push(Violation::in_rjob(r, Rule::P1, path, said(fact, so), fix));
    }
    if let Some((field, fact, set)) = launch.counts_fact() {
        let so = match launch.counts {
            Counts::Differ(c) if c < p => format!("so each Job runs only {c} pods where JAX_NUM_PROCESSES counts {p}, and jax.distributed.initialize waits for ever"),
            Counts::Differ(_) => "so its pods run in waves, with process ids that collide or pass JAX_NUM_PROCESSES".into(),
            _ => NO_CHILD_JOB.into(),
        };
        let fix = format!(
            "every JAX process must run at once, set {set} to {}; {OWN_GROUP}",
            launch.pods
        );
        let path = at.job_spec_field(field);
        out.push(Violation::in_rjob(r, Rule::P2, path, said(fact, &so), fix));
    }
    if let Some(pod) = launch.late_coordinator {
        let (name, path) = (r.name, "spec.coordinator.podIndex");
        let fact = format!("is {pod}, but replicated job {name:?} runs {p} pods at once");
        let so = "so JAX process 0 would be a pod that starts only once others have ended";
        let fix = format!("name a pod below {p}; or, if the pods of {name:?} run no JAX while other replicated jobs do, give it a groupName of its own");
        out.push(Violation::new(Rule::P3, path, said(fact, so), fix));
    }
    out
}

/// What `rule` finds among the members with pods of the JAX groups of a JobSet opted in by its
/// own annotation (the plan has left out the batch jobs beside the JAX run).
fn judge_members(plan: &JobSetPlan, rule: Rule) -> Vec<Violation> {
    plan.jax_groups
        .iter()
        .filter(|_| plan.jax_opted_in)
        .flat_map(|g| g.members.iter().copied())
        .filter(|r| r.replicas > 0 && (rule == Rule::P3 || !r.is_tpu()))
        .flat_map(|r| broken(r, plan.coordinator, None))
        .filter(|v| v.rule == rule)
        .collect()
}

pub fn p1_indexed(plan: &JobSetPlan) -> Vec<Violation> {
    judge_members(plan, Rule::P1)
}

pub fn p2_all_processes_at_once(plan: &JobSetPlan) -> Vec<Violation> {
    judge_members(plan, Rule::P2)
}

pub fn p3_coordinator_runs_from_the_start(plan: &JobSetPlan) -> Vec<Violation> {
    judge_members(plan, Rule::P3)
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
            let v = broken(r, plan.coordinator, Some(why)).into_iter().next()?;
            let named = v.job.map(|name| format!(" (replicated job {name:?})"));
            Some(format!(
                "{}{}: {}",
                v.path,
                named.unwrap_or_default(),
                v.problem
            ))
        })
        .collect()
}
