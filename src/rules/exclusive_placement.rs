//! X1–X4: exclusive placement, resolved as JobSet resolves it.
use crate::groups::JobSetPlan;
use crate::keys;
use crate::placement::{exclusive_placement, has, pinned, placed_as_slice, Exclusive};
use crate::violation::{Rule, Violation};

/// X1: a TPU replicated job with more than one pod has exclusive placement by an allowed key,
/// or is placed as a slice by GKE's slice controller or Kueue TAS.
pub fn x1_exclusive_placement(plan: &JobSetPlan) -> Vec<Violation> {
    let (view, settings) = (plan.view, plan.settings);
    if !settings.require_exclusive_topology {
        return Vec::new();
    }
    view.tpu_jobs()
        .filter(|(_, r)| r.pods() > 1 && !placed_as_slice(r))
        .filter_map(|(_, r)| match exclusive_placement(view, r) {
            None => Some(Violation::in_rjob(
                r,
                Rule::X1,
                r.at.job_annotations(),
                format!(
                    "runs {} TPU pods without exclusive placement, so two slices can land in one {}",
                    r.pods(),
                    settings.exclusive_topology_keys[0]
                ),
                format!(
                    "add the annotation {}: {} here or on the JobSet",
                    keys::EXCLUSIVE_TOPOLOGY,
                    settings.exclusive_topology_keys[0]
                ),
            )),
            Some(e) if !settings.exclusive_topology_keys.iter().any(|k| k == e.key) => {
                Some(Violation::in_rjob(
                    e.is_own().then_some(r),
                    Rule::X1,
                    e.path(),
                    format!("is {:?}, which does not keep a slice's hosts together", e.key),
                    format!("set it to {}", settings.exclusive_topology_keys.join(" or ")),
                ))
            }
            Some(_) => None,
        })
        .collect()
}

fn describe(e: &Option<Exclusive>) -> String {
    match e {
        None => "no exclusive placement".into(),
        Some(e) if e.node_selector_strategy => format!(
            "exclusive-topology {:?} with the node-selector flag {}",
            e.key,
            keys::NODE_SELECTOR_STRATEGY
        ),
        Some(e) => format!(
            "exclusive-topology {:?} without the node-selector flag",
            e.key
        ),
    }
}

/// What differs between two replicated jobs' exclusive placements, said plainly, and the fix.
fn x2_difference(mine: &Option<Exclusive>, theirs: &Option<Exclusive>) -> (&'static str, String) {
    let (flag, exclusive) = (keys::NODE_SELECTOR_STRATEGY, keys::EXCLUSIVE_TOPOLOGY);
    match (mine, theirs) {
        (Some(m), Some(t)) if m.key == t.key => (
            ": the key is the same, only the node-selector flag differs, so JobSet places their Jobs differently (by nodeSelector with the flag, by pod affinity without it)",
            format!(
                "set {flag} on every replicated job of the slice group or on none, best set once on the JobSet beside {exclusive}"
            ),
        ),
        (Some(_), Some(_)) => (
            ": the keys differ",
            format!(
                "give every replicated job of a slice group the same {exclusive} key, best set once on the JobSet"
            ),
        ),
        _ => (
            "",
            format!(
                "give every replicated job of a slice group the same exclusive placement, best set once on the JobSet ({exclusive})"
            ),
        ),
    }
}

/// X2: all replicated jobs of a slice group end up with the same exclusive placement.
pub fn x2_one_placement_per_slice_group(plan: &JobSetPlan) -> Vec<Violation> {
    let view = plan.view;
    let mut out = Vec::new();
    for slice_group in plan.multi_member_slice_groups() {
        let (group, first) = (slice_group.name, slice_group.members[0]);
        let theirs = exclusive_placement(view, first);
        let same = |e: &Option<Exclusive>| {
            e.as_ref().map(|e| (e.key, e.node_selector_strategy))
                == theirs.as_ref().map(|t| (t.key, t.node_selector_strategy))
        };
        for rjob in &slice_group.members[1..] {
            let mine = exclusive_placement(view, rjob);
            if !same(&mine) {
                let (difference, fix) = x2_difference(&mine, &theirs);
                let own = mine.as_ref().is_none_or(Exclusive::is_own);
                out.push(Violation::in_rjob(
                    own.then_some(*rjob),
                    Rule::X2,
                    mine.as_ref().map_or_else(|| rjob.at.job_annotations(), Exclusive::path),
                    format!(
                        "gives {:?} {} but {:?} of the same slice group {group:?} has {}{difference}",
                        rjob.name,
                        describe(&mine),
                        first.name,
                        describe(&theirs)
                    ),
                    fix,
                ));
            }
        }
    }
    out
}

/// X3: a node-selector flag has an effect, under upstream's precedence (SPEC §2), which ignores
/// the rest silently.
pub fn x3_node_selector_flag_takes_effect(plan: &JobSetPlan) -> Vec<Violation> {
    let view = plan.view;
    if view.tpu_jobs().next().is_none() {
        return Vec::new();
    }
    let (flag, exclusive) = (keys::NODE_SELECTOR_STRATEGY, keys::EXCLUSIVE_TOPOLOGY);
    let mut out = Vec::new();
    if has(view.annotations, flag) && !has(view.annotations, exclusive) {
        out.push(Violation::new(
            Rule::X3,
            format!("metadata.annotations[{flag:?}]"),
            format!("is set without {exclusive} beside it, and JobSet ignores it silently"),
            format!("add {exclusive} at the same level, or remove the flag"),
        ));
    }
    for r in &view.replicated_jobs {
        if has(r.job_annotations, flag) && exclusive_placement(view, r).is_none() {
            out.push(Violation::in_rjob(
                r,
                Rule::X3,
                format!("{}[{flag:?}]", r.at.job_annotations()),
                format!(
                    "is set but neither this replicated job nor the JobSet has {exclusive}, and JobSet ignores it silently"
                ),
                format!("add {exclusive} here or on the JobSet, or remove the flag"),
            ));
        }
    }
    out
}

/// X4: a replicated job of several slices does not pin the exclusive key to one value.
pub fn x4_exclusive_key_not_pinned(plan: &JobSetPlan) -> Vec<Violation> {
    let view = plan.view;
    view.tpu_jobs()
        .filter(|(_, r)| r.replicas > 1)
        .filter_map(|(_, r)| {
            let e = exclusive_placement(view, r)?;
            let pin = pinned(r, e.key)?;
            Some(Violation::in_rjob(
                r,
                Rule::X4,
                pin.path(r.template.at),
                format!(
                    "pins {} to {:?}, so only one of the {} slices can ever be scheduled",
                    e.key, pin.value, r.replicas
                ),
                format!(
                    "remove it: exclusive placement gives each slice its own {}",
                    e.key
                ),
            ))
        })
        .collect()
}

/// Warning: one multi-host slice placed by hostname keeps one pod per node, but does not
/// keep the slice's hosts in one node pool.
pub fn single_slice_by_hostname(plan: &JobSetPlan) -> Vec<String> {
    let mut out = Vec::new();
    for group in &plan.slice_groups {
        let [r] = group.members[..] else { continue };
        if r.replicas != 1 || r.parallelism < 2 {
            continue;
        }
        if let Some(e) = exclusive_placement(plan.view, r).filter(|e| e.key == keys::HOSTNAME) {
            out.push(format!(
                "{}: by {} each of the slice's {} pods gets a node of its own, but not one node pool; cloud.google.com/gke-nodepool keeps them in one",
                e.path(), keys::HOSTNAME, r.parallelism
            ));
        }
    }
    out
}
