//! P1–P3: the JAX processes of a JobSet (docs/rules.md): one per pod, all at once, with the
//! ids exactly 0..N-1. A TPU member's mode and counts are T1's and T2's, so P1 and P2 leave them
//! alone. What breaks them is read once, by [`Launch`]; the batch jobs beside the JAX run are the
//! members it finds breaking them, so what is refused and what is warned about cannot drift.
use crate::groups::JobSetPlan;
use crate::views::job_view::{Counts, Launch, NO_CHILD_JOB};
use crate::views::jobset_view::ReplicatedJob;
use crate::violation::{Rule, Violation};

/// The alternative each fix offers, true as a conditional: such a job, alone in its group
/// beside a JAX group that keeps P1–P3, is a batch job beside the JAX run.
const OWN_GROUP: &str =
    "or, if its pods run no JAX while other replicated jobs do, give it a groupName of its own";

/// P1's field and fact: the mode that gives its pods no completion index.
fn mode_fact(r: &ReplicatedJob) -> (String, String) {
    let path = r.at.pod_template().job_spec_field("completionMode");
    (
        path,
        format!("is {:?}", r.completion_mode.unwrap_or_default()),
    )
}

/// P2's field and fact, where the counts break it, and the counts a fix sets.
fn counts_fact(r: &ReplicatedJob, l: &Launch) -> Option<(String, String, &'static str)> {
    let (field, fact, set) = l.counts_fact()?;
    Some((r.at.pod_template().job_spec_field(field), fact, set))
}

/// P3's field and fact: the coordinator's pod `pod`, past the pods that run at once.
fn coordinator_fact(r: &ReplicatedJob, pod: u32) -> (String, String) {
    let fact = format!(
        "is {pod}, but replicated job {:?} runs {} pods at once",
        r.name, r.parallelism
    );
    ("spec.coordinator.podIndex".to_string(), fact)
}

/// The members with pods of the JAX groups of a JobSet opted in by its own annotation (the plan
/// has left out the batch jobs beside the JAX run), each with how its Jobs run their pods.
fn members<'p, 'a: 'p>(
    plan: &'p JobSetPlan<'_, 'a>,
) -> impl Iterator<Item = (&'p ReplicatedJob<'a>, Launch)> + 'p {
    plan.jax_groups
        .iter()
        .filter(|_| plan.jax_opted_in)
        .flat_map(|g| g.members.iter().copied())
        .filter(|r| r.replicas > 0)
        .map(|r| (r, r.launch(plan.coordinator)))
}

/// P1: Indexed, or its pods have no completion index, and so no process id.
pub fn p1_indexed(plan: &JobSetPlan) -> Vec<Violation> {
    members(plan)
        .filter(|(r, l)| !r.is_tpu() && !l.indexed)
        .map(|(r, _)| {
            let (path, fact) = mode_fact(r);
            let consequence = "so its pods have no completion index to take a JAX process id from";
            let fix = format!("remove it or set it to Indexed; {OWN_GROUP}");
            Violation::in_rjob(r, Rule::P1, path, format!("{fact}, {consequence}"), fix)
        })
        .collect()
}

/// P2: every pod at once, or fewer run than JAX_NUM_PROCESSES counts, or they run in waves.
pub fn p2_all_processes_at_once(plan: &JobSetPlan) -> Vec<Violation> {
    members(plan)
        .filter(|(r, _)| !r.is_tpu())
        .filter_map(|(r, l)| {
            let (path, fact, set) = counts_fact(r, &l)?;
            let p = l.parallelism;
            let consequence = match l.counts {
                Counts::Differ(c) if c < p => format!("so each Job runs only {c} pods where JAX_NUM_PROCESSES counts {p}, and jax.distributed.initialize waits for ever"),
                Counts::Differ(_) => "so its pods run in waves, with process ids that collide or pass JAX_NUM_PROCESSES".to_string(),
                _ => NO_CHILD_JOB.to_string(),
            };
            let fix = format!(
                "every JAX process must run at once, set {set} to {}; {OWN_GROUP}",
                l.pods
            );
            Some(Violation::in_rjob(r, Rule::P2, path, format!("{fact}, {consequence}"), fix))
        })
        .collect()
}

/// P3: the coordinator, JAX process 0, is a pod that runs from the start.
pub fn p3_coordinator_runs_from_the_start(plan: &JobSetPlan) -> Vec<Violation> {
    members(plan)
        .filter_map(|(r, l)| {
            let (path, fact) = coordinator_fact(r, l.late_coordinator?);
            let consequence = "so JAX process 0 would be a pod that starts only once others have ended";
            let fix = format!(
                "name a pod below {}; or, if the pods of {:?} run no JAX while other replicated jobs do, give it a groupName of its own",
                r.parallelism, r.name
            );
            Some(Violation::new(Rule::P3, path, format!("{fact}, {consequence}"), fix))
        })
        .collect()
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
            let l = r.launch(plan.coordinator);
            let named = format!(" (replicated job {:?})", r.name);
            let ((path, fact), named) = match counts_fact(r, &l) {
                _ if !l.indexed => (mode_fact(r), named),
                Some((path, fact, _)) => ((path, fact), named),
                None => (coordinator_fact(r, l.late_coordinator?), String::new()),
            };
            Some(format!("{path}{named}: {fact}, {why}"))
        })
        .collect()
}
