//! A JobSet's facts for each replicated job (SPEC §3, §4), pure functions of its groups.
use crate::error::{add_at, mul_at, InputError};
use crate::facts::{Facts, JaxFacts, OffsetFacts};
use crate::groups::{Group, JobSetPlan};
use crate::keys;
use crate::names;
use crate::views::container_env;
use crate::views::jobset_view::{CoordinatorRef, ReplicatedJob};
use crate::views::pod_spec::tpu_order;

/// The group's first member that has pods: a replicated job may have `replicas: 0`, and its pods
/// never exist (SPEC §3). The first member when none has any (no pod needs a coordinator).
fn first_with_pods<'v, 'a>(group: &Group<'v, 'a>) -> &'v ReplicatedJob<'a> {
    group
        .members
        .iter()
        .find(|r| r.replicas > 0)
        .unwrap_or(&group.members[0])
}

/// The JAX group's process 0 (SPEC §4.4): `spec.coordinator` when it names a pod of the group, with
/// the id the numbering gives it (`starts` are the members' pod offsets); else pod 0 of job 0 of
/// the first member that has pods, id 0. `None` when no member has pods.
fn jax_coordinator(
    running: Option<&CoordinatorRef>,
    group: &Group,
    starts: &[u32],
) -> Result<Option<(String, u32)>, InputError> {
    if let Some(c) = running {
        let named = group
            .members
            .iter()
            .zip(starts)
            .find(|(m, _)| m.name == c.replicated_job);
        if let Some((rjob, &start)) = named {
            let path = "spec.coordinator";
            let earlier_pods = mul_at(c.job_index, rjob.parallelism, path)?;
            let id = add_at(add_at(start, earlier_pods, path)?, c.pod_index, path)?;
            return Ok(Some((c.pod(), id)));
        }
    }
    let first = group
        .members
        .iter()
        .find(|r| r.replicas > 0 && r.parallelism > 0);
    Ok(first.map(|r| (names::rjob_pod(r.name, 0, 0), 0)))
}

/// The `MEGASCALE_PORT` that the first TPU container of the slice group's coordinator sets itself,
/// for the coordinator address (SPEC §4.2). One that admission cannot read is left to the default,
/// and a warning says so (`Err`).
fn coordinator_port(
    running: Option<&CoordinatorRef>,
    group: &Group,
) -> Result<Option<u32>, String> {
    let rjob = match running {
        // Outside the group, the coordinator runs no TPU container.
        Some(c) => group
            .members
            .iter()
            .copied()
            .find(|m| m.name == c.replicated_job),
        None => Some(first_with_pods(group)),
    };
    let first = rjob.and_then(|r| {
        let containers = &r.template.containers;
        Some(&containers[*tpu_order(containers).first()?])
    });
    // A malformed env is reported at pod admission.
    let entries = first.and_then(|c| c.user_entries().ok());
    let own =
        entries.and_then(|e| container_env::own_value(&e, keys::ENV_MEGASCALE_PORT, &|_| None));
    let (Some(first), Some(value)) = (first, own) else {
        return Ok(None);
    };
    match value.as_deref().map(str::parse::<u16>) {
        Some(Ok(port)) if port > 0 => Ok(Some(u32::from(port))),
        _ => Err(format!(
            "container {:?} ({}): its MEGASCALE_PORT is not a port admission can read, so the coordinator address of slice group {:?} names the default port",
            first.name,
            first.path(),
            group.name
        )),
    }
}

/// The facts for each replicated job, in spec order, and the warnings found on the way.
pub fn facts(plan: &JobSetPlan) -> Result<(Vec<Facts>, Vec<String>), InputError> {
    let view = plan.view;
    let mut facts = vec![Facts::default(); view.replicated_jobs.len()];
    let mut warnings = Vec::new();

    if !view.has_native_groups() {
        let group_keys = plan.group_keys.as_deref().map_err(Clone::clone)?;
        for (f, keys) in facts.iter_mut().zip(group_keys) {
            f.group = Some(keys.clone());
        }
    }

    for group in &plan.slice_groups {
        let (total, starts) = group.jobs.clone()?;
        let outside = plan
            .coordinator
            .is_some_and(|c| !group.members.iter().any(|m| m.name == c.replicated_job));
        // `spec.coordinator` wherever it is (Pathways puts it on a CPU head), else one pod of the
        // group: never each member's own job 0, which would give each its own coordinator.
        let coordinator = plan.coordinator.map_or_else(
            || names::rjob_pod(first_with_pods(group).name, 0, 0),
            CoordinatorRef::pod,
        );
        let port = (total > 1).then(|| coordinator_port(plan.coordinator, group));
        let port = port.unwrap_or(Ok(None)).unwrap_or_else(|warning| {
            warnings.push(warning);
            None
        });
        for (rjob, offset) in group.members.iter().zip(starts) {
            let f = &mut facts[rjob.index];
            f.slice = Some(OffsetFacts { total, offset });
            f.slice_coordinator = Some(coordinator.clone());
            f.slice_coordinator_outside = outside;
            f.slice_coordinator_port = port;
        }
    }

    for group in &plan.jax_groups {
        let (total, starts) = group.pods.clone()?;
        let process_0 = jax_coordinator(plan.coordinator, group, &starts)?;
        for (rjob, offset) in group.members.iter().zip(starts) {
            facts[rjob.index].jax = Some(JaxFacts {
                total,
                offset,
                coordinator: process_0.as_ref().map(|(host, _)| host.clone()),
                coordinator_id: process_0.as_ref().map_or(0, |(_, id)| *id),
            });
        }
    }

    for (f, rjob) in facts.iter_mut().zip(&view.replicated_jobs) {
        // Its pods take no env of the ones that wait for it, and must not fall back to the
        // guess made for pods without facts.
        f.runs_first = rjob.runs_first && rjob.is_tpu();
        if f.slice_coordinator.is_some() || f.jax.is_some() || f.runs_first {
            f.subdomain = view.subdomain.map(str::to_string);
            f.pods_per_job = Some(rjob.parallelism);
        }
    }
    Ok((facts, warnings))
}

#[cfg(test)]
mod tests {
    //! These also run compiled to wasm32-wasip1 (`make test`), where `usize` is 32 bits.
    use super::*;
    use crate::settings::{JaxEnv, Settings};
    use crate::views::jobset_view::JobSetView;
    use rstest::rstest;
    use serde_json::{json, Value};

    const MAX: u32 = i32::MAX as u32;

    fn rjob(name: &str, replicas: u32, parallelism: u32, tpu: bool) -> Value {
        let resources = if tpu {
            json!({"limits": {"google.com/tpu": "4"}})
        } else {
            json!({})
        };
        json!({"name": name, "replicas": replicas, "template": {"spec": {
            "parallelism": parallelism, "completions": parallelism,
            "template": {"spec": {"containers": [{"name": "c", "resources": resources}]}}
        }}})
    }

    /// `n` TPU replicated jobs `s0`, `s1`, ... alike.
    fn slices(n: u32, replicas: u32, parallelism: u32) -> Vec<Value> {
        (0..n)
            .map(|i| rjob(&format!("s{i}"), replicas, parallelism, true))
            .collect()
    }

    /// The facts of replicated job `at` as the annotation holds them, or the error.
    #[rstest]
    #[case::replicas_times_parallelism_beyond_u32_is_an_error_not_a_wrap(vec![rjob("cpu", MAX, 4, false)], JaxEnv::Always, 0, Err("spec.replicatedJobs[0].replicas: the total over its group is larger than 4294967295"))]
    #[case::slice_sums_over_many_replicated_jobs_overflow_cleanly(
        slices(3, MAX, 1),
        JaxEnv::Annotated,
        0,
        Err("spec.replicatedJobs[2].replicas: the total over its group is larger than 4294967295")
    )]
    #[case::sums_up_to_u32_max_are_exact(vec![rjob("a", MAX, 1, true), rjob("b", MAX, 1, true), rjob("c", 1, 1, true)], JaxEnv::Annotated, 2, Ok(r#"{"group":{"name":"default","replicas":4294967295,"offset":4294967294},"slice":{"total":4294967295,"offset":4294967294},"coordinator":"a-0-0","podsPerJob":1}"#))]
    #[case::a_thousand_replicated_jobs_sum_in_order(slices(1000, 3, 2), JaxEnv::Annotated, 999, Ok(r#"{"group":{"name":"default","replicas":3000,"offset":2997},"slice":{"total":3000,"offset":2997},"coordinator":"s0-0-0","podsPerJob":2}"#))]
    #[case::a_cpu_driver_is_in_the_group_but_not_a_slice(vec![rjob("driver", 1, 1, false), rjob("workers", 4, 2, true)], JaxEnv::Annotated, 0, Ok(r#"{"group":{"name":"default","replicas":5,"offset":0}}"#))]
    #[case::the_slices_beside_a_cpu_driver_count_from_0(vec![rjob("driver", 1, 1, false), rjob("workers", 4, 2, true)], JaxEnv::Annotated, 1, Ok(r#"{"group":{"name":"default","replicas":5,"offset":1},"slice":{"total":4,"offset":0},"coordinator":"workers-0-0","podsPerJob":2}"#))]
    #[case::the_coordinator_is_in_the_first_member_with_pods_spare(vec![rjob("spare", 0, 2, true), rjob("main", 2, 2, true), rjob("more", 1, 2, true)], JaxEnv::Annotated, 0, Ok(r#"{"group":{"name":"default","replicas":3,"offset":0},"slice":{"total":3,"offset":0},"coordinator":"main-0-0","podsPerJob":2}"#))]
    #[case::the_coordinator_is_in_the_first_member_with_pods_main(vec![rjob("spare", 0, 2, true), rjob("main", 2, 2, true), rjob("more", 1, 2, true)], JaxEnv::Annotated, 1, Ok(r#"{"group":{"name":"default","replicas":3,"offset":0},"slice":{"total":3,"offset":0},"coordinator":"main-0-0","podsPerJob":2}"#))]
    #[case::the_coordinator_is_in_the_first_member_with_pods_more(vec![rjob("spare", 0, 2, true), rjob("main", 2, 2, true), rjob("more", 1, 2, true)], JaxEnv::Annotated, 2, Ok(r#"{"group":{"name":"default","replicas":3,"offset":2},"slice":{"total":3,"offset":2},"coordinator":"main-0-0","podsPerJob":2}"#))]
    fn facts_of(
        #[case] rjobs: Vec<Value>,
        #[case] jax_env: JaxEnv,
        #[case] at: usize,
        #[case] want: Result<&str, &str>,
    ) {
        let settings = Settings {
            jax_env,
            ..Settings::default()
        };
        let js = json!({"metadata": {"name": "js"}, "spec": {"replicatedJobs": rjobs}});
        let got = JobSetView::parse(&js, "google.com/tpu")
            .and_then(|view| facts(&JobSetPlan::new(&view, &settings)?).map(|(facts, _)| facts))
            .map(|f| f[at].to_annotation())
            .map_err(|e| e.to_string());
        assert_eq!(got, want.map(str::to_string).map_err(str::to_string));
    }
}
