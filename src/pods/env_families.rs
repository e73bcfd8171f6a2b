//! The env families put together, for a JobSet pod at pod admission or for the pods a template
//! will make at the JobSet CREATE warnings.
use super::jax;
use super::multislice;
use super::place::PodPlace;
use super::tpu_host;
use crate::error::{add_at, count_at, mul_at, InputError};
use crate::facts::Facts;
use crate::json::Object;
use crate::keys;
use crate::paths::SpecAt;
use crate::settings::{JaxEnv, Settings};
use crate::views::container_env::{self, WantedVar};
use crate::views::pod_spec::{tpu_order, ContainerView};

/// A pod (or a pod template, at JobSet admission) whose env is computed.
pub struct PodEnv<'a> {
    /// Where the pod spec is, for messages.
    pub spec: SpecAt,
    pub containers: &'a [ContainerView<'a>],
    pub facts: &'a Facts,
    pub place: &'a PodPlace<'a>,
    /// The pod's annotations, for the controller's coordinator when there are no facts.
    pub annotations: Option<&'a Object>,
}

/// The variables each container should have, in container order: the multislice env, the TPU
/// host env, then the JAX env, and the warnings about what could not be computed. `lookup`
/// answers the pod's `fieldRef` paths.
pub fn wanted_env(
    pod: &PodEnv,
    settings: &Settings,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(Vec<Vec<WantedVar>>, Vec<String>), InputError> {
    let (facts, place) = (pod.facts, pod.place);
    let mut out: Vec<Vec<WantedVar>> = vec![Vec::new(); pod.containers.len()];
    let mut warnings = Vec::new();
    let order = tpu_order(pod.containers);
    let n = count_at(order.len(), &pod.spec.field("containers"))?;
    let mut give = |per_k: Vec<Vec<WantedVar>>| {
        for (&i, vars) in order.iter().zip(per_k) {
            out[i].extend(vars);
        }
    };

    if n > 0 && settings.multislice_env {
        let own_ports = own_megascale_ports(pod, &order, lookup)?;
        let (per_k, guess) = multislice::vars(facts, place, pod.annotations, &own_ports)?;
        warnings.extend(guess);
        give(per_k);
    }
    if n > 0 && settings.tpu_worker_env {
        match (place.completion_index, facts.pods_per_job) {
            (Some(c), Some(hosts)) => {
                let (ports, unresolved) = process_ports(pod, &order, lookup)?;
                warnings.extend(unresolved);
                give(tpu_host::vars(place, c, hosts, &ports)?);
            }
            _ => warnings.push(format!(
                "pod of JobSet {:?}: no completion index or no facts from JobSet admission, so the TPU host env was not set",
                place.jobset
            )),
        }
    }
    if settings.jax_env != JaxEnv::Never {
        let (per_container, why_not) = jax_vars(pod, settings, &order, n)?;
        warnings.extend(why_not);
        for (o, vars) in out.iter_mut().zip(per_container) {
            o.extend(vars);
        }
    }
    Ok((out, warnings))
}

/// Each TPU container's `TPU_PROCESS_PORT`: its own, where it sets one, else the default. A
/// value admission cannot resolve is taken as the default, and a warning says so.
fn process_ports(
    pod: &PodEnv,
    order: &[usize],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(Vec<String>, Vec<String>), InputError> {
    let (mut ports, mut warnings) = (Vec::with_capacity(order.len()), Vec::new());
    for (k, &i) in (0u32..).zip(order) {
        let c = &pod.containers[i];
        let default = add_at(tpu_host::PROCESS_BASE_PORT, k, "spec.containers")?.to_string();
        match container_env::own_value(&c.user_entries()?, keys::ENV_TPU_PROCESS_PORT, lookup) {
            None => ports.push(default),
            Some(Some(port)) => ports.push(port),
            Some(None) => {
                warnings.push(format!(
                    "container {:?} ({}): its TPU_PROCESS_PORT cannot be resolved at admission, so TPU_PROCESS_ADDRESSES lists port {default} for it",
                    c.name,
                    c.path()
                ));
                ports.push(default);
            }
        }
    }
    Ok((ports, warnings))
}

/// Each TPU container's own `MEGASCALE_PORT`, where it sets one that admission can read.
fn own_megascale_ports(
    pod: &PodEnv,
    order: &[usize],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Option<String>>, InputError> {
    order
        .iter()
        .map(|&i| {
            let entries = pod.containers[i].user_entries()?;
            Ok(container_env::own_value(&entries, keys::ENV_MEGASCALE_PORT, lookup).flatten())
        })
        .collect()
}

/// JAX distributed env (SPEC §4.4) for a pod of the JAX group, per container: in a TPU group each
/// TPU container is a process of its own, else the pod is one and every container gets its env;
/// none, and the warning why, for a pod without a completion index.
fn jax_vars(
    pod: &PodEnv,
    settings: &Settings,
    order: &[usize],
    n: u32,
) -> Result<(Vec<Vec<WantedVar>>, Option<String>), InputError> {
    let (facts, place) = (pod.facts, pod.place);
    let Some(group) = &facts.jax else {
        return Ok((Vec::new(), None));
    };
    // Facts written before `jax.coordinator` existed name process 0 in `coordinator`, and number
    // from it (SPEC §9). No coordinator at all: no member of the group has pods, so there is no pod
    // to serve either.
    let coordinator = group
        .coordinator
        .as_deref()
        .or(facts.slice_coordinator.as_deref());
    let (Some(coordinator), Some(per_job)) = (coordinator, facts.pods_per_job) else {
        return Ok((Vec::new(), None));
    };
    let Some(completion_index) = place.completion_index else {
        let warning = format!(
            "pod of JobSet {:?}: no {} on the pod, so JAX_PROCESS_ID could not be computed and the JAX env was not set",
            place.jobset,
            keys::COMPLETION_INDEX
        );
        return Ok((Vec::new(), Some(warning)));
    };
    let path = "metadata.annotations";
    let job_start = add_at(group.offset, mul_at(place.job_index, per_job, path)?, path)?;
    let pod_number = add_at(job_start, completion_index, path)?;
    let address = place.address(coordinator);
    let jax_group = jax::JaxGroup {
        pods: group.total,
        coordinator: &address,
        coordinator_pod: group.coordinator_id,
        port: settings.jax_coordinator_port,
    };
    let processes = if facts.slice.is_some() {
        jax::Processes::PerTpuContainer(n)
    } else {
        jax::Processes::PerPod
    };
    let containers = pod.containers.len();
    Ok((
        jax::vars(&jax_group, pod_number, processes, order, containers)?,
        None,
    ))
}
