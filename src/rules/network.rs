//! N1: hostnames must resolve for a multi-host or multi-slice TPU JobSet, or a JAX group of
//! several processes.
use crate::groups::{jax_groups, slice_groups};
use crate::settings::Settings;
use crate::views::jobset_view::JobSetView;
use crate::violation::{Rule, Violation};

pub fn n1_hostnames_resolve(view: &JobSetView, settings: &Settings) -> Vec<Violation> {
    if view.enable_dns_hostnames != Some(false) {
        return Vec::new();
    }
    let sum = |members: &[usize], weight: &dyn Fn(usize) -> u64| {
        // Saturating: only "more than one" matters, and u32 × u32 terms can add past u64.
        members
            .iter()
            .fold(0u64, |total, &i| total.saturating_add(weight(i)))
    };
    let replicas = |i: usize| u64::from(view.replicated_jobs[i].replicas);
    let pods = |i: usize| replicas(i) * u64::from(view.replicated_jobs[i].parallelism);
    let multi_host = view.tpu_jobs().any(|(_, r)| r.parallelism > 1);
    let multi_slice = slice_groups(view)
        .iter()
        .any(|(_, members)| sum(members, &replicas) > 1);
    // Every JAX process dials the coordinator by its hostname.
    let multi_process = jax_groups(view, settings)
        .iter()
        .any(|(_, members)| sum(members, &pods) > 1);
    if !(multi_host || multi_slice || multi_process) {
        return Vec::new();
    }
    let what = if multi_host || multi_slice {
        "multi-host TPU JobSet"
    } else {
        "JAX JobSet of several processes"
    };
    vec![Violation::new(
        Rule::N1,
        "spec.network.enableDNSHostnames",
        format!(
            "is false, so the coordinator and worker hostnames of this {what} would not resolve"
        ),
        "remove it or set it to true",
    )]
}
