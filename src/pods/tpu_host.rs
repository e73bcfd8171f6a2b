//! TPU host env (SPEC §4.3, setting `tpuWorkerEnv`): LeaderWorkerSet's TPU injection with the pod's
//! own Job as the slice. Container k of n in the pod with completion index c is worker c·n + k,
//! each host is listed n times, and each container has its own process port.
use super::place::PodPlace;
use crate::error::{add_at, count_at, mul_at, InputError};
use crate::keys;
use crate::names;
use crate::views::container_env::WantedVar;

/// TPU container k's process port is `PROCESS_BASE_PORT + k`, unless it sets `TPU_PROCESS_PORT`.
pub const PROCESS_BASE_PORT: u32 = 8476;

/// The variables of each TPU container k, given every container's process port (`ports[k]`,
/// its own `TPU_PROCESS_PORT` or the default) and the pods per Job.
pub fn vars(
    place: &PodPlace,
    completion_index: u32,
    pods_per_job: u32,
    ports: &[String],
) -> Result<Vec<Vec<WantedVar>>, InputError> {
    let n = count_at(ports.len(), "spec.containers")?;
    let job_name = names::job(place.jobset, place.replicated_job, place.job_index);
    let mut hostnames = Vec::new();
    let mut addresses = Vec::new();
    for i in 0..pods_per_job {
        let host = names::address(&names::hostname(&job_name, i), place.subdomain);
        for port in ports {
            hostnames.push(host.clone());
            addresses.push(format!("{host}:{port}"));
        }
    }
    let hostnames = hostnames.join(",");
    let addresses = addresses.join(",");
    let path = "metadata.annotations";
    let base = mul_at(completion_index, n, path)?;
    (0u32..)
        .zip(ports)
        .map(|(k, port)| {
            Ok(vec![
                WantedVar::new(keys::ENV_TPU_WORKER_ID, add_at(base, k, path)?),
                WantedVar::new(keys::ENV_TPU_WORKER_HOSTNAMES, &hostnames),
                WantedVar::new(keys::ENV_TPU_PROCESS_PORT, port),
                WantedVar::new(keys::ENV_TPU_PROCESS_ADDRESSES, &addresses),
                WantedVar::new(keys::ENV_TPU_NAME, &job_name),
            ])
        })
        .collect()
}
