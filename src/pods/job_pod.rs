//! Pods of an opted-in plain Indexed Job (SPEC §4.6). The Job is a JAX group of its own, its pods
//! numbered by completion index, so §4.4's numbering ([`super::jax`]) applies unchanged with the
//! coordinator at index 0: no swap.
use super::jax::{self, JaxGroup, Processes};
use super::pod_plan::{env_changes, field_ref, PodPlan};
use crate::error::{count_at, InputError};
use crate::facts::JobFacts;
use crate::keys;
use crate::names;
use crate::paths::SpecAt;
use crate::settings::{JaxEnv, Settings};
use crate::views::container_env::WantedVar;
use crate::views::pod_spec::{tpu_order, ContainerView};
use crate::views::pod_view::PodView;

/// Where the Job controller puts a pod of the Job.
#[derive(Debug, Clone, Copy)]
pub struct JobPlace<'a> {
    pub job: &'a str,
    pub subdomain: &'a str,
    pub completion_index: u32,
}

/// The JAX variables of each container, in container order. With two or more TPU containers,
/// each is a JAX process of its own (k, as in §4.4) and the other containers get none;
/// otherwise the pod is one process and every container gets its env.
pub fn jax_env(
    containers: &[ContainerView],
    job: &JobFacts,
    place: &JobPlace,
    port: u16,
    spec: SpecAt,
) -> Result<Vec<Vec<WantedVar>>, InputError> {
    let order = tpu_order(containers);
    let n = count_at(order.len(), &spec.field("containers"))?;
    let coordinator = names::address(&names::hostname(place.job, 0), place.subdomain);
    let group = JaxGroup {
        pods: job.completions,
        coordinator: &coordinator,
        coordinator_pod: 0,
        port,
    };
    let processes = if n >= 2 {
        Processes::PerTpuContainer(n)
    } else {
        Processes::PerPod
    };
    let index = place.completion_index;
    jax::vars(&group, index, processes, &order, containers.len())
}

/// A pod of an opted-in plain Indexed Job (SPEC §4.6): the JAX env from the Job's `name` and the
/// pod's completion index, which the Job controller put on it, and the completions stamped at Job
/// CREATE. Nothing else is added. `jaxEnv: never` turns it off.
pub fn plan(pod: &PodView, job: &JobFacts, settings: &Settings) -> Result<PodPlan, InputError> {
    if settings.jax_env == JaxEnv::Never {
        return Ok(PodPlan::default());
    }
    let name = pod.job_name();
    let index = pod.controller_count(keys::COMPLETION_INDEX)?;
    let subdomain = pod.facts.subdomain.as_deref().or(pod.subdomain);
    let (Some(name), Some(completion_index), Some(subdomain)) = (name, index, subdomain) else {
        return Ok(PodPlan::unchanged(format!(
            "pod of an opted-in Job: no {} label or owning Job, no {}, or no subdomain, so no Job controller made it from an admitted Indexed Job; left unchanged",
            keys::JOB_NAME,
            keys::COMPLETION_INDEX
        )));
    };
    let containers = &pod.containers;
    let place = JobPlace {
        job: name,
        subdomain,
        completion_index,
    };
    let port = settings.jax_coordinator_port;
    let wanted = jax_env(containers, job, &place, port, SpecAt::Pod)?;
    let lookup = |path: &str| field_ref(pod, &[], path);
    let (env_changes, warnings) = env_changes(containers, wanted, &lookup)?;
    Ok(PodPlan {
        env_changes,
        warnings,
        ..PodPlan::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each container's JAX env as `NAME=value`, for pod 3 of a Job "train" of `completions` in
    /// subdomain "svc", whose containers ask for `chips` TPU chips each.
    fn values(chips: &[u32], completions: u32, port: u16) -> Result<Vec<Vec<String>>, InputError> {
        let containers: Vec<_> = (0..)
            .zip(chips)
            .map(|(i, &n)| ContainerView::for_test("containers", i, n))
            .collect();
        let place = JobPlace {
            job: "train",
            subdomain: "svc",
            completion_index: 3,
        };
        let job = JobFacts { completions };
        let wanted = jax_env(&containers, &job, &place, port, SpecAt::Pod)?;
        let line = |v: &WantedVar| format!("{}={}", v.name, v.value);
        Ok(wanted
            .iter()
            .map(|vars| vars.iter().map(line).collect())
            .collect())
    }

    /// JAX process `id` of `count`, whose coordinator listens on `port`.
    fn process(id: u32, count: u32, port: u16) -> Vec<String> {
        vec![
            format!("JAX_COORDINATOR_ADDRESS=train-0.svc:{port}"),
            format!("JAX_NUM_PROCESSES={count}"),
            format!("JAX_PROCESS_ID={id}"),
        ]
    }

    #[test]
    fn a_gpu_pod_is_one_process_and_every_container_gets_it() {
        let one = process(3, 4, 6666);
        assert_eq!(values(&[0, 0], 4, 6666).unwrap(), vec![one.clone(), one]);
    }

    #[test]
    fn two_tpu_containers_are_two_processes_and_a_sidecar_gets_none() {
        assert_eq!(
            values(&[2, 0, 2], 4, 1234).unwrap(),
            vec![process(6, 8, 1234), vec![], process(7, 8, 1234)]
        );
    }

    #[test]
    fn counts_beyond_u32_are_errors_not_wraps() {
        assert_eq!(
            values(&[2, 2], u32::MAX, 1).unwrap_err().to_string(),
            "metadata.annotations: the total over its group is larger than 4294967295"
        );
    }
}
