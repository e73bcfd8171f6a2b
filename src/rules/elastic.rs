//! E1 and E2: resizes of ElasticJobSets (SPEC §5) and elastic Indexed Jobs (§4.6) that would
//! leave the values stamped at CREATE stale.
use crate::facts::JobFacts;
use crate::groups::JobSetPlan;
use crate::views::job_view::JobView;
use crate::views::jobset_view::{JobSetView, ReplicatedJob};
use crate::violation::{Rule, Violation};

fn counts(r: &ReplicatedJob) -> [(&'static str, Option<u32>); 2] {
    [
        ("parallelism", Some(r.parallelism)),
        ("completions", r.completions),
    ]
}

fn show(n: Option<u32>) -> String {
    n.map_or_else(|| "unset".to_string(), |n| n.to_string())
}

/// E1: one violation per changed field that would leave stamped values stale, judged on the
/// plan of the old object, whose values the pods were given.
pub fn stale_resizes(old: &JobSetPlan, new: &JobSetView) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut in_jax = vec![false; old.view.replicated_jobs.len()];
    for r in old.jax_groups.iter().flat_map(|g| &g.members) {
        in_jax[r.index] = true;
    }
    let pairs = old.view.replicated_jobs.iter().zip(&new.replicated_jobs);
    for (before, after) in pairs.filter(|(before, after)| before.name == after.name) {
        // The values of its pods that were computed from its parallelism, if any.
        let what = if in_jax[before.index] {
            "JAX_NUM_PROCESSES, JAX_PROCESS_ID and the JAX coordinator"
        } else if old.settings.tpu_worker_env && before.is_tpu() {
            "TPU_WORKER_ID and TPU_WORKER_HOSTNAMES"
        } else {
            continue;
        };
        for ((field, was), (_, is)) in counts(before).into_iter().zip(counts(after)) {
            if was != is {
                out.push(Violation::in_rjob(
                    after,
                    Rule::E1,
                    after.at.pod_template().job_spec_field(field),
                    format!(
                        "changed from {} to {}, but its pods get {what} computed from it when the JobSet was created, and a resize would leave them stale",
                        show(was),
                        show(is),
                    ),
                    "delete and recreate the JobSet with the new size",
                ));
            }
        }
    }
    out
}

/// E2: an UPDATE of a plain Job whose template carries `stamped` facts (SPEC §4.6) that would
/// leave its pods' JAX env stale, naming the field.
pub fn stale_job_resize(stamped: &JobFacts, old: &JobView, new: &JobView) -> Option<Violation> {
    let processes = stamped.completions;
    if new.completions != old.completions {
        Some(Violation::new(
            Rule::E2,
            "spec.completions",
            format!(
                "changed from {} to {}, but the JAX env of this Job's pods was set at creation for {processes} processes and running JAX processes cannot learn a new count",
                show(old.completions),
                show(new.completions),
            ),
            format!(
                "delete the Job and create it again with completions and parallelism both {}",
                show(new.completions)
            ),
        ))
    } else if new.parallelism != old.parallelism {
        Some(Violation::new(
            Rule::E2,
            "spec.parallelism",
            format!(
                "changed from {} to {}, but jax.distributed.initialize waits for all {processes} processes at once",
                old.parallelism, new.parallelism,
            ),
            "keep parallelism equal to completions",
        ))
    } else {
        None
    }
}
