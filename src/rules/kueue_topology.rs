//! K1–K3: Kueue's Topology Aware Scheduling places every slice whole (`tas.rs` reads where it
//! leaves the pods; these say it).
use crate::groups::JobSetPlan;
use crate::keys::{KUEUE_REQUIRED_TOPOLOGY, KUEUE_SLICE_REQUIRED_TOPOLOGY, KUEUE_SLICE_SIZE};
use crate::rules::tpu::slice_hosts;
use crate::tas::{self, Misplacement, Request, SizeProblem, Split};
use crate::views::jobset_view::ReplicatedJob;
use crate::violation::{Rule, Violation};

/// Each TPU replicated job with its request and where Kueue leaves its pods; not one whose slice
/// topology has other hosts than its parallelism, which T4 refuses first (its slices are not yet
/// what the annotations would place).
fn misplaced<'p, 'a>(
    plan: &'p JobSetPlan<'_, 'a>,
) -> impl Iterator<Item = (&'p ReplicatedJob<'a>, &'p Request<'a>, Vec<Misplacement>)> + 'p {
    plan.view.tpu_jobs().filter_map(|(_, r)| {
        if slice_hosts(r, plan.settings).is_some_and(|h| h != r.parallelism) {
            return None;
        }
        let request = &plan.tas[r.index];
        let found = tas::misplacements(r, request, plan.settings);
        (!found.is_empty()).then_some((r, request, found))
    })
}

/// `2 slices of 4 hosts`, for messages.
fn slices(r: &ReplicatedJob) -> String {
    let (replicas, hosts) = (r.replicas, r.parallelism);
    let s = |n: u32| if n == 1 { "" } else { "s" };
    format!(
        "{replicas} slice{} of {hosts} host{}",
        s(replicas),
        s(hosts)
    )
}

/// The fix that keeps each slice whole (`tas::slice_level`).
fn slice_whole(plan: &JobSetPlan, r: &ReplicatedJob) -> String {
    let level = tas::slice_level(r, plan.settings);
    let (key, size, above) = (&level.key, level.size, &level.above);
    match (level.in_one_block, level.from_settings) {
        (true, _) => format!(
            "require the block, {KUEUE_REQUIRED_TOPOLOGY}: {above}, and slice by whole cubes, {KUEUE_SLICE_REQUIRED_TOPOLOGY}: {key} with {KUEUE_SLICE_SIZE}: \"{size}\""
        ),
        (false, true) => format!(
            "slice at a domain of one slice, {KUEUE_SLICE_REQUIRED_TOPOLOGY}: {key} with {KUEUE_SLICE_SIZE}: \"{size}\" (a label whose domain is one slice may join the setting exclusiveTopologyKeys)"
        ),
        (false, false) => format!(
            "slice at the slice's own domain, {KUEUE_SLICE_REQUIRED_TOPOLOGY}: {key} with {KUEUE_SLICE_SIZE}: \"{size}\""
        ),
    }
}

/// K1: `podset-required-topology` names a level whose one domain can hold every pod.
pub fn k1_required_domain_holds_every_pod(plan: &JobSetPlan) -> Vec<Violation> {
    let mut out = Vec::new();
    for (r, request, found) in misplaced(plan) {
        for m in found {
            let (Misplacement::RequiredTooSmall { hosts }, Some(key)) = (m, request.required)
            else {
                continue;
            };
            let fix = match tas::domain_of(key, r, plan.settings).hosts() {
                Some(h) if h == r.parallelism => format!(
                    "set {KUEUE_SLICE_REQUIRED_TOPOLOGY}: {key} with {KUEUE_SLICE_SIZE}: \"{}\" instead, so that each slice gets a domain of its own, and leave {KUEUE_REQUIRED_TOPOLOGY} out or set it to a level above, such as {}",
                    r.parallelism,
                    tas::slice_level(r, plan.settings).above
                ),
                _ => slice_whole(plan, r),
            };
            out.push(
                Violation::in_rjob(
                    r,
                    Rule::K1,
                    r.at.pod_template().annotation(KUEUE_REQUIRED_TOPOLOGY),
                    format!(
                        "is {key:?}, which puts all {} pods ({}) in one {key} domain of {hosts} host{}, so Kueue never admits the Workload and it stays pending",
                        r.pods(),
                        slices(r),
                        if hosts == 1 { "" } else { "s" }
                    ),
                    fix,
                ),
            );
        }
    }
    out
}

/// K2: the slice size keeps each slice whole, and Kueue places every pod.
pub fn k2_slice_size_keeps_slices_whole(plan: &JobSetPlan) -> Vec<Violation> {
    let mut out = Vec::new();
    for (r, request, found) in misplaced(plan) {
        let path = r.at.pod_template().annotation(request.size_annotation());
        for m in found {
            let layer = match &m {
                Misplacement::Size { layer, .. } => Some(*layer),
                Misplacement::MalformedConstraints => None,
                _ => continue,
            };
            let key = layer.and_then(|i| request.layers.get(i)).map(|l| &l.key);
            let key = key.map_or("", |k| k.as_ref());
            let problem = match &m {
                Misplacement::MalformedConstraints => "is no JSON list of 1 to 3 {\"topology\", \"size\"} with sizes from 1, and Kueue refuses it".to_string(),
                Misplacement::Size { problem, want, .. } => match problem {
                    SizeProblem::Missing => format!(
                        "is not set, and Kueue refuses {KUEUE_SLICE_REQUIRED_TOPOLOGY} without it"
                    ),
                    SizeProblem::Malformed(raw) => {
                        format!("is {raw:?}, no whole number of pods, and Kueue refuses it")
                    }
                    SizeProblem::OverPods(size) => format!(
                        "is \"{size}\", more than the {} pods ({}), and Kueue refuses it",
                        r.pods(),
                        slices(r)
                    ),
                    SizeProblem::OverJob(size) => format!(
                        "is \"{size}\", more than the {} pods of one Job, so Kueue's webhook refuses every child Job and none starts",
                        r.parallelism
                    ),
                    SizeProblem::Gates(size) => format!(
                        "is \"{size}\", which does not divide the {} pods ({}), so Kueue admits the Workload and its pods stay gated (kueue#15277)",
                        r.pods(),
                        slices(r)
                    ),
                    SizeProblem::OverDomain { size, hosts } => format!(
                        "is \"{size}\", more than the {hosts} hosts of one {key} domain, so Kueue never admits the Workload and it stays pending"
                    ),
                    SizeProblem::CutsSlices(size) if *want == Some(r.parallelism) => format!(
                        "is \"{size}\", which cuts a slice of {} hosts, so Kueue may place one slice in two {key} domains",
                        r.parallelism
                    ),
                    SizeProblem::CutsSlices(size) => format!(
                        "is \"{size}\", which cuts a cube of {} hosts, so a super-slice may take parts of cubes",
                        want.unwrap_or_default()
                    ),
                },
                _ => continue,
            };
            let problem = match (request.layered, layer) {
                (true, Some(i)) => format!("layer {i} ({key}): its size {problem}"),
                _ => problem,
            };
            let fix = match &m {
                Misplacement::Size {
                    want: Some(want), ..
                } if *want == r.parallelism => {
                    format!("set it to \"{want}\", the hosts of one slice")
                }
                Misplacement::Size {
                    want: Some(want), ..
                } => {
                    format!("set it to \"{want}\", the hosts of one cube")
                }
                _ => slice_whole(plan, r),
            };
            out.push(Violation::in_rjob(r, Rule::K2, path.clone(), problem, fix));
        }
    }
    out
}

/// K3: some level keeps each slice's hosts in one domain of one slice (or in whole cubes of one
/// block), where K1 and K2 find nothing.
pub fn k3_a_slice_stays_in_one_domain(plan: &JobSetPlan) -> Vec<Violation> {
    let mut out = Vec::new();
    for (r, _, found) in misplaced(plan) {
        for m in found {
            let Misplacement::MaySplit {
                annotation,
                key,
                why,
            } = m
            else {
                continue;
            };
            let p = r.parallelism;
            let is = key.as_ref().map_or_else(
                || "asks for no topology".to_string(),
                |k| format!("is {k:?}"),
            );
            let (problem, fix) = match why {
                Split::ByHost => (
                    format!("{is}: one pod per host, but nothing keeps a slice's {p} hosts in one node pool, so Kueue may place a slice across node pools"),
                    slice_whole(plan, r),
                ),
                Split::ByMany => (
                    format!("{is}, a domain of many slices, so Kueue may place a slice's {p} hosts across node pools"),
                    slice_whole(plan, r),
                ),
                Split::ByOtherSize(h) if h > p => (
                    format!("{is}, domains of {h} hosts, each more than one slice of {p}, so Kueue may place a slice on the hosts of two"),
                    slice_whole(plan, r),
                ),
                Split::ByOtherSize(h) => (
                    format!("{is}, domains of {h} hosts, fewer than a slice's {p}, so Kueue places a slice across several"),
                    slice_whole(plan, r),
                ),
                Split::NotWholeCubes(h) => (
                    format!("{is}, cubes of {h} hosts, which do not make up a slice of {p} hosts, so a slice takes part of a cube"),
                    slice_whole(plan, r),
                ),
                Split::CubesAcrossBlocks(h) => (
                    format!("{is}: each cube of {h} hosts whole, but nothing keeps a slice's {} cubes in one block", p / h.max(1)),
                    format!("add {KUEUE_REQUIRED_TOPOLOGY}: {}", tas::slice_level(r, plan.settings).above),
                ),
                Split::Unrequired => (
                    match &key {
                        Some(_) => format!("{is}, a preference only, so Kueue may place a slice's {p} hosts across node pools"),
                        None => format!("{is}, so Kueue may place a slice's {p} hosts across node pools"),
                    },
                    slice_whole(plan, r),
                ),
            };
            let path = r.at.pod_template().annotation(annotation);
            out.push(Violation::in_rjob(r, Rule::K3, path, problem, fix));
        }
    }
    out
}
