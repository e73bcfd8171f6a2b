//! The pod's place, shared by every env family: where the JobSet and Job controllers put it (SPEC
//! §2), how its peers are addressed, and how its TPU containers are numbered (§3).
use crate::names;
use crate::views::pod_spec::ContainerView;

/// What the controllers told the pod about its place in the JobSet (at pod admission), or
/// what they will tell each pod of a replicated job (at JobSet admission).
#[derive(Debug, Clone)]
pub struct PodPlace<'a> {
    /// Empty when the JobSet was created with `generateName` and the name is not known yet.
    pub jobset: &'a str,
    pub replicated_job: &'a str,
    pub replicated_job_replicas: u32,
    pub job_index: u32,
    pub job_global_index: u32,
    pub global_replicas: u32,
    pub completion_index: Option<u32>,
    pub subdomain: &'a str,
}

impl PodPlace<'_> {
    /// `<jobset>-<host>.<subdomain>`, where `host` is `<rjob>-<jobIndex>-<podIndex>`.
    pub fn address(&self, host: &str) -> String {
        names::address(&names::in_jobset(self.jobset, host), self.subdomain)
    }

    /// The name of the pod's own Job, `<jobset>-<rjob>-<jobIndex>`.
    pub fn job_name(&self) -> String {
        names::job(self.jobset, self.replicated_job, self.job_index)
    }

    /// The address of pod `i` of this pod's own Job.
    pub fn host_address(&self, i: u32) -> String {
        names::address(&names::hostname(&self.job_name(), i), self.subdomain)
    }
}

/// The pod's TPU containers numbered k = 0..n-1, as indexes into `containers`: the regular
/// containers in spec order, then the init containers in spec order (LeaderWorkerSet's
/// order, so that worker ids and ports agree with what its TPU webhook gives).
pub fn tpu_order(containers: &[ContainerView]) -> Vec<usize> {
    let of = |list: &'static str| {
        containers
            .iter()
            .enumerate()
            .filter(move |(_, c)| c.list == list && c.is_tpu())
            .map(|(i, _)| i)
    };
    of("containers").chain(of("initContainers")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(list: &'static str, index: usize, chips: u32) -> ContainerView<'static> {
        ContainerView::for_test(list, index, chips)
    }

    #[test]
    fn regular_containers_come_before_init_containers() {
        // pod_spec lists init containers first; TPU numbering puts them last.
        let cs = [
            c("initContainers", 0, 4),
            c("initContainers", 1, 0),
            c("containers", 0, 0),
            c("containers", 1, 2),
            c("containers", 2, 2),
        ];
        assert_eq!(tpu_order(&cs), vec![3, 4, 0]);
    }
}
