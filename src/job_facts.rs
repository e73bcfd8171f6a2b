//! The facts an opted-in plain Indexed Job's pods need (SPEC §4.6), as `jobset_facts` computes a
//! JobSet's: a pure function of the Job view, stamped by `mutate::job_patch`.
use crate::facts::{Facts, JobFacts};
use crate::views::job_view::JobView;

/// One JAX process per completion index. Where the rules ran, J3 holds and completions equals
/// parallelism; where they did not (the role `mutate`), the validating policy refuses any
/// other Job.
pub fn job_facts(view: &JobView) -> JobFacts {
    JobFacts {
        completions: view.completions.unwrap_or(view.parallelism),
    }
}

/// What the Job's pods cannot see themselves: how many processes there are. The subdomain is
/// on the pod already; it is stamped too, as for JobSets, and wins over the pod's own where
/// both exist.
pub fn facts(view: &JobView, job: JobFacts) -> Facts {
    Facts {
        job: Some(job),
        subdomain: view.subdomain.map(str::to_string),
        ..Facts::default()
    }
}
