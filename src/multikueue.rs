//! MultiKueue (SPEC §5, MultiKueue): a manager cluster's Kueue dispatches a JobSet to a worker
//! cluster by creating a copy of it there. The manager judges the user's JobSet; in the worker,
//! a refusal would strand the job with its message only in Kueue's log, so on a copy the policy
//! warns instead and keeps what the manager stamped. In the manager, Kueue's unsuspend carries
//! a flavour that goes nowhere, so T3 and T4 never judge a JobSet dispatched elsewhere.
use crate::keys;
use crate::settings::Settings;
use crate::views::jobset_view::JobSetView;
use crate::violation::Violation;

/// Whether a JobSet CREATE is a copy made by a manager's Kueue: the origin label, and a requester
/// among `multiKueueUsers`. A user who adds the label by hand is judged as usual. The audit
/// scanner's CREATE names no requester (an API server's always does): there, in a worker (some
/// `multiKueueUsers`), a copy is known by both its labels, as at UPDATE.
pub fn is_copy_created(view: &JobSetView, requester: &str, settings: &Settings) -> bool {
    let users = &settings.multi_kueue_users;
    if requester.is_empty() {
        return !users.is_empty() && is_copy_updated(view);
    }
    view.label(keys::MULTIKUEUE_ORIGIN).is_some() && users.iter().any(|u| u == requester)
}

/// Whether an UPDATE is of a copy: its old object carries the origin label and the prebuilt
/// Workload's label. The worker's own Kueue makes the unsuspend, not the MultiKueue identity.
pub fn is_copy_updated(old: &JobSetView) -> bool {
    old.label(keys::MULTIKUEUE_ORIGIN).is_some() && old.label(keys::PREBUILT_WORKLOAD).is_some()
}

/// Whether the manager's Kueue dispatches this JobSet to a worker: it never runs here.
pub fn dispatched_elsewhere(view: &JobSetView) -> bool {
    view.managed_by == Some(keys::MULTIKUEUE_MANAGER)
}

/// A violation of a copy, said as a warning: the manager's verdict stands. Short, since a
/// warning is cut at 256 characters.
pub fn copy_warning(violation: &Violation) -> String {
    format!("MultiKueue copy, admitted: {violation}")
}

/// On a copy, the facts the manager stamped stay: they are written only on the pod templates
/// that carry none (a manager without the policy). Facts that this policy would stamp
/// differently are kept, with a warning: the worker's Workload was admitted on them.
pub fn keep_stamped_facts(
    view: &JobSetView,
    facts: Vec<(usize, String)>,
) -> (Vec<(usize, String)>, Vec<String>) {
    let (unstamped, kept): (Vec<_>, Vec<_>) = facts.into_iter().partition(|(i, _)| {
        view.replicated_jobs[*i]
            .template
            .annotations
            .is_none_or(|a| !a.contains_key(keys::FACTS))
    });
    let warning = |(i, _): (usize, String)| {
        let template = view.replicated_jobs[i].at.pod_template();
        format!(
            "{}: MultiKueue copy: kept the facts the manager stamped, which this policy would \
             stamp differently; its pods get the manager's",
            template.annotation(keys::FACTS)
        )
    };
    (unstamped, kept.into_iter().map(warning).collect())
}

/// On a copy, a narrowing the manager stamped stays: the worker's Workload was admitted on it.
pub fn narrowed_in_the_manager(view: &JobSetView, index: usize) -> bool {
    view.replicated_jobs[index].mark.is_some()
}
