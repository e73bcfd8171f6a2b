//! The groups of a JobSet (SPEC §3), found once per request for the rules, the facts, the CREATE
//! warnings and the resize check: replica, slice and JAX groups, the group keys (§4.1) and the
//! slice shapes (§4.7). Every step is linear in the replicated jobs.
use crate::error::{add_at, InputError};
use crate::facts::GroupFacts;
use crate::keys;
use crate::narrowing::{self, ShapePlan};
use crate::settings::{JaxEnv, Settings};
use crate::views::jobset_view::{CoordinatorRef, JobSetView, ReplicatedJob};
use std::cell::OnceCell;
use std::collections::BTreeMap;

/// A group of replicated jobs, members in spec order.
#[derive(Debug, Clone)]
pub struct Group<'v, 'a> {
    pub name: &'a str,
    pub members: Vec<&'v ReplicatedJob<'a>>,
}

impl Group<'_, '_> {
    /// The group's Jobs, numbered in spec order: how many there are, and each member's first.
    /// A slice group's Jobs are its slices (SLICE_ID, SPEC §4.2); a replica group's are what its
    /// group keys count (§4.1).
    pub fn jobs(&self) -> Result<(u32, Vec<u32>), InputError> {
        offsets(&self.members, |r| Ok(r.replicas))
    }

    /// Whether the slice group is a multislice: more than one slice. Past `u32::MAX` it is.
    pub fn is_multislice(&self) -> bool {
        self.jobs().map_or(true, |(slices, _)| slices > 1)
    }
}

pub struct JobSetPlan<'v, 'a> {
    pub view: &'v JobSetView<'a>,
    pub settings: &'v Settings,
    /// Whether the JAX distributed env is on for this JobSet (SPEC §4.4).
    pub jax_enabled: bool,
    /// Whether it is on by the JobSet's own opt-in annotation: then P1–P3 judge its JAX
    /// groups, where `jaxEnv: always` alone leaves a member that breaks them out.
    pub jax_opted_in: bool,
    /// `spec.coordinator`, unless it names a replicated job that others wait for to complete: its
    /// pods are gone by the time theirs start (SPEC §3).
    pub coordinator: Option<&'v CoordinatorRef<'a>>,
    /// Replica groups in order of first appearance.
    pub groups: Vec<Group<'v, 'a>>,
    /// The TPU members of each group that run together (none that others wait for, SPEC §3): a
    /// CPU driver in `default` is not a slice. Groups left empty are left out, here and below.
    pub slice_groups: Vec<Group<'v, 'a>>,
    /// The JAX groups when the JAX env is on (SPEC §4.4), each without its batch jobs beside the
    /// JAX run.
    pub jax_groups: Vec<Group<'v, 'a>>,
    /// The members of a JAX group taken for batch jobs beside the JAX run (P1–P3): they get no
    /// JAX env, and the numbering of the others leaves them out.
    pub batch_beside_jax: Vec<&'v ReplicatedJob<'a>>,
    /// Each replicated job's group keys (SPEC §4.1), in spec order. A total past `u32::MAX` is
    /// kept as the error for the reader that needs the keys: a JobSet that needs none is not
    /// refused for them.
    pub group_keys: Result<Vec<GroupFacts>, InputError>,
    shapes: OnceCell<ShapePlan>,
}

impl<'v, 'a> JobSetPlan<'v, 'a> {
    pub fn new(view: &'v JobSetView<'a>, settings: &'v Settings) -> Self {
        let mut groups: Vec<Group> = Vec::new();
        let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
        for rjob in &view.replicated_jobs {
            // The field, else the annotation (how users of JobSet before v0.9 name groups).
            let name = rjob
                .group_field
                .or(rjob.group_annotation)
                .unwrap_or(keys::DEFAULT_GROUP);
            let at = *by_name.entry(name).or_insert_with(|| {
                groups.push(Group {
                    name,
                    members: Vec::new(),
                });
                groups.len().saturating_sub(1)
            });
            groups[at].members.push(rjob);
        }
        let running_groups = subgroups(&groups, |r| !r.runs_first);
        let slice_groups = subgroups(&running_groups, |r| r.is_tpu());
        let jax_opted_in =
            settings.jax_env != JaxEnv::Never && view.annotation(keys::JAX_OPT_IN) == Some("true");
        let jax_enabled = jax_opted_in || settings.jax_env == JaxEnv::Always;
        let coordinator = view.coordinator.as_ref().filter(|c| {
            view.replicated_job(c.replicated_job)
                .is_none_or(|r| !r.runs_first)
        });
        // The slice groups in a TPU JobSet (a CPU driver beside the slices is not a JAX
        // process of the job), otherwise the groups that run together.
        let candidates: &[Group] = match (jax_enabled, slice_groups.is_empty()) {
            (false, _) => &[],
            (true, true) => &running_groups,
            (true, false) => &slice_groups,
        };
        let batch_beside_jax = batch_beside_jax(candidates, coordinator, jax_opted_in);
        let mut batch = vec![false; view.replicated_jobs.len()];
        for r in &batch_beside_jax {
            batch[r.index] = true;
        }
        let jax_groups = subgroups(candidates, |r| !batch[r.index]);
        let group_keys = group_keys(&groups, view.replicated_jobs.len());
        JobSetPlan {
            view,
            settings,
            jax_enabled,
            jax_opted_in,
            coordinator,
            groups,
            slice_groups,
            jax_groups,
            batch_beside_jax,
            group_keys,
            shapes: OnceCell::new(),
        }
    }

    pub fn multi_member_slice_groups(&self) -> impl Iterator<Item = &Group<'v, 'a>> {
        self.slice_groups.iter().filter(|g| g.members.len() > 1)
    }

    /// The slice shapes of §4.7, computed once.
    pub fn shapes(&self) -> &ShapePlan {
        self.shapes.get_or_init(|| {
            let members = self.slice_groups.iter().map(|g| g.members.as_slice());
            narrowing::plan(self.view, members, self.settings)
        })
    }
}

/// Each replicated job's group as its pods' group keys say (SPEC §4.1), in spec order: the group's
/// name, its replicas, and the job-group-index of the replicated job's job 0.
fn group_keys(groups: &[Group], rjobs: usize) -> Result<Vec<GroupFacts>, InputError> {
    let mut out = vec![None; rjobs];
    for group in groups {
        let (replicas, starts) = group.jobs()?;
        for (rjob, offset) in group.members.iter().zip(starts) {
            out[rjob.index] = Some(GroupFacts {
                name: group.name.to_string(),
                replicas,
                offset,
            });
        }
    }
    // Every replicated job is in exactly one group.
    Ok(out.into_iter().flatten().collect())
}

/// The members of the JAX groups `candidates` taken for batch jobs beside the JAX run
/// (docs/rules.md, P1–P3): the non-TPU members that break P1–P3, each one under `jaxEnv: always`
/// without the JobSet's own opt-in, and with it one `alone` in its group while
/// `another_group_keeps` them. The rest is refused; TPU members are T1's and T2's.
fn batch_beside_jax<'v, 'a>(
    candidates: &[Group<'v, 'a>],
    coordinator: Option<&CoordinatorRef>,
    opted_in: bool,
) -> Vec<&'v ReplicatedJob<'a>> {
    // A member without pods numbers no process, so it keeps them.
    let keeps = |r: &ReplicatedJob| r.replicas == 0 || r.launch(coordinator).all_at_once();
    let with_pods = |g: &Group| g.members.iter().filter(|r| r.replicas > 0).count();
    // A group that keeps them holds no member that breaks them: it is another group.
    let another_group_keeps = candidates
        .iter()
        .any(|g| with_pods(g) > 0 && g.members.iter().all(|r| keeps(r)));
    let mut out = Vec::new();
    for g in candidates {
        let alone = with_pods(g) == 1;
        out.extend(g.members.iter().copied().filter(|r| {
            match (r.is_tpu() || keeps(r), opted_in) {
                (true, _) => false,
                (false, false) => true,
                (false, true) => alone && another_group_keeps,
            }
        }));
    }
    out
}

/// The members of each group that `keep` keeps, in order; groups left empty are left out.
fn subgroups<'v, 'a>(
    groups: &[Group<'v, 'a>],
    keep: impl Fn(&ReplicatedJob) -> bool,
) -> Vec<Group<'v, 'a>> {
    groups
        .iter()
        .map(|g| Group {
            name: g.name,
            members: g.members.iter().copied().filter(|r| keep(r)).collect(),
        })
        .filter(|g| !g.members.is_empty())
        .collect()
}

/// The running offset of each member and the total, weighting each member by `weight`.
pub fn offsets(
    members: &[&ReplicatedJob],
    weight: impl Fn(&ReplicatedJob) -> Result<u32, InputError>,
) -> Result<(u32, Vec<u32>), InputError> {
    let mut total = 0u32;
    let mut starts = Vec::with_capacity(members.len());
    for rjob in members {
        starts.push(total);
        total = add_at(total, weight(rjob)?, &rjob.at.field("replicas"))?;
    }
    Ok((total, starts))
}
