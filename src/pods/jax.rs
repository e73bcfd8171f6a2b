//! JAX distributed env (SPEC §4.4), as a pure function of the group's layout, the pod's number in
//! it, its TPU containers and the port. Nothing here knows about JobSets, so that a plain Indexed
//! Job (§4.6) numbers its pods the same way.
use crate::error::{add_at, mul_at, InputError};
use crate::keys;
use crate::views::container_env::WantedVar;

/// A group of JAX pods, numbered 0..pods-1 by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JaxGroup<'a> {
    pub pods: u32,
    /// Address (no port) of the pod that runs process 0.
    pub coordinator: &'a str,
    /// The number the caller's numbering gives that pod. It swaps ids with pod 0:
    /// `jax.distributed.initialize` starts the coordination service in process 0 and every
    /// other process dials the coordinator address, so the two must be the same pod.
    pub coordinator_pod: u32,
    pub port: u16,
}

/// How many JAX processes a pod runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Processes {
    /// One, whose env every container gets (a CPU or GPU pod).
    PerPod,
    /// One per TPU container, k = 0..n-1 (TPU groups; tpu7x runs two).
    PerTpuContainer(u32),
}

/// Each container's JAX variables, in container order, for the pod numbered `pod`: under
/// [`Processes::PerPod`] every container gets the pod's; under [`Processes::PerTpuContainer`],
/// TPU container k (`order[k]`) is process (pod id)·n + k of pods·n, and the others get none.
pub fn vars(
    group: &JaxGroup,
    pod: u32,
    processes: Processes,
    order: &[usize],
    containers: usize,
) -> Result<Vec<Vec<WantedVar>>, InputError> {
    let path = "metadata.annotations";
    let coordinator = format!("{}:{}", group.coordinator, group.port);
    let id = match pod {
        p if p == group.coordinator_pod => 0,
        0 => group.coordinator_pod,
        p => p,
    };
    let one = |count: u32, id: u32| {
        vec![
            WantedVar::new(keys::ENV_JAX_COORDINATOR, &coordinator),
            WantedVar::new(keys::ENV_JAX_NUM_PROCESSES, count),
            WantedVar::new(keys::ENV_JAX_PROCESS_ID, id),
        ]
    };
    let mut out = vec![Vec::new(); containers];
    match processes {
        Processes::PerPod => out.fill(one(group.pods, id)),
        Processes::PerTpuContainer(n) => {
            let count = mul_at(group.pods, n, path)?;
            let base = mul_at(id, n, path)?;
            for (k, &i) in (0..n).zip(order) {
                out[i] = one(count, add_at(base, k, path)?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(pods: u32, coordinator: &str, coordinator_pod: u32, port: u16) -> JaxGroup<'_> {
        JaxGroup {
            pods,
            coordinator,
            coordinator_pod,
            port,
        }
    }

    /// The variables of each process of the pod numbered `pod`, one container each.
    fn per_process(
        group: &JaxGroup,
        pod: u32,
        processes: Processes,
    ) -> Result<Vec<Vec<WantedVar>>, InputError> {
        let n = match processes {
            Processes::PerPod => 1,
            Processes::PerTpuContainer(n) => n as usize,
        };
        let order: Vec<usize> = (0..n).collect();
        vars(group, pod, processes, &order, n)
    }

    fn ids(group: &JaxGroup, processes: Processes) -> Vec<String> {
        (0..group.pods)
            .flat_map(|p| per_process(group, p, processes).unwrap())
            .map(|v| v[2].value.clone())
            .collect()
    }

    #[test]
    fn the_coordinator_pod_is_process_0_and_ids_stay_0_to_n() {
        let group = group(5, "js-head-0-0.js", 4, 6666);
        assert_eq!(ids(&group, Processes::PerPod), ["4", "1", "2", "3", "0"]);
        let first = &per_process(&group, 4, Processes::PerPod).unwrap()[0];
        assert_eq!(first[0].value, "js-head-0-0.js:6666");
        assert_eq!(first[1].value, "5");
    }

    #[test]
    fn each_tpu_container_is_a_process() {
        let group = group(2, "c", 0, 1);
        let two = Processes::PerTpuContainer(2);
        assert_eq!(ids(&group, two), ["0", "1", "2", "3"]);
        assert_eq!(per_process(&group, 1, two).unwrap()[1][1].value, "4");
    }

    #[test]
    fn counts_beyond_u32_are_errors() {
        let group = group(u32::MAX, "c", 0, 1);
        assert!(per_process(&group, 1, Processes::PerTpuContainer(2)).is_err());
    }
}
