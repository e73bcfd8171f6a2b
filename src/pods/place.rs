//! The pod's place, shared by every env family: where the JobSet and Job controllers put it
//! (SPEC §2), and how its peers are addressed.
use crate::names;

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
}
