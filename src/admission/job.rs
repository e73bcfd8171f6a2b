//! Plain `batch/v1` Jobs (SPEC §4.6): the cheap opt-in check, Job CREATE and Job UPDATE.
use super::heads::ObjectHead;
use super::verdict::{rejection, Verdict};
use crate::error::InputError;
use crate::job_facts;
use crate::mutate::job_patch::JobPatch;
use crate::rules;
use crate::settings::{JaxEnv, Settings};
use crate::views::job_view::JobView;
use crate::violation::Findings;
use crate::warnings::{dead_references, template_env};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

/// The opt-in into the JAX env (SPEC §4.6): every other Job passes without being parsed.
#[derive(Deserialize)]
struct OptInHead<'a> {
    #[serde(rename = "multislice.kubewarden.io/jax-distributed", borrow)]
    jax_distributed: Option<Cow<'a, str>>,
}

/// An opted-in plain Job: the annotation says `"true"` and no JobSet owns it (a JobSet's
/// child Jobs are served through their JobSet). A Job whose metadata cannot even be read this
/// far is not opted in: it has nothing the policy could act on.
pub(super) fn is_opted_in(raw: &RawValue) -> bool {
    let head = serde_json::from_str::<ObjectHead<OptInHead>>(raw.get()).ok();
    head.and_then(|h| h.metadata).is_some_and(|m| {
        let jobset_child = m.labels.is_some_and(|l| l.jobset_name.is_some());
        let opted_in = m.annotations.and_then(|a| a.jax_distributed);
        opted_in.is_some_and(|v| v == "true") && !jobset_child
    })
}

/// Job CREATE of an opted-in plain Job (SPEC §4.6), in the steps of SPEC §5: validate (J1–J4 and
/// N2) and refuse on a violation; then the facts its pods need, and what the judging half says of
/// them; then mutate: the facts stamped. Under `jaxEnv: never`, N2 and the references still hold:
/// they are about the pods, whoever sets their env.
pub(super) fn admit_create(object: Value, settings: &Settings) -> Result<Verdict, InputError> {
    let view = JobView::parse(&object, &settings.tpu_resource)?;
    // The references, which a response lists after what is said of the facts.
    let references = match settings.role.validates().then(|| validate(&view, settings)) {
        Some(j) if !j.violations.is_empty() => return Ok(rejection(&j.violations, j.warnings)),
        judged => judged.map(|j| j.warnings),
    };
    if settings.jax_env == JaxEnv::Never {
        return Ok(Verdict::with(None, references.unwrap_or_default()));
    }
    let job = job_facts::job_facts(&view);
    let warnings = match references {
        Some(references) => [
            template_env::job_warnings(&view, &job, settings)?,
            references,
        ]
        .concat(),
        None => Vec::new(),
    };
    let stamp = settings
        .role
        .mutates()
        .then(|| job_facts::facts(&view, job));
    let patch = stamp.map(|facts| JobPatch::new(&view, &facts));
    let patched = patch.and_then(|p| p.applied_to(object));
    Ok(Verdict::with(patched, warnings))
}

/// The validate half of Job CREATE: the violations, and the references that can never resolve.
fn validate(view: &JobView, settings: &Settings) -> Findings {
    let violations = if settings.jax_env == JaxEnv::Never {
        Vec::from_iter(rules::indexed_job::n2_pods_resolve_cluster_dns(view))
    } else {
        rules::indexed_job::check(view)
    };
    Findings {
        violations,
        warnings: dead_references::job_warnings(view),
    }
}

/// Job UPDATE of a plain Job never mutates, and rejects a resize of a Job whose stamped pods' JAX
/// env counts the old size (E2). A Job never stamped (without the annotation, under `jaxEnv:
/// never`, or before the policy served Jobs) has no env to go stale.
pub(super) fn admit_update(object: &Value, old: Option<&Value>, settings: &Settings) -> Verdict {
    // The route serves a Job UPDATE only to the roles that validate.
    if settings.jax_env == JaxEnv::Never {
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
