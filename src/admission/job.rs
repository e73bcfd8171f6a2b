//! Plain `batch/v1` Jobs (SPEC §4.6): the cheap opt-in check, Job CREATE and Job UPDATE.
use super::contradictions;
use super::heads::LabelsHead;
use super::references;
use super::verdict::{rejection, Verdict};
use crate::error::InputError;
use crate::facts::of_job;
use crate::mutate;
use crate::rules;
use crate::settings::{JaxEnv, Settings};
use crate::views::job_view::JobView;
use crate::violation::Violation;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

/// Just enough of a Job to see whether it opted into the JAX env (SPEC §4.6) and is not a JobSet's
/// child: every other Job passes without being parsed.
#[derive(Deserialize)]
struct JobHead<'a> {
    #[serde(borrow, default)]
    metadata: Option<JobMetadataHead<'a>>,
}

#[derive(Deserialize)]
struct JobMetadataHead<'a> {
    #[serde(default)]
    labels: Option<LabelsHead>,
    #[serde(borrow, default)]
    annotations: Option<OptInHead<'a>>,
}

#[derive(Deserialize)]
struct OptInHead<'a> {
    #[serde(rename = "multislice.kubewarden.io/jax-distributed", borrow, default)]
    jax_distributed: Option<Cow<'a, str>>,
}

/// An opted-in plain Job: the annotation says `"true"` and no JobSet owns it (a JobSet's
/// child Jobs are served through their JobSet). A Job whose metadata cannot even be read this
/// far is not opted in: it has nothing the policy could act on.
pub(super) fn is_opted_in(raw: &RawValue) -> bool {
    let head = serde_json::from_str::<JobHead>(raw.get()).ok();
    let Some(metadata) = head.and_then(|h| h.metadata) else {
        return false;
    };
    let opted_in = metadata
        .annotations
        .and_then(|a| a.jax_distributed)
        .is_some_and(|v| v == "true");
    let jobset_child = metadata.labels.is_some_and(|l| l.jobset_name.is_some());
    opted_in && !jobset_child
}

/// Job CREATE of an opted-in plain Job (SPEC §4.6): J1–J4 and N2, then the facts its pods need.
/// `jaxEnv: never` turns the JAX env off for Jobs too, and with it J1–J4; N2 and the references
/// that can never resolve are about the pods, whoever sets their env. The role decides which half
/// runs (SPEC §5).
pub(super) fn admit_create(mut object: Value, settings: &Settings) -> Result<Verdict, InputError> {
    let view = JobView::parse(&object, &settings.tpu_resource)?;
    let (violations, references) = judge(&view, settings);
    if !violations.is_empty() {
        return Ok(rejection(&violations, references));
    }
    if settings.jax_env == JaxEnv::Never {
        return Ok(Verdict::with(None, references));
    }
    let job = of_job::job_facts(&view);
    let mut warnings = if settings.role.validates() {
        contradictions::job_warnings(&view, &job, settings)?
    } else {
        Vec::new()
    };
    warnings.extend(references);
    let stamp = settings.role.mutates().then(|| of_job::facts(&view, job));
    let Some(annotation) = stamp.and_then(|facts| mutate::stamp_job::change(&view, &facts)) else {
        return Ok(Verdict::with(None, warnings));
    };
    mutate::stamp_job::apply(&mut object, annotation);
    Ok(Verdict::with(Some(object), warnings))
}

/// The verdict half of Job CREATE: the violations, and the references that can never resolve.
/// Nothing in the role `mutate`.
fn judge(view: &JobView, settings: &Settings) -> (Vec<Violation>, Vec<String>) {
    if !settings.role.validates() {
        return (Vec::new(), Vec::new());
    }
    let violations = if settings.jax_env == JaxEnv::Never {
        rules::indexed_job::n2_pods_resolve_cluster_dns(view)
            .into_iter()
            .collect()
    } else {
        rules::indexed_job::check(view)
    };
    (violations, references::job_warnings(view))
}

/// Job UPDATE of a plain Job never mutates: the stamp is written once, at CREATE. An
/// elastic Indexed Job may change `completions` together with `parallelism`; when Job CREATE
/// stamped the old Job's template, its pods' JAX env counts the old size, and such an UPDATE
/// is rejected. A Job that was never stamped (created without the annotation, under
/// `jaxEnv: never`, or before the policy served Jobs) has no env to go stale.
pub(super) fn admit_update(object: &Value, old: Option<&Value>, settings: &Settings) -> Verdict {
    if settings.jax_env == JaxEnv::Never || !settings.role.validates() {
        return Verdict::accept();
    }
    // An old object that cannot be read has nothing to compare.
    let Some(old) = old.and_then(|o| JobView::parse(o, &settings.tpu_resource).ok()) else {
        return Verdict::accept();
    };
    let Some(stamped) = old.stamped() else {
        return Verdict::accept();
    };
    let new = match JobView::parse(object, &settings.tpu_resource) {
        Ok(v) => v,
        Err(e) => return e.into(),
    };
    rules::elastic::stale_job_resize(&stamped, &old, &new)
        .map_or_else(Verdict::accept, |v| rejection(&[v], Vec::new()))
}
