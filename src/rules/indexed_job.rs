//! J1–J4: what an opted-in plain Indexed Job needs for its pods to form one JAX run (SPEC §4.6),
//! and N2 for its pods.
use super::network;
use crate::json::map_str;
use crate::keys;
use crate::paths::TemplateAt;
use crate::views::job_view::{Counts, JobView};
use crate::violation::{Rule, Violation};

/// Every rule of an opted-in Job, in the order a rejection lists them.
pub fn check(job: &JobView) -> Vec<Violation> {
    [
        j1_pods_have_dns_names(job),
        j2_indexed_completion(job),
        j3_all_processes_at_once(job),
        j4_no_partial_admission(job),
        n2_pods_resolve_cluster_dns(job),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// N2: with more than one process, every pod dials the coordinator `<job>-0.<subdomain>` by name,
/// with or without the policy's env, so it holds whatever `jaxEnv` says (SPEC §6).
pub fn n2_pods_resolve_cluster_dns(job: &JobView) -> Option<Violation> {
    if job.completions? <= 1 {
        return None;
    }
    network::cluster_dns(
        None,
        job.template.host_network,
        job.template.dns_policy,
        job.template.spec_at(),
        "the coordinator's hostname",
    )
}

/// J1: the pods need DNS names, or no process can reach the coordinator `<job>-0`.
pub fn j1_pods_have_dns_names(job: &JobView) -> Option<Violation> {
    job.subdomain.is_none().then(|| {
        Violation::new(
            Rule::J1,
            TemplateAt::Job.spec_field("subdomain"),
            "is not set, so the Job's pods get no DNS names and no JAX process can reach the coordinator, the pod with completion index 0",
            "set it to the name of a headless Service (clusterIP: None) that selects the Job's pods, and create that Service",
        )
    })
}

/// J2: the JAX process id is the completion index, which only Indexed Jobs have.
pub fn j2_indexed_completion(job: &JobView) -> Option<Violation> {
    let problem = match (job.launch().indexed, job.completion_mode) {
        (true, _) => return None,
        (false, Some(mode)) => format!("is {mode:?}"),
        (false, None) => "is not set, and a Job defaults to NonIndexed".to_string(),
    };
    Some(Violation::new(
        Rule::J2,
        "spec.completionMode",
        problem,
        "set it to Indexed: each pod's JAX process id is its completion index",
    ))
}

/// J3: `jax.distributed.initialize` waits for every process, so all must run at once.
pub fn j3_all_processes_at_once(job: &JobView) -> Option<Violation> {
    let (path, problem, fix) = match job.launch().counts {
        Counts::AtOnce => return None,
        Counts::Unset | Counts::WorkQueue => (
            "spec.completions",
            "is not set".to_string(),
            format!(
                "set completions and parallelism both to the number of JAX processes (parallelism is {})",
                job.parallelism
            ),
        ),
        Counts::Differ(c) => (
            "spec.parallelism",
            format!("is {} but completions is {c}", job.parallelism),
            format!("every JAX process must run at once, set both to {c}"),
        ),
    };
    Some(Violation::new(Rule::J3, path, problem, fix))
}

/// J4: the policy would refuse the unsuspend of Kueue's partial admission, and the Job would hold
/// its quota for ever (docs/rules.md), so refuse it here, where the user reads the message.
pub fn j4_no_partial_admission(job: &JobView) -> Option<Violation> {
    let text = map_str(job.annotations, keys::KUEUE_JOB_MIN_PARALLELISM)?;
    let min: i64 = text.trim().parse().ok()?;
    if min >= i64::from(job.parallelism) {
        return None;
    }
    let lowered = match map_str(
        job.annotations,
        keys::KUEUE_JOB_COMPLETIONS_EQUAL_PARALLELISM,
    ) {
        Some("true") => "parallelism and completions",
        _ => "parallelism",
    };
    Some(Violation::new(
        Rule::J4,
        format!("metadata.annotations[{:?}]", keys::KUEUE_JOB_MIN_PARALLELISM),
        format!(
            "is {min}, below parallelism {}: Kueue's partial admission may start the Job with as few as {min} pods by lowering its {lowered}, but the JAX env of its pods counts {} processes and jax.distributed.initialize waits for all of them",
            job.parallelism, job.parallelism
        ),
        "remove the annotation: Kueue then admits the Job whole, or keeps it queued until it fits",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{json, Value};

    fn job(mut spec: Value) -> Value {
        spec["template"] = json!({"spec": {"subdomain": "svc", "containers": [{"name": "jax"}]}});
        json!({"metadata": {"name": "train"}, "spec": spec})
    }

    fn with_annotations(annotations: Value) -> Value {
        let mut object =
            job(json!({"completionMode": "Indexed", "completions": 4, "parallelism": 4}));
        object["metadata"]["annotations"] = annotations;
        object
    }

    #[rstest]
    #[case::indexed_and_all_at_once(job(json!({"completionMode": "Indexed", "completions": 4, "parallelism": 4})), vec![])]
    #[case::one_process_by_default_parallelism(job(json!({"completionMode": "Indexed", "completions": 1})), vec![])]
    #[case::non_indexed(job(json!({"completionMode": "NonIndexed", "completions": 4, "parallelism": 4})), vec![Rule::J2])]
    #[case::mode_unset(job(json!({"completions": 4, "parallelism": 4})), vec![Rule::J2])]
    #[case::fewer_running_than_completions(job(json!({"completionMode": "Indexed", "completions": 4, "parallelism": 2})), vec![Rule::J3])]
    #[case::no_completions(job(json!({"completionMode": "Indexed", "parallelism": 2})), vec![Rule::J3])]
    // Partial admission is refused.
    #[case::below(with_annotations(json!({"kueue.x-k8s.io/job-min-parallelism": "2"})), vec![Rule::J4])]
    #[case::zero(with_annotations(json!({"kueue.x-k8s.io/job-min-parallelism": "0"})), vec![Rule::J4])]
    #[case::equal(with_annotations(json!({"kueue.x-k8s.io/job-min-parallelism": "4"})), vec![])]
    #[case::not_a_number(with_annotations(json!({"kueue.x-k8s.io/job-min-parallelism": "two"})), vec![])]
    #[case::only_completions_flag(with_annotations(json!({"kueue.x-k8s.io/job-completions-equal-parallelism": "true"})), vec![])]
    fn judges_the_job(#[case] object: Value, #[case] broken: Vec<Rule>) {
        let view = JobView::parse(&object, "google.com/tpu").unwrap();
        let rules: Vec<Rule> = check(&view).into_iter().map(|v| v.rule).collect();
        assert_eq!(rules, broken);
    }

    #[rstest]
    #[case::parallelism_only(json!({"kueue.x-k8s.io/job-min-parallelism": "2"}), "parallelism")]
    #[case::completions_too(json!({"kueue.x-k8s.io/job-min-parallelism": "2", "kueue.x-k8s.io/job-completions-equal-parallelism": "true"}), "parallelism and completions")]
    fn j4_says_what_kueue_would_lower(#[case] annotations: Value, #[case] lowered: &str) {
        let object = with_annotations(annotations);
        let view = JobView::parse(&object, "google.com/tpu").unwrap();
        assert_eq!(
            j4_no_partial_admission(&view).unwrap().to_string(),
            format!("[J4] metadata.annotations[\"kueue.x-k8s.io/job-min-parallelism\"]: is 2, below parallelism 4: Kueue's partial admission may start the Job with as few as 2 pods by lowering its {lowered}, but the JAX env of its pods counts 4 processes and jax.distributed.initialize waits for all of them; remove the annotation: Kueue then admits the Job whole, or keeps it queued until it fits; see docs/rules.md, J4")
        );
    }

    #[test]
    fn no_subdomain_breaks_j1_and_says_to_make_the_service() {
        let mut object =
            job(json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2}));
        object["spec"]["template"]["spec"]
            .as_object_mut()
            .unwrap()
            .remove("subdomain");
        let view = JobView::parse(&object, "google.com/tpu").unwrap();
        let v = check(&view);
        assert_eq!(v.len(), 1);
        assert_eq!(
            v[0].to_string(),
            "[J1] spec.template.spec.subdomain: is not set, so the Job's pods get no DNS names and no JAX process can reach the coordinator, the pod with completion index 0; set it to the name of a headless Service (clusterIP: None) that selects the Job's pods, and create that Service; see docs/rules.md, J1"
        );
    }
}
