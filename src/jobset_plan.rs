//! One plan per JobSet request (docs/contributing/spec.md §3): the replica groups, slice groups and JAX groups,
//! each found once from the view and holding references to its members, and the slice shapes
//! of §4.7, computed when first asked. The rules, the facts, the CREATE warnings and the
//! resize check all read it.
use crate::error::{checked_add, InputError};
use crate::facts::GroupFacts;
use crate::keys;
use crate::narrowing::{self, ShapePlan};
use crate::paths::Lazy;
use crate::settings::{JaxEnv, Settings};
use crate::views::jobset_view::{JobSetView, ReplicatedJob};
use std::cell::OnceCell;

/// A group of replicated jobs, members in spec order.
#[derive(Debug, Clone)]
pub struct Group<'v, 'a> {
    pub name: &'a str,
    pub members: Vec<&'v ReplicatedJob<'a>>,
}

impl Group<'_, '_> {
    pub fn contains(&self, rjob: &ReplicatedJob) -> bool {
        self.members.iter().any(|m| m.index == rjob.index)
    }
}

pub struct JobSetPlan<'v, 'a> {
    pub view: &'v JobSetView<'a>,
    pub settings: &'v Settings,
    /// Whether the JAX distributed env is on for this JobSet (docs/contributing/spec.md §4.4).
    pub jax_enabled: bool,
    /// Replica groups in order of first appearance.
    pub groups: Vec<Group<'v, 'a>>,
    /// The members of each group that run together: the groups without the replicated jobs
    /// that others wait for to complete (docs/contributing/spec.md §3), groups left empty left out.
    pub running_groups: Vec<Group<'v, 'a>>,
    /// The TPU members of each running group, groups without any left out. Non-TPU replicated
    /// jobs of a group (a CPU driver in `default`) are not slices.
    pub slice_groups: Vec<Group<'v, 'a>>,
    shapes: OnceCell<ShapePlan>,
}

impl<'v, 'a> JobSetPlan<'v, 'a> {
    pub fn new(view: &'v JobSetView<'a>, settings: &'v Settings) -> Self {
        let mut groups: Vec<Group> = Vec::new();
        for rjob in &view.replicated_jobs {
            // The field, else the annotation (how users of JobSet before v0.9 name groups).
            let name = rjob
                .group_field
                .or(rjob.group_annotation)
                .unwrap_or(keys::DEFAULT_GROUP);
            match groups.iter_mut().find(|g| g.name == name) {
                Some(g) => g.members.push(rjob),
                None => groups.push(Group {
                    name,
                    members: vec![rjob],
                }),
            }
        }
        let running_groups = subgroups(&groups, |r| !r.runs_first);
        let slice_groups = subgroups(&running_groups, |r| r.is_tpu());
        let jax_enabled = match settings.jax_env {
            JaxEnv::Never => false,
            JaxEnv::Always => true,
            JaxEnv::Annotated => view.annotation(keys::JAX_OPT_IN) == Some("true"),
        };
        JobSetPlan {
            view,
            settings,
            jax_enabled,
            groups,
            running_groups,
            slice_groups,
            shapes: OnceCell::new(),
        }
    }

    /// The JAX groups when the JAX env is on (docs/contributing/spec.md §4.4): the slice groups in a TPU JobSet (a
    /// CPU driver beside the slices is not a JAX process of the job), otherwise the running
    /// groups. Empty when it is off.
    pub fn jax_groups(&self) -> &[Group<'v, 'a>] {
        if !self.jax_enabled {
            &[]
        } else if self.slice_groups.is_empty() {
            &self.running_groups
        } else {
            &self.slice_groups
        }
    }

    /// Slice groups with more than one member.
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

    /// Each replicated job's group as its pods' group keys say (docs/contributing/spec.md §4.1), in spec order: the
    /// group's name, its replicas, and the job-group-index of the replicated job's job 0.
    pub fn group_keys(&self) -> Result<Vec<GroupFacts>, InputError> {
        let mut out = vec![None; self.view.replicated_jobs.len()];
        for group in &self.groups {
            let (replicas, starts) = offsets(&group.members, |r| Ok(r.replicas))?;
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
        let at = rjob.at;
        total = checked_add(total, weight(rjob)?, Lazy(move || at.field("replicas")))?;
    }
    Ok((total, starts))
}
