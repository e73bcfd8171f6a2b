//! The facts a JobSet admission hands to pod admission, stamped as one JSON annotation on each
//! replicated job's pod template: a pod cannot see its JobSet, and a JobSet created with
//! `generateName` has no name yet. This is their wire format, a foundation; `jobset_facts` computes
//! a JobSet's, `job_facts` a plain Job's.
//!
//! Facts outlive the release that wrote them (a rollback, two releases side by side during a
//! rolling update, a JobSet that waits in a queue for days), so they are read tolerantly (SPEC §9):
//! a field this release does not know is ignored, fields are only ever added (each optional), and
//! a change that cannot be read so bumps [`VERSION`], written in an annotation of its own, which a
//! reader of an older version refuses with one message.
use crate::error::InputError;
use crate::json::{map_str, Object};
use crate::keys;
use serde::{Deserialize, Serialize};

/// The facts version this release reads, and writes: absent means 1, so this release writes
/// no version key, and its facts stay readable by releases that never heard of one.
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Facts {
    /// Only on JobSets without native groups (before v0.9); v0.9+ controllers stamp their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupFacts>,
    /// Only on TPU replicated jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<OffsetFacts>,
    /// Only when the JAX env is on for the JobSet and the replicated job is in the JAX group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jax: Option<JaxFacts>,
    /// The MEGASCALE coordinator pod of the slice group, `<rjob>-<jobIndex>-<podIndex>`.
    #[serde(rename = "coordinator")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_coordinator: Option<String>,
    /// The slice coordinator is a pod outside the slice group (a Pathways head named by
    /// `spec.coordinator`): it runs no TPU container, so its address carries no DCN port.
    #[serde(rename = "coordinatorOutside")]
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slice_coordinator_outside: bool,
    /// The `MEGASCALE_PORT` the slice coordinator's first TPU container sets itself: the
    /// coordinator address names it (SPEC §4.2).
    #[serde(rename = "coordinatorPort")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_coordinator_port: Option<u32>,
    /// Other replicated jobs wait for this one to complete (JobSet `dependsOn`): its pods
    /// are no slice or JAX process of theirs, and get no multislice or JAX env.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub runs_first: bool,
    /// `spec.network.subdomain`, when set; otherwise the subdomain is the JobSet name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    /// Parallelism of the replicated job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_job: Option<u32>,
    /// Only on an opted-in plain Indexed Job (SPEC §4.6), never on a JobSet's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobFacts>,
}

/// A plain Indexed Job's JAX run: one process per completion index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFacts {
    pub completions: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupFacts {
    pub name: String,
    /// Sum of replicas over the group.
    pub replicas: u32,
    /// Replicas of the group's earlier replicated jobs: job-group-index = offset + job index.
    pub offset: u32,
}

/// A total over a group and this replicated job's start within it: slices (SLICE_ID is
/// offset plus job index) or JAX processes (process id is offset plus job index × pods per
/// job plus completion index).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetFacts {
    pub total: u32,
    pub offset: u32,
}

/// A JAX group (SPEC §4.4): pods are numbered like [`OffsetFacts`], then the coordinator pod and
/// pod 0 of the group swap ids, so that the coordinator is process 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JaxFacts {
    pub total: u32,
    pub offset: u32,
    /// The pod that runs process 0, `<rjob>-<jobIndex>-<podIndex>`; absent when no member of
    /// the group has pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<String>,
    /// The id the numbering gives the coordinator pod before the swap (0 when it is pod 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub coordinator_id: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Facts {
    pub fn is_empty(&self) -> bool {
        *self == Facts::default()
    }

    pub fn to_annotation(&self) -> String {
        // Serializing plain structs of strings and integers cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_annotation(text: &str, path: &str) -> Result<Facts, InputError> {
        serde_json::from_str(text).map_err(|e| {
            InputError::invalid(
                format!("{path}[{:?}]", keys::FACTS),
                format!("is not what this policy writes ({e}); remove it and let the policy stamp the JobSet"),
            )
        })
    }

    /// The facts among `annotations` (at `path`), if any, in a version this release reads.
    pub fn read(annotations: Option<&Object>, path: &str) -> Result<Option<Facts>, InputError> {
        let Some(text) = map_str(annotations, keys::FACTS) else {
            return Ok(None);
        };
        if let Some(version) = map_str(annotations, keys::FACTS_VERSION) {
            check_version(version, path)?;
        }
        Facts::from_annotation(text, path).map(Some)
    }
}

/// A facts version this release reads, or one message that names the version it needs.
fn check_version(version: &str, path: &str) -> Result<(), InputError> {
    let path = format!("{path}[{:?}]", keys::FACTS_VERSION);
    match version.parse::<u32>() {
        Ok(VERSION) => Ok(()),
        Ok(newer) if newer > VERSION => Err(InputError::invalid(
            path,
            format!("facts version {newer}, written by a newer release of this policy; this release reads version {VERSION}: upgrade the policy (or roll forward) to the release that stamped these facts"),
        )),
        _ => Err(InputError::invalid(
            path,
            format!("is {version:?}, not a facts version; this release reads version {VERSION}: remove it and let the policy stamp the JobSet"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[test]
    fn round_trips_and_skips_what_is_absent() {
        let f = Facts {
            slice: Some(OffsetFacts {
                total: 4,
                offset: 2,
            }),
            slice_coordinator: Some("workers-0-0".into()),
            pods_per_job: Some(4),
            ..Facts::default()
        };
        let text = f.to_annotation();
        assert_eq!(
            text,
            r#"{"slice":{"total":4,"offset":2},"coordinator":"workers-0-0","podsPerJob":4}"#
        );
        assert_eq!(Facts::from_annotation(&text, "p"), Ok(f));
        assert_eq!(Facts::default().to_annotation(), "{}");
        assert_eq!(Facts::read(None, "a"), Ok(None));
    }

    #[test]
    fn ignores_fields_a_newer_release_added() {
        let newer = r#"{"slice":{"total":4,"offset":2,"stride":1},"podsPerJob":4,"hint":[1]}"#;
        let f = Facts::from_annotation(newer, "p");
        assert_eq!(
            f.map(|f| f.slice),
            Ok(Some(OffsetFacts {
                total: 4,
                offset: 2
            }))
        );
    }

    const NEWER: &str = "a[\"multislice.kubewarden.io/facts-version\"]: facts version 2, written by a newer release of this policy; this release reads version 1: upgrade the policy (or roll forward) to the release that stamped these facts";
    const NOT_A_VERSION: &str = "a[\"multislice.kubewarden.io/facts-version\"]: is \"v1\", not a facts version; this release reads version 1: remove it and let the policy stamp the JobSet";

    #[rstest]
    #[case::absent_is_version_1(None, Ok(Some(Facts::default())))]
    #[case::version_1(Some("1"), Ok(Some(Facts::default())))]
    #[case::a_newer_one_is_named(Some("2"), Err(NEWER))]
    #[case::not_a_version(Some("v1"), Err(NOT_A_VERSION))]
    fn reads_the_versions_it_knows_and_names_the_one_it_needs(
        #[case] version: Option<&str>,
        #[case] want: Result<Option<Facts>, &str>,
    ) {
        let mut m = Object::new();
        m.insert(keys::FACTS.into(), "{}".into());
        if let Some(v) = version {
            m.insert(keys::FACTS_VERSION.into(), v.into());
        }
        let got = Facts::read(Some(&m), "a").map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_string));
    }

    #[test]
    fn rejects_what_the_policy_did_not_write() {
        let e = Facts::from_annotation(r#"{"slice":3}"#, "metadata.annotations").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("metadata.annotations[\"multislice.kubewarden.io/facts\"]: is not what this policy writes"));
    }
}
