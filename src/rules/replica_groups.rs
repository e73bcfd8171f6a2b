//! G1–G5: replica groups and slice groups.
use crate::groups::JobSetPlan;
use crate::k8s_syntax;
use crate::keys;
use crate::narrowing;
use crate::placement::{pinned, slice_topology};
use crate::settings::Settings;
use crate::views::jobset_view::ReplicatedJob;
use crate::views::node_pins::Pin;
use crate::violation::{Rule, Violation};

/// G1: a group name is a DNS-1035 label of at most 63 characters.
pub fn g1_group_name_is_a_label(plan: &JobSetPlan) -> Vec<Violation> {
    let mut out = Vec::new();
    for rjob in &plan.view.replicated_jobs {
        let named = [
            rjob.group_field.map(|n| (n, rjob.at.field("groupName"))),
            rjob.group_annotation
                .map(|n| (n, rjob.at.job_annotation(keys::GROUP_NAME))),
        ];
        for (name, path) in named.into_iter().flatten() {
            if !k8s_syntax::is_dns1035_label(name) {
                out.push(Violation::in_rjob(
                    rjob,
                    Rule::G1,
                    path,
                    format!("{name:?} is not a DNS-1035 label"),
                    format!(
                        "use lowercase letters, digits and '-', starting with a letter, at most 63 characters, for example {:?}",
                        k8s_syntax::dns1035_label_near(name)
                    ),
                ));
            }
        }
    }
    out
}

/// Warnings for a JobSet the policy does not judge, before JobSet v0.9 (the policy writes the
/// group keys): a group name that is no label value goes in the annotation only (SPEC §4.1).
pub fn names_without_a_label(plan: &JobSetPlan) -> Vec<String> {
    if plan.view.has_native_groups() {
        return Vec::new();
    }
    plan.view
        .replicated_jobs
        .iter()
        .filter_map(|r| match (r.group_field, r.group_annotation) {
            (Some(name), _) => Some((name, r.at.field("groupName"))),
            (None, Some(name)) => Some((name, r.at.job_annotation(keys::GROUP_NAME))),
            (None, None) => None,
        })
        .filter_map(|(name, path)| {
            let problem = k8s_syntax::label_value_problem(name)?;
            Some(format!(
                "{path}: {problem}, so its pods get the group-name annotation only"
            ))
        })
        .collect()
}

/// G2: when both the field and the annotation name the group, they agree.
pub fn g2_field_and_annotation_agree(plan: &JobSetPlan) -> Vec<Violation> {
    let view = plan.view;
    view.replicated_jobs
        .iter()
        .filter_map(|rjob| match (rjob.group_field, rjob.group_annotation) {
            (Some(field), Some(annotation)) if field != annotation => Some(Violation::in_rjob(
                rjob,
                Rule::G2,
                rjob.at.field("groupName"),
                format!("is {field:?} but the annotation {} says {annotation:?}", keys::GROUP_NAME),
                format!(
                    "set groupName to {annotation:?} (on JobSet v0.9+ it defaults to \"default\") or make the annotation match"
                ),
            )),
            _ => None,
        })
        .collect()
}

/// G3: an explicitly named group does not mix TPU and non-TPU replicated jobs. Only
/// `default` may hold a CPU driver beside the slices.
pub fn g3_no_cpu_job_among_slices(plan: &JobSetPlan) -> Vec<Violation> {
    let mut out = Vec::new();
    for group in plan.groups.iter().filter(|g| g.name != keys::DEFAULT_GROUP) {
        let (name, rjobs) = (group.name, &group.members);
        let tpu: Vec<&str> = rjobs
            .iter()
            .filter(|r| r.is_tpu())
            .map(|r| r.name)
            .collect();
        if tpu.is_empty() {
            continue;
        }
        // Named once per non-TPU member, so at most three, or the message would grow with the
        // product of the two.
        let tpu = match tpu.len() {
            0..=3 => format!("{tpu:?}"),
            n => format!("{:?} and {} more", &tpu[..3], n - 3),
        };
        // One that runs first (an initializer the slices wait for) is no slice of theirs.
        for rjob in rjobs.iter().filter(|r| !r.is_tpu() && !r.runs_first) {
            let named_at = match rjob.group_field {
                Some(_) => rjob.at.field("groupName"),
                None => rjob.at.job_annotation(keys::GROUP_NAME),
            };
            out.push(Violation::in_rjob(
                *rjob,
                Rule::G3,
                named_at,
                format!(
                    "puts this non-TPU replicated job in group {name:?} with TPU replicated jobs {tpu}"
                ),
                "give it a group of its own, or leave it in \"default\", where non-TPU jobs are not counted as slices",
            ));
        }
    }
    out
}

/// What G4 compares of a slice's node selection: its accelerator and its slice topology.
fn selection<'a>(r: &ReplicatedJob<'a>, settings: &Settings) -> [Option<Pin<'a>>; 2] {
    [
        pinned(r, &settings.accelerator_label).cloned(),
        slice_topology(r, &settings.topology_label),
    ]
}

/// G4: the slices of a multislice are identical: same accelerator, slice topology (SPEC §3), chips
/// per pod and number of TPU containers per pod.
pub fn g4_identical_slices(plan: &JobSetPlan) -> Vec<Violation> {
    let settings = plan.settings;
    let mut out = Vec::new();
    for slice_group in plan.multi_member_slice_groups() {
        let (group, first) = (slice_group.name, slice_group.members[0]);
        for rjob in &slice_group.members[1..] {
            let mut differ = |path: String, problem: String| {
                let fix = format!(
                    "a multislice is made of identical slices: make it match {:?}, the first replicated job of slice group {group:?}",
                    first.name
                );
                out.push(Violation::in_rjob(*rjob, Rule::G4, path, problem, fix));
            };
            let pairs = selection(rjob, settings)
                .into_iter()
                .zip(selection(first, settings))
                .filter_map(|(mine, theirs)| mine.zip(theirs));
            for (mine, theirs) in pairs.filter(|(mine, theirs)| mine.value != theirs.value) {
                differ(
                    mine.path(rjob.template.at),
                    format!(
                        "is {:?} but {:?} has {:?}",
                        mine.value, first.name, theirs.value
                    ),
                );
            }
            if rjob.chips_per_pod != first.chips_per_pod {
                differ(
                    rjob.template.at.spec_field("containers"),
                    format!(
                        "ask for {} TPU chips per pod but {:?} asks for {}",
                        rjob.chips_per_pod, first.name, first.chips_per_pod
                    ),
                );
            }
            let (mine, theirs) = (rjob.tpu_containers(), first.tpu_containers());
            if mine != theirs {
                differ(
                    rjob.template.at.spec_field("containers"),
                    format!(
                        "hold {mine} TPU container{} per pod but {:?} holds {theirs}",
                        if mine == 1 { "" } else { "s" },
                        first.name
                    ),
                );
            }
        }
    }
    out
}

/// G5 (while the JobSet is suspended or queued): a slice group of two or more TPU replicated jobs
/// is left with exactly one (accelerator, topology) pair (SPEC §4.7). One left with none is G4's
/// or T4's to report.
pub fn g5_one_shape_per_queued_slice_group(plan: &JobSetPlan) -> Vec<Violation> {
    let (shapes, settings) = (&plan.shapes, plan.settings);
    let mut out = Vec::new();
    for slice_group in &plan.slice_groups {
        let (group, members) = (slice_group.name, &slice_group.members);
        let judged: Vec<_> = members
            .iter()
            .filter_map(|m| Some((m, shapes.group[m.index].as_ref()?)))
            .collect();
        let [(first, pairs), _, ..] = judged[..] else {
            continue;
        };
        if narrowing::count(pairs) < 2 {
            continue;
        }
        let names: Vec<&str> = judged.iter().map(|(r, _)| r.name).collect();
        let problem = format!(
            "slice group {group:?} of replicated jobs {names:?} is queued with {} slice shapes left ({}), and Kueue gives each replicated job a flavour of its own, so they could get different shapes",
            narrowing::count(pairs),
            narrowing::describe(pairs)
        );
        out.push(Violation::in_rjob(
            *first,
            Rule::G5,
            first.template.at.spec_field("nodeSelector"),
            problem,
            format!(
                "pin one shape in every replicated job of the group: {} and {} in each nodeSelector",
                settings.accelerator_label, settings.topology_label
            ),
        ));
    }
    out
}

/// Warning: `spec.coordinator` names a replicated job without TPUs as the MEGASCALE coordinator
/// of a multislice whose TPU pods run JAX, as the JobSet's own opt-in says (SPEC §4.2): only
/// Pathways works so. Settings (`jaxEnv: always`) say nothing of what a JobSet runs.
pub fn coordinator_without_tpus(plan: &JobSetPlan) -> Vec<String> {
    let view = plan.view;
    if !plan.settings.multislice_env || !plan.jax_opted_in {
        return Vec::new();
    }
    let Some(coordinator) = view
        .coordinator
        .as_ref()
        .and_then(|c| view.replicated_job(c.replicated_job))
        .filter(|r| !r.is_tpu() && !r.runs_first)
    else {
        return Vec::new();
    };
    let sets_its_own = |r: &ReplicatedJob| {
        r.template
            .containers
            .iter()
            .filter(|c| c.is_tpu())
            .all(|c| {
                c.user_entries()
                    .is_ok_and(|env| env.iter().any(|e| e.name == keys::ENV_COORDINATOR))
            })
    };
    plan.slice_groups
        .iter()
        .filter(|g| g.is_multislice())
        .filter(|g| !g.members.iter().all(|r| sets_its_own(r)))
        .map(|g| {
            format!(
                "spec.coordinator: replicated job {:?} runs no TPU container, so the MEGASCALE coordinator of slice group {:?} has no libtpu, which its JAX processes need (Pathways runs none there); name a pod of the group, or unset it",
                coordinator.name, g.name
            )
        })
        .collect()
}
