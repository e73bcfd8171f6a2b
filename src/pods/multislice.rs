//! TPU multislice env (SPEC §4.2): the slice count, the pod's slice id and the slice group's
//! coordinator, and with several TPU containers in a pod, a DCN port per container.
use super::place::PodPlace;
use crate::error::{add_at, InputError};
use crate::facts::Facts;
use crate::json::{map_str, Object};
use crate::keys;
use crate::names;
use crate::views::container_env::WantedVar;

/// TPU container k's default `MEGASCALE_PORT` in a pod of several: KubeRay's TPU webhook numbering.
const MEGASCALE_BASE_PORT: u32 = 8081;

/// The variables of each of the pod's TPU containers, k = 0..n-1; `own_ports[k]` is the
/// `MEGASCALE_PORT` container k sets itself, if any. None for a pod that runs before the others
/// (dependsOn) or whose slice group is one slice: one slice has no DCN peers, and xpk and GKE give
/// it no `MEGASCALE_*` either (SPEC §4.2). With them, the warning of a slice guessed.
pub fn vars(
    facts: &Facts,
    place: &PodPlace,
    annotations: Option<&Object>,
    own_ports: &[Option<String>],
) -> Result<(Vec<Vec<WantedVar>>, Option<String>), InputError> {
    if facts.runs_first {
        return Ok((Vec::new(), None));
    }
    let (slice, guess) = match (&facts.slice, &facts.slice_coordinator) {
        (Some(slice), Some(coordinator)) => (
            Slice {
                count: slice.total,
                id: add_at(slice.offset, place.job_index, "metadata.labels")?,
                coordinator: place.address(coordinator),
                coordinator_outside: facts.slice_coordinator_outside,
            },
            None,
        ),
        _ => guessed(place, annotations),
    };
    if slice.count <= 1 {
        return Ok((Vec::new(), guess));
    }
    // Several TPU processes on one host each take their own DCN port; the coordinator's
    // address then names container 0's. So does the address of a coordinator that sets its
    // own port. A coordinator outside the slice group runs no TPU process and keeps the bare
    // address.
    let several = own_ports.len() >= 2;
    let port = facts
        .slice_coordinator_port
        .or((several && !slice.coordinator_outside).then_some(MEGASCALE_BASE_PORT));
    let coordinator = match port {
        Some(port) => format!("{}:{port}", slice.coordinator),
        None => slice.coordinator,
    };
    let common = [
        WantedVar::new(keys::ENV_NUM_SLICES, slice.count),
        WantedVar::new(keys::ENV_SLICE_ID, slice.id),
        WantedVar::new(keys::ENV_COORDINATOR, coordinator),
    ];
    let per_k = (0u32..)
        .zip(own_ports)
        .map(|(k, own)| {
            let mut out = common.to_vec();
            if several {
                let port = match own {
                    Some(port) => port.clone(),
                    None => add_at(MEGASCALE_BASE_PORT, k, "spec.containers")?.to_string(),
                };
                out.push(WantedVar::new(keys::ENV_MEGASCALE_PORT, port));
            }
            Ok(out)
        })
        .collect::<Result<_, InputError>>()?;
    Ok((per_k, guess))
}

/// A pod's slice: how many slices its group has, its own slice id, and the group's
/// coordinator's address, which may be outside the group.
struct Slice {
    count: u32,
    id: u32,
    coordinator: String,
    coordinator_outside: bool,
}

/// The slice of a pod whose JobSet was admitted before the policy, so has no facts. The pod's
/// own labels only tell about its replicated job, so that is taken as the whole slice group, and a
/// warning says so.
fn guessed(place: &PodPlace, annotations: Option<&Object>) -> (Slice, Option<String>) {
    let own = place.address(&names::rjob_pod(place.replicated_job, 0, 0));
    let (coordinator, outside) = match map_str(annotations, keys::JOBSET_COORDINATOR) {
        Some(c) => (
            c.to_string(),
            !names::is_pod_of(c, place.jobset, place.replicated_job),
        ),
        None => (own, false),
    };
    let warning = format!(
        "pod of JobSet {:?}: its JobSet was admitted before this policy, so replicated job {:?} was taken as its whole slice group ({} slices, coordinator {coordinator})",
        place.jobset, place.replicated_job, place.replicated_job_replicas
    );
    let slice = Slice {
        count: place.replicated_job_replicas,
        id: place.job_index,
        coordinator,
        coordinator_outside: outside,
    };
    (slice, Some(warning))
}
