//! T1–T4: what a TPU replicated job needs to be scheduled as a slice.
use crate::accelerators::{self, Accelerator};
use crate::groups::JobSetPlan;
use crate::narrowing::Shapes;
use crate::placement::{pinned, slice_topology};
use crate::settings::Settings;
use crate::slice_fit::{self, Misfit};
use crate::topology::Topology;
use crate::views::job_view::{Counts, NO_CHILD_JOB};
use crate::views::jobset_view::ReplicatedJob;
use crate::views::node_pins::Pin;
use crate::violation::{Rule, Violation};

/// T1: a TPU replicated job uses Indexed completion mode.
pub fn t1_indexed_completion(plan: &JobSetPlan) -> Vec<Violation> {
    plan.view
        .tpu_jobs()
        .filter(|(_, r)| !r.launch(None).indexed)
        .map(|(_, r)| {
            Violation::in_rjob(
                r,
                Rule::T1,
                r.at.pod_template().job_spec_field("completionMode"),
                format!("is {:?}", r.completion_mode.unwrap_or_default()),
                "TPU hosts find each other by completion index: remove it or set it to Indexed",
            )
        })
        .collect()
}

/// T2: every host of a slice runs at once: parallelism == completions, and an Indexed job
/// sets completions (the API server refuses an Indexed Job without it).
pub fn t2_all_hosts_at_once(plan: &JobSetPlan) -> Vec<Violation> {
    let mut out = Vec::new();
    for (_, r) in plan.view.tpu_jobs() {
        let launch = r.launch(None);
        // A NonIndexed job may leave completions out; T1 reports that mode.
        let Some((field, fact, set)) = launch.counts_fact() else {
            continue;
        };
        let problem = match launch.counts {
            Counts::Unset => format!("{fact}, {NO_CHILD_JOB}"),
            _ => fact,
        };
        let target = slice_hosts(r, plan.settings).unwrap_or(launch.pods);
        let fix = format!("a TPU slice needs every host at once, set {set} to {target}");
        let path = r.at.pod_template().job_spec_field(field);
        out.push(Violation::in_rjob(r, Rule::T2, path, problem, fix));
    }
    out
}

/// T3: a TPU replicated job selects an accelerator and a topology, by its author's own
/// selection (what the policy's narrowing added is not theirs).
pub fn t3_accelerator_and_topology_selected(plan: &JobSetPlan) -> Vec<Violation> {
    t3(plan, false)
}

/// T3 at an UPDATE, such as Kueue's unsuspend (SPEC §4.7): the selection holds where the
/// flavour's labels leave pairs of the policy's narrowing that all share one topology.
pub fn t3_selected_once_a_flavour_is_chosen(plan: &JobSetPlan) -> Vec<Violation> {
    t3(plan, true)
}

/// The one topology the marked pairs that the nodeSelector leaves share, if they share one.
fn narrowed_topology<'r>(r: &'r ReplicatedJob, settings: &Settings) -> Option<&'r str> {
    let mark = r.mark.as_ref()?;
    let accelerator = pinned(r, &settings.accelerator_label).map(|p| p.value);
    let topology = pinned(r, &settings.topology_label).map(|p| p.value);
    let mut left = mark
        .pairs
        .iter()
        .filter(|(a, _)| accelerator.is_none_or(|x| x == a.as_str()))
        .flat_map(|(_, ts)| ts.iter().map(String::as_str))
        .filter(|t| topology.is_none_or(|x| x == *t));
    let first = left.next()?;
    left.all(|t| t == first).then_some(first)
}

/// Whether the flavour chose an accelerator that the table lacks and the marked terms left
/// open: the policy cannot judge its shapes, so it asks for no topology either.
fn left_open(r: &ReplicatedJob, settings: &Settings) -> bool {
    let (Some(mark), Some(pin)) = (&r.mark, pinned(r, &settings.accelerator_label)) else {
        return false;
    };
    mark.leaves_open(pin.value) && accelerators::lookup(&settings.accelerators, pin.value).is_none()
}

fn t3(plan: &JobSetPlan, read_mark: bool) -> Vec<Violation> {
    let settings = plan.settings;
    if !settings.require_tpu_node_selectors {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (_, r) in plan.view.tpu_jobs() {
        if read_mark && (narrowed_topology(r, settings).is_some() || left_open(r, settings)) {
            continue;
        }
        let (per_pod, hosts, overrides) = (r.chips_per_pod, r.parallelism, &settings.accelerators);
        let accelerator = pinned(r, &settings.accelerator_label).map(|p| p.value);
        // GKE dynamic slicing names the topology in a pod template annotation instead.
        let topology = slice_topology(r, &settings.topology_label).map(|p| p.value);
        if accelerator.is_none() {
            let hint = slice_fit::accelerator_hint(overrides, topology, per_pod, hosts);
            out.push(not_selected(r, &settings.accelerator_label, &hint));
        }
        if topology.is_none() {
            let hint = slice_fit::topology_hint(overrides, accelerator, per_pod, hosts);
            out.push(not_selected(r, &settings.topology_label, &hint));
        }
    }
    out
}

fn not_selected(r: &ReplicatedJob, label: &str, hint: &str) -> Violation {
    Violation::in_rjob(
        r,
        Rule::T3,
        r.template.at.spec_field("nodeSelector"),
        format!("does not select {label}, so the pods may land on any TPU node"),
        format!(
            "add {label} to the nodeSelector, or a required node affinity with one In value, set to {hint}"
        ),
    )
}

/// The slice an rjob pins, when it pins an accelerator and a slice topology: the accelerator's
/// pin, its row of the table (`None` where the table lacks it), and the topology.
fn slice_of<'r, 'a, 's>(
    r: &'r ReplicatedJob<'a>,
    settings: &'s Settings,
) -> Option<(&'r Pin<'a>, Option<&'s Accelerator>, Pin<'a>)> {
    let accelerator = pinned(r, &settings.accelerator_label)?;
    let topology = slice_topology(r, &settings.topology_label)?;
    let row = accelerators::lookup(&settings.accelerators, accelerator.value);
    Some((accelerator, row, topology))
}

/// Hosts per slice (= pods per Job) when the selectors and chips describe a valid slice.
pub fn slice_hosts(r: &ReplicatedJob, settings: &Settings) -> Option<u32> {
    let (_, acc, topology) = slice_of(r, settings)?;
    let chips = Topology::parse(topology.value, acc?.dims).ok()?.chips()?;
    (r.chips_per_pod > 0 && chips % r.chips_per_pod == 0).then(|| chips / r.chips_per_pod)
}

/// T4: the topology is known to the accelerator table and matches chips and parallelism.
pub fn t4_topology_fits_the_slice(plan: &JobSetPlan) -> Vec<Violation> {
    let settings = plan.settings;
    let mut out = Vec::new();
    for (_, r) in plan.view.tpu_jobs() {
        let before = out.len();
        out.extend(r.template.containers.iter().filter_map(|c| {
            let e = c.tpu_chips.as_ref().err()?;
            let fix = "ask for a whole number of chips: the chips of one host, for example 4";
            let path = e.path().unwrap_or_default();
            Some(Violation::in_rjob(r, Rule::T4, path, e.problem(), fix))
        }));
        if out.len() > before {
            continue; // the chips per pod are unknown, so nothing more can be judged
        }
        let Some((accelerator, row, topology)) = slice_of(r, settings) else {
            continue; // T3's concern
        };
        match row {
            Some(acc) => out.extend(check_slice(r, acc, &topology)),
            None if settings.reject_unknown_accelerators => out.push(Violation::in_rjob(
                r,
                Rule::T4,
                accelerator.path(r.template.at),
                format!("{:?} is not in the accelerator table", accelerator.value),
                format!(
                    "use one of {} or add it to the accelerators setting",
                    accelerators::known_names(&settings.accelerators).join(", ")
                ),
            )),
            None => {}
        }
    }
    out
}

/// The numbers for a message, such as `1 or 4 or 8`.
fn join(numbers: &[u32], sep: &str) -> String {
    numbers
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

fn check_slice(r: &ReplicatedJob, acc: &Accelerator, topology: &Pin) -> Option<Violation> {
    let per_pod = r.chips_per_pod;
    let misfit = slice_fit::misfit(acc, topology.value, per_pod, r.parallelism)?;
    let shapes = || format!("use one of {}", acc.shapes());
    let containers = || r.template.at.spec_field("containers");
    let (path, problem, fix) = match misfit {
        Misfit::Malformed(e) => (
            topology.path(r.template.at),
            format!("{:?} {e}", topology.value),
            shapes(),
        ),
        Misfit::NotInTable => (
            topology.path(r.template.at),
            format!("{:?} is not a {} topology", topology.value, acc.name),
            shapes(),
        ),
        Misfit::ChipsPerPod { chips } => (
            containers(),
            format!(
                "ask for {per_pod} TPU chips per pod, which does not divide a {} {} slice ({chips} chips) into whole hosts",
                acc.name, topology.value
            ),
            format!(
                "a pod takes a whole host: ask for {} chips per pod, as the machine type has",
                join(&acc.chips_per_host, " or ")
            ),
        ),
        Misfit::OneHost { chips } => (
            containers(),
            format!(
                "ask for {per_pod} chips per pod, but a {} slice is one host: its {} slice ({chips} chips) runs in one pod",
                acc.name, topology.value
            ),
            if acc.chips_per_host.contains(&chips) {
                format!("ask for {chips} chips per pod and set parallelism and completions to 1")
            } else {
                format!(
                    "select a topology of one host, whose chips are {} chips per pod, and set parallelism and completions to 1",
                    join(&acc.chips_per_host, " or ")
                )
            },
        ),
        Misfit::MultiHost { chips } => {
            let multi = acc.multi_host_chips().unwrap_or(per_pod).max(1);
            (
                containers(),
                format!(
                    "ask for {per_pod} chips per pod, but a multi-host {} slice runs {multi} chips per host",
                    acc.name
                ),
                format!(
                    "ask for {multi} chips per pod and set parallelism and completions to {}",
                    chips / multi
                ),
            )
        }
        Misfit::Hosts { hosts } => (
            r.at.pod_template().job_spec_field("parallelism"),
            format!(
                "is {} but a {} {} slice with {per_pod} chips per pod has {hosts} hosts",
                r.parallelism, acc.name, topology.value
            ),
            match slice_fit::fitting_quoted(acc, per_pod, r.parallelism) {
                Some(fit) => format!(
                    "set parallelism and completions to {hosts}, or keep {} hosts and select the topology {fit}",
                    r.parallelism
                ),
                None => format!("set parallelism and completions to {hosts}"),
            },
        ),
    };
    Some(Violation::in_rjob(r, Rule::T4, path, problem, fix))
}

/// T4 while the JobSet is suspended or queued (SPEC §4.7): some slice of the table fits the
/// replicated job, or no flavour can ever run it. A pinned slice gets T4's own message.
pub fn t4_some_slice_fits(plan: &JobSetPlan) -> Vec<Violation> {
    let (settings, shapes) = (plan.settings, &plan.shapes);
    let mut out = Vec::new();
    for (i, r) in plan.view.tpu_jobs() {
        match &shapes.own[i] {
            Some(Shapes::Fixed(pairs)) if pairs.is_empty() => {
                out.extend(slice_of(r, settings).and_then(|(_, acc, t)| check_slice(r, acc?, &t)));
            }
            Some(Shapes::Open(pairs)) if pairs.is_empty() => out.push(no_slice_fits(r, settings)),
            _ => {}
        }
    }
    out
}

fn no_slice_fits(r: &ReplicatedJob, settings: &Settings) -> Violation {
    let accelerator = pinned(r, &settings.accelerator_label).map(|p| p.value);
    let (names, what) = match accelerator {
        Some(name) => (vec![name], format!("no {name} slice")),
        None => (
            accelerators::known_names(&settings.accelerators),
            "no slice of the accelerator table".to_string(),
        ),
    };
    let per_pod = r.chips_per_pod;
    let mut hosts: Vec<u32> = names
        .iter()
        .filter_map(|n| accelerators::lookup(&settings.accelerators, n))
        .flat_map(|acc| slice_fit::listed_host_counts(acc, per_pod))
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    let fix = if hosts.is_empty() {
        "ask for the chips of one host per pod, and set parallelism and completions to the hosts of a slice".to_string()
    } else {
        format!(
            "set parallelism and completions to the hosts of a slice, such as {}",
            join(&hosts, ", ")
        )
    };
    Violation::in_rjob(
        r,
        Rule::T4,
        r.at.pod_template().job_spec_field("parallelism"),
        format!(
            "is {}, and {what} with {per_pod} chips per pod has {} hosts, so no Kueue flavour can ever run it",
            r.parallelism, r.parallelism
        ),
        fix,
    )
}

/// Accelerators the table does not know, when they are accepted rather than rejected.
pub fn unknown_accelerators(plan: &JobSetPlan) -> Vec<String> {
    let (view, settings) = (plan.view, plan.settings);
    if settings.reject_unknown_accelerators {
        return Vec::new();
    }
    view.tpu_jobs()
        .filter_map(|(_, r)| Some((r, pinned(r, &settings.accelerator_label)?)))
        .filter(|(_, pin)| accelerators::lookup(&settings.accelerators, pin.value).is_none())
        .map(|(r, pin)| {
            format!(
                "{}: accelerator {:?} is not in the accelerator table, so its topology was not checked; add it to the accelerators setting",
                pin.path(r.template.at),
                pin.value
            )
        })
        .collect()
}
