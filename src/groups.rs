//! Replica groups, slice groups, offsets and the coordinator (SPEC §3): pure functions of the
//! JobSet view. Their output is the [`Facts`] stamped on each replicated job.
use crate::error::{checked_add, checked_mul, InputError};
use crate::facts::{Facts, GroupFacts, JaxFacts, OffsetFacts};
use crate::json;
use crate::keys;
use crate::settings::{JaxEnv, Settings};
use crate::views::jobset_view::{JobSetView, ReplicatedJob};

/// The group of a replicated job: the field, else the annotation (how users of JobSet
/// before v0.9 name groups), else `default`.
pub fn group_of<'a>(rjob: &ReplicatedJob<'a>) -> &'a str {
    rjob.group_field
        .or(rjob.group_annotation)
        .unwrap_or(keys::DEFAULT_GROUP)
}

/// Groups in order of first appearance, each with its members' indexes in spec order.
pub fn groups<'a>(view: &JobSetView<'a>) -> Vec<(&'a str, Vec<usize>)> {
    let mut out: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, rjob) in view.replicated_jobs.iter().enumerate() {
        let name = group_of(rjob);
        match out.iter_mut().find(|(g, _)| *g == name) {
            Some((_, members)) => members.push(i),
            None => out.push((name, vec![i])),
        }
    }
    out
}

/// Slice groups: the TPU members of each group, in spec order. Non-TPU replicated jobs of a
/// group (a CPU driver in `default`) are not slices.
pub fn slice_groups<'a>(view: &JobSetView<'a>) -> Vec<(&'a str, Vec<usize>)> {
    tpu_members(view, &groups(view))
}

/// The TPU members of each of `groups`, dropping groups that have none.
fn tpu_members<'a>(
    view: &JobSetView,
    groups: &[(&'a str, Vec<usize>)],
) -> Vec<(&'a str, Vec<usize>)> {
    groups
        .iter()
        .map(|(name, members)| {
            let tpu = members
                .iter()
                .copied()
                .filter(|&i| view.replicated_jobs[i].is_tpu())
                .collect();
            (*name, tpu)
        })
        .filter(|(_, members): &(&str, Vec<usize>)| !members.is_empty())
        .collect()
}

/// A replicated job's group as its pods' group keys say (SPEC §4.1): the group's name, its
/// replicas, and the job-group-index of the replicated job's job 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupKeys<'a> {
    pub name: &'a str,
    pub replicas: u32,
    pub offset: u32,
}

/// The group keys of each replicated job, in spec order, given the view's [`groups`]. Every
/// replicated job is in exactly one group, so each entry is `Some`.
pub fn group_keys<'a>(
    view: &JobSetView,
    groups: &[(&'a str, Vec<usize>)],
) -> Result<Vec<Option<GroupKeys<'a>>>, InputError> {
    let mut out = vec![None; view.replicated_jobs.len()];
    for (name, members) in groups {
        let (replicas, starts) = offsets(view, members, |r| Ok(r.replicas))?;
        for (&i, offset) in members.iter().zip(starts) {
            out[i] = Some(GroupKeys {
                name,
                replicas,
                offset,
            });
        }
    }
    Ok(out)
}

/// The running offset of each member and the total, weighting each member by `weight`.
fn offsets(
    view: &JobSetView,
    members: &[usize],
    weight: impl Fn(&ReplicatedJob) -> Result<u32, InputError>,
) -> Result<(u32, Vec<u32>), InputError> {
    let mut total = 0u32;
    let mut starts = Vec::with_capacity(members.len());
    for &i in members {
        starts.push(total);
        let rjob = &view.replicated_jobs[i];
        total = checked_add(total, weight(rjob)?, &json::join(&rjob.path, "replicas"))?;
    }
    Ok((total, starts))
}

fn pods_of(rjob: &ReplicatedJob) -> Result<u32, InputError> {
    checked_mul(
        rjob.replicas,
        rjob.parallelism,
        &json::join(&rjob.path, "replicas"),
    )
}

/// The group's first member that has pods: a replicated job may have `replicas: 0`, and its
/// pods never exist (SPEC §3). The first member when none has any (no pod needs a coordinator).
pub fn first_with_pods(view: &JobSetView, members: &[usize]) -> usize {
    members
        .iter()
        .copied()
        .find(|&i| view.replicated_jobs[i].replicas > 0)
        .or_else(|| members.first().copied())
        .unwrap_or(0)
}

/// `<rjob>-<jobIndex>-<podIndex>` of the group's coordinator: `spec.coordinator` wherever it
/// is (Pathways puts it on a CPU head), else pod 0 of job 0 of `first_member`, the group's
/// first member with replicas > 0 ([`first_with_pods`]). Never the member's own job 0, which
/// would give each replicated job its own coordinator.
pub fn coordinator(view: &JobSetView, first_member: usize) -> String {
    match &view.coordinator {
        Some(c) => format!("{}-{}-{}", c.replicated_job, c.job_index, c.pod_index),
        None => format!("{}-0-0", view.replicated_jobs[first_member].name),
    }
}

/// The JAX group's process 0 (SPEC §4.4): `spec.coordinator` when it names a pod of the
/// group, with the id the numbering gives it (`starts` are the members' pod offsets); else
/// pod 0 of job 0 of the first member that has pods, id 0. `None` when no member has pods.
fn jax_coordinator(
    view: &JobSetView,
    members: &[usize],
    starts: &[u32],
) -> Result<Option<(String, u32)>, InputError> {
    if let Some(c) = &view.coordinator {
        let named = members
            .iter()
            .zip(starts)
            .find(|(&m, _)| view.replicated_jobs[m].name == c.replicated_job);
        if let Some((&m, &start)) = named {
            let rjob = &view.replicated_jobs[m];
            let path = "spec.coordinator";
            let id = checked_add(
                checked_add(
                    start,
                    checked_mul(c.job_index, rjob.parallelism, path)?,
                    path,
                )?,
                c.pod_index,
                path,
            )?;
            let host = format!("{}-{}-{}", c.replicated_job, c.job_index, c.pod_index);
            return Ok(Some((host, id)));
        }
    }
    let first = members
        .iter()
        .map(|&m| &view.replicated_jobs[m])
        .find(|r| r.replicas > 0 && r.parallelism > 0);
    Ok(first.map(|r| (format!("{}-0-0", r.name), 0)))
}

/// Whether the JAX distributed env is on for this JobSet (SPEC §4.4).
pub fn jax_enabled(view: &JobSetView, settings: &Settings) -> bool {
    match settings.jax_env {
        JaxEnv::Never => false,
        JaxEnv::Always => true,
        JaxEnv::Annotated => view.annotation(keys::JAX_OPT_IN) == Some("true"),
    }
}

/// The JAX groups when the JAX env is on (SPEC §4.4): the slice groups in a TPU JobSet (a CPU
/// driver beside the slices is not a JAX process of the job), otherwise the replica groups.
pub fn jax_groups<'a>(view: &JobSetView<'a>, settings: &Settings) -> Vec<(&'a str, Vec<usize>)> {
    if !jax_enabled(view, settings) {
        return Vec::new();
    }
    let groups = groups(view);
    let slice_groups = tpu_members(view, &groups);
    if slice_groups.is_empty() {
        groups
    } else {
        slice_groups
    }
}

/// The facts for each replicated job, in spec order.
pub fn plan(view: &JobSetView, settings: &Settings) -> Result<Vec<Facts>, InputError> {
    let mut facts = vec![Facts::default(); view.replicated_jobs.len()];
    let groups = groups(view);

    if !view.has_native_groups() {
        for (f, group) in facts.iter_mut().zip(group_keys(view, &groups)?) {
            f.group = group.map(|k| GroupFacts {
                name: k.name.to_string(),
                replicas: k.replicas,
                offset: k.offset,
            });
        }
    }

    let slice_groups = tpu_members(view, &groups);
    for (_, members) in &slice_groups {
        let (total, starts) = offsets(view, members, |r| Ok(r.replicas))?;
        let outside = view.coordinator.as_ref().is_some_and(|c| {
            !members
                .iter()
                .any(|&m| view.replicated_jobs[m].name == c.replicated_job)
        });
        for (&i, offset) in members.iter().zip(starts) {
            facts[i].slice = Some(OffsetFacts { total, offset });
            facts[i].coordinator = Some(coordinator(view, first_with_pods(view, members)));
            facts[i].coordinator_outside = outside;
        }
    }

    if jax_enabled(view, settings) {
        // The JAX group is the slice group in a TPU JobSet (a CPU driver beside the slices
        // is not a JAX process of the job); otherwise the replica group.
        let jax_groups = if slice_groups.is_empty() {
            groups
        } else {
            slice_groups
        };
        for (_, members) in &jax_groups {
            let (total, starts) = offsets(view, members, pods_of)?;
            let process_0 = jax_coordinator(view, members, &starts)?;
            for (&i, offset) in members.iter().zip(starts) {
                facts[i].jax = Some(JaxFacts {
                    total,
                    offset,
                    coordinator: process_0.as_ref().map(|(host, _)| host.clone()),
                    coordinator_id: process_0.as_ref().map_or(0, |(_, id)| *id),
                });
            }
        }
    }

    for (f, rjob) in facts.iter_mut().zip(&view.replicated_jobs) {
        if f.coordinator.is_some() || f.jax.is_some() {
            f.subdomain = view.subdomain.map(str::to_string);
            f.pods_per_job = Some(rjob.parallelism);
        }
    }
    Ok(facts)
}

/// Slice groups with more than one member, as (group name, member indexes).
pub fn multi_member_slice_groups<'a>(view: &JobSetView<'a>) -> Vec<(&'a str, Vec<usize>)> {
    slice_groups(view)
        .into_iter()
        .filter(|(_, members)| members.len() > 1)
        .collect()
}

#[cfg(test)]
mod tests {
    //! These also run compiled to wasm32-wasip1 (`make test`), where `usize` is 32 bits.
    use super::*;
    use serde_json::{json, Value};

    fn rjob(name: &str, replicas: u32, parallelism: u32, tpu: bool) -> Value {
        let resources = if tpu {
            json!({"limits": {"google.com/tpu": "4"}})
        } else {
            json!({})
        };
        json!({"name": name, "replicas": replicas, "template": {"spec": {
            "parallelism": parallelism, "completions": parallelism,
            "template": {"spec": {"containers": [{"name": "c", "resources": resources}]}}
        }}})
    }

    fn plan_of(rjobs: Vec<Value>, settings: &Settings) -> Result<Vec<Facts>, InputError> {
        let js = json!({"metadata": {"name": "js"}, "spec": {"replicatedJobs": rjobs}});
        let view = JobSetView::parse(&js, "google.com/tpu")?;
        plan(&view, settings)
    }

    #[test]
    fn replicas_times_parallelism_beyond_u32_is_an_error_not_a_wrap() {
        let settings = Settings {
            jax_env: JaxEnv::Always,
            ..Settings::default()
        };
        let err = plan_of(vec![rjob("cpu", i32::MAX as u32, 4, false)], &settings).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.replicatedJobs[0].replicas: the total over its group is larger than 4294967295"
        );
    }

    #[test]
    fn slice_sums_over_many_replicated_jobs_overflow_cleanly() {
        let rjobs = (0..3)
            .map(|i| rjob(&format!("s{i}"), i32::MAX as u32, 1, true))
            .collect();
        let err = plan_of(rjobs, &Settings::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.replicatedJobs[2].replicas: the total over its group is larger than 4294967295"
        );
    }

    #[test]
    fn sums_up_to_u32_max_are_exact() {
        let rjobs = vec![
            rjob("a", i32::MAX as u32, 1, true),
            rjob("b", i32::MAX as u32, 1, true),
            rjob("c", 1, 1, true),
        ];
        let facts = plan_of(rjobs, &Settings::default()).unwrap();
        assert_eq!(
            facts[2].slice,
            Some(OffsetFacts {
                total: u32::MAX,
                offset: u32::MAX - 1
            })
        );
    }

    #[test]
    fn a_thousand_replicated_jobs_sum_in_order() {
        let rjobs = (0..1000)
            .map(|i| rjob(&format!("s{i}"), 3, 2, true))
            .collect();
        let facts = plan_of(rjobs, &Settings::default()).unwrap();
        assert_eq!(
            facts[999].slice,
            Some(OffsetFacts {
                total: 3000,
                offset: 2997
            })
        );
        assert_eq!(facts[999].group.as_ref().map(|g| g.replicas), Some(3000));
        assert_eq!(facts[999].coordinator.as_deref(), Some("s0-0-0"));
    }

    #[test]
    fn a_cpu_driver_is_in_the_group_but_not_a_slice() {
        let facts = plan_of(
            vec![rjob("driver", 1, 1, false), rjob("workers", 4, 2, true)],
            &Settings::default(),
        )
        .unwrap();
        assert_eq!(facts[0].slice, None);
        assert_eq!(
            facts[1].slice,
            Some(OffsetFacts {
                total: 4,
                offset: 0
            })
        );
        assert_eq!(
            facts[1].group.as_ref().map(|g| (g.replicas, g.offset)),
            Some((5, 1))
        );
        assert_eq!(facts[1].coordinator.as_deref(), Some("workers-0-0"));
    }

    #[test]
    fn the_coordinator_is_in_the_first_member_with_pods() {
        let facts = plan_of(
            vec![
                rjob("spare", 0, 2, true),
                rjob("main", 2, 2, true),
                rjob("more", 1, 2, true),
            ],
            &Settings::default(),
        )
        .unwrap();
        for f in &facts {
            assert_eq!(f.coordinator.as_deref(), Some("main-0-0"));
        }
        assert_eq!(
            facts[1].slice,
            Some(OffsetFacts {
                total: 3,
                offset: 0
            })
        );
    }
}
