//! N1 and N2: pods that find each other by hostname need the hostnames (N1) and a resolver that
//! knows them (N2).
use crate::groups::{Group, JobSetPlan};
use crate::paths::SpecAt;
use crate::views::jobset_view::ReplicatedJob;
use crate::violation::{Rule, Violation};

/// Why the JobSet's pods dial each other by hostname, in the words of N1's message; `None`
/// when they do not (a single single-host slice, one JAX process).
fn needs_hostnames(plan: &JobSetPlan) -> Option<&'static str> {
    let multi_host = plan.view.tpu_jobs().any(|(_, r)| r.parallelism > 1);
    if multi_host || plan.slice_groups.iter().any(Group::is_multislice) {
        return Some("multi-host TPU JobSet");
    }
    // Every JAX process dials the coordinator by its hostname. Saturating: only "more than one"
    // matters, and u32 × u32 terms can add past u64.
    let pods = |g: &Group| {
        g.members
            .iter()
            .fold(0u64, |total, r| total.saturating_add(r.pods()))
    };
    let multi_process = plan.jax_groups.iter().any(|g| pods(g) > 1);
    multi_process.then_some("JAX JobSet of several processes")
}

pub fn n1_hostnames_resolve(plan: &JobSetPlan) -> Vec<Violation> {
    if plan.view.enable_dns_hostnames != Some(false) {
        return Vec::new();
    }
    let Some(what) = needs_hostnames(plan) else {
        return Vec::new();
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

/// N2: where N1 applies, every replicated job's pods resolve cluster DNS names.
pub fn n2_pods_resolve_cluster_dns(plan: &JobSetPlan) -> Vec<Violation> {
    let view = plan.view;
    // Most templates keep the default dnsPolicy off the host network: nothing to judge.
    let suspicious = view
        .replicated_jobs
        .iter()
        .any(|r| r.template.host_network || r.template.dns_policy.is_some());
    if !suspicious || needs_hostnames(plan).is_none() {
        return Vec::new();
    }
    view.replicated_jobs
        .iter()
        .filter_map(|r| {
            cluster_dns(
                Some(r),
                r.template.host_network,
                r.template.dns_policy,
                r.template.spec_at(),
                "the coordinator and worker hostnames",
            )
        })
        .collect()
}

/// The N2 violation of one pod spec at `at` whose pods must resolve `names`, if its
/// `hostNetwork` and `dnsPolicy` give them the node's resolver (`ClusterFirst` falls back to it on
/// the host network), in replicated job `rjob` if it is one's. `None` means the user wrote
/// `dnsConfig`, which is theirs.
pub fn cluster_dns(
    rjob: Option<&ReplicatedJob>,
    host_network: bool,
    dns_policy: Option<&str>,
    at: SpecAt,
    names: &str,
) -> Option<Violation> {
    let problem = match (host_network, dns_policy) {
        (_, Some("Default")) => "is \"Default\", the node's resolver".to_string(),
        (true, None) => "is not set, and with hostNetwork: true the default ClusterFirst falls back to the node's resolver".to_string(),
        (true, Some("ClusterFirst")) => "is \"ClusterFirst\", which with hostNetwork: true falls back to the node's resolver".to_string(),
        _ => return None,
    };
    let fix = if host_network {
        "set it to ClusterFirstWithHostNet"
    } else {
        "set it to ClusterFirst or remove it"
    };
    Some(Violation::in_rjob(
        rjob,
        Rule::N2,
        at.field("dnsPolicy"),
        format!("{problem}, so the pods cannot resolve {names}"),
        fix,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::default_off_host_network(false, None, None)]
    #[case::cluster_first(false, Some("ClusterFirst"), None)]
    #[case::xpks_pairing(true, Some("ClusterFirstWithHostNet"), None)]
    #[case::none_with_dns_config(true, Some("None"), None)]
    #[case::host_network_default(true, None, Some("ClusterFirstWithHostNet"))]
    #[case::host_network_cluster_first(true, Some("ClusterFirst"), Some("ClusterFirstWithHostNet"))]
    #[case::node_resolver(false, Some("Default"), Some("ClusterFirst or remove it"))]
    #[case::node_resolver_on_host_network(true, Some("Default"), Some("ClusterFirstWithHostNet"))]
    fn only_the_nodes_resolver_breaks_n2(
        #[case] host_network: bool,
        #[case] dns_policy: Option<&str>,
        #[case] fix: Option<&str>,
    ) {
        let v = cluster_dns(None, host_network, dns_policy, SpecAt::Pod, "names");
        assert_eq!(v.is_some(), fix.is_some(), "{v:?}");
        if let (Some(v), Some(fix)) = (v, fix) {
            assert_eq!(v.path, "spec.dnsPolicy");
            assert!(
                v.to_string()
                    .ends_with(&format!("{fix}; see docs/rules.md, N2")),
                "{v}"
            );
        }
    }
}
