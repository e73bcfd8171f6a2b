//! N1: hostnames must resolve for a multi-host or multi-slice TPU JobSet.
use super::tpu_jobs;
use crate::groups::slice_groups;
use crate::jobset::JobSetView;
use crate::settings::Settings;
use crate::violation::{Rule, Violation};

pub fn n1(view: &JobSetView, _: &Settings) -> Vec<Violation> {
    if view.enable_dns_hostnames != Some(false) {
        return Vec::new();
    }
    let multi_host = tpu_jobs(view).any(|(_, r)| r.parallelism > 1);
    let multi_slice = slice_groups(view).iter().any(|(_, members)| {
        members
            .iter()
            .map(|&i| u64::from(view.replicated_jobs[i].replicas))
            .sum::<u64>()
            > 1
    });
    if !(multi_host || multi_slice) {
        return Vec::new();
    }
    vec![Violation::new(
        Rule::N1,
        "spec.network.enableDNSHostnames",
        "is false, so the coordinator and worker hostnames of this multi-host TPU JobSet would not resolve",
        "remove it or set it to true",
    )]
}
