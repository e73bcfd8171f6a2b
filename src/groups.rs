//! The groups of a JobSet (SPEC §3), found once per request for the rules, the facts, the CREATE
//! warnings and the resize check: replica, slice and JAX groups, the group keys (§4.1) and the
//! slice shapes (§4.7). Every step is linear in the replicated jobs.
use crate::error::{add_at, count_at, InputError};
use crate::facts::GroupFacts;
use crate::keys;
use crate::narrowing::{self, ShapePlan};
use crate::settings::{JaxEnv, Settings};
use crate::tas;
use crate::views::jobset_view::{CoordinatorRef, JobSetView, ReplicatedJob};
use std::collections::BTreeMap;

/// A group's members numbered in spec order: how many in all, and each member's first. A total
/// past `u32::MAX` is kept as the error for the reader that needs it.
pub type Numbering = Result<(u32, Vec<u32>), InputError>;

/// A group of replicated jobs, members in spec order.
#[derive(Debug, Clone)]
pub struct Group<'v, 'a> {
    pub name: &'a str,
    pub members: Vec<&'v ReplicatedJob<'a>>,
    /// Its Jobs: a slice group's Jobs are its slices (SLICE_ID, SPEC §4.2); a replica group's
    /// are what its group keys count (§4.1).
    pub jobs: Numbering,
    /// Its pods: a JAX group's processes (§4.4).
    pub pods: Numbering,
}

impl<'v, 'a> Group<'v, 'a> {
    fn new(name: &'a str, members: Vec<&'v ReplicatedJob<'a>>) -> Self {
        let jobs = offsets(&members, |r| Ok(r.replicas));
        let pods = offsets(&members, |r| count_at(r.pods(), &r.at.field("replicas")));
        Group {
            name,
            members,
            jobs,
            pods,
        }
    }

    /// Whether the slice group is a multislice: more than one slice. Past `u32::MAX` it is.
    pub fn is_multislice(&self) -> bool {
        self.jobs.as_ref().map_or(true, |(slices, _)| *slices > 1)
    }
}

pub struct JobSetPlan<'v, 'a> {
    pub view: &'v JobSetView<'a>,
    pub settings: &'v Settings,
    /// Whether the policy judges this JobSet at all: it has a TPU replicated job or the JAX env is on.
    pub in_scope: bool,
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
    /// What each replicated job's pod template asks of Kueue's topology-aware scheduling, in spec
    /// order: read once for K1–K3, the queue check and the slice size the mutation adds.
    pub tas: Vec<tas::Request<'a>>,
    /// The slice shapes of §4.7, computed with the plan: a CREATE in the roles that mutate needs
    /// them anyway, and what a lazy cell saved (an UPDATE, the role `validate`) comes once per
    /// JobSet, not by the thousand (CONTRIBUTING.md, "Performance code").
    pub shapes: ShapePlan,
}

impl<'v, 'a> JobSetPlan<'v, 'a> {
    /// The plan of a JobSet, or its input error (SPEC §6): a coordinator that names no pod.
    pub fn new(view: &'v JobSetView<'a>, settings: &'v Settings) -> Result<Self, InputError> {
        let mut named: Vec<(&str, Vec<&ReplicatedJob>)> = Vec::new();
        let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
        for rjob in &view.replicated_jobs {
            // The field, else the annotation (how users of JobSet before v0.9 name groups).
            let name = rjob
                .group_field
                .or(rjob.group_annotation)
                .unwrap_or(keys::DEFAULT_GROUP);
            let at = *by_name.entry(name).or_insert_with(|| {
                named.push((name, Vec::new()));
                named.len().saturating_sub(1)
            });
            named[at].1.push(rjob);
        }
        let groups: Vec<Group> = named.into_iter().map(|(n, m)| Group::new(n, m)).collect();
        let running_groups = subgroups(&groups, |r| !r.runs_first);
        let slice_groups = subgroups(&running_groups, |r| r.is_tpu());
        let jax_opted_in =
            settings.jax_env != JaxEnv::Never && view.annotation(keys::JAX_OPT_IN) == Some("true");
        let jax_enabled = jax_opted_in || settings.jax_env == JaxEnv::Always;
        // The policy judges a TPU JobSet, or one that gets the JAX env; JobSet's own webhook
        // judges the rest (SPEC §6, last paragraph).
        let in_scope = view.tpu_jobs().next().is_some() || jax_enabled;
        check_coordinator(view, in_scope)?;
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
        let members = slice_groups.iter().map(|g| g.members.as_slice());
        let shapes = narrowing::plan(view, members, settings);
        let tas = view.replicated_jobs.iter().map(tas::request).collect();
        Ok(JobSetPlan {
            view,
            settings,
            in_scope,
            jax_enabled,
            jax_opted_in,
            coordinator,
            groups,
            slice_groups,
            jax_groups,
            batch_beside_jax,
            group_keys,
            tas,
            shapes,
        })
    }

    pub fn multi_member_slice_groups(&self) -> impl Iterator<Item = &Group<'v, 'a>> {
        self.slice_groups.iter().filter(|g| g.members.len() > 1)
    }
}

/// The input errors of a JobSet the policy judges (SPEC §6): a coordinator that names no pod, on
/// which every process would wait. Every role refuses them, since the plan of the env reads it.
fn check_coordinator(view: &JobSetView, in_scope: bool) -> Result<(), InputError> {
    let Some(c) = view.coordinator.as_ref().filter(|_| in_scope) else {
        return Ok(());
    };
    let Some(rjob) = view.replicated_job(c.replicated_job) else {
        return Err(InputError::invalid(
            "spec.coordinator.replicatedJob",
            format!("no replicated job is named {:?}", c.replicated_job),
        ));
    };
    // The one error of an index past the `count` things that `rjob` has.
    let past = |field: &str, index: u32, count: u32, has: String| {
        let last = count.saturating_sub(1);
        let name = rjob.name;
        let reason = format!("is {index} but replicated job {name:?} {has}; use 0 to {last}");
        Err(InputError::invalid(field, reason))
    };
    if c.job_index >= rjob.replicas {
        let has = format!("has {} replicas", rjob.replicas);
        return past("spec.coordinator.jobIndex", c.job_index, rjob.replicas, has);
    }
    // The completion indexes the Job controller runs (T2 reports an Indexed Job without them).
    let pods = rjob.launch(None).pods;
    if c.pod_index >= pods {
        let has = format!("runs {pods} pods per job");
        return past("spec.coordinator.podIndex", c.pod_index, pods, has);
    }
    Ok(())
}

/// Each replicated job's group as its pods' group keys say (SPEC §4.1), in spec order: the group's
/// name, its replicas, and the job-group-index of the replicated job's job 0.
fn group_keys(groups: &[Group], rjobs: usize) -> Result<Vec<GroupFacts>, InputError> {
    let mut out = vec![None; rjobs];
    for group in groups {
        let (replicas, starts) = group.jobs.clone()?;
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
        let taken = !opted_in || (with_pods(g) == 1 && another_group_keeps);
        out.extend(
            g.members
                .iter()
                .copied()
                .filter(|r| taken && !r.is_tpu() && !keeps(r)),
        );
    }
    out
}

/// The members of each group that `keep` keeps, in order; groups left empty are left out.
fn subgroups<'v, 'a>(
    groups: &[Group<'v, 'a>],
    keep: impl Fn(&ReplicatedJob) -> bool,
) -> Vec<Group<'v, 'a>> {
    let kept =
        |g: &Group<'v, 'a>| -> Vec<_> { g.members.iter().copied().filter(|r| keep(r)).collect() };
    groups
        .iter()
        .map(|g| (g.name, kept(g)))
        .filter(|(_, members)| !members.is_empty())
        .map(|(name, members)| Group::new(name, members))
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
