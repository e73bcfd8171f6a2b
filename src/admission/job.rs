//! Plain `batch/v1` Jobs (docs/spec.md §4.6): the cheap opt-in check, Job CREATE and Job UPDATE.
use super::contradictions;
use super::heads::LabelsHead;
use super::read::Read;
use super::references;
use super::verdict::{rejection, Verdict};
use crate::arena;
use crate::error::InputError;
use crate::job_plan;
use crate::json_text::Cursor;
use crate::mutate;
use crate::rules;
use crate::settings::{JaxEnv, Settings};
use crate::views::job_view::JobView;
use crate::violation::Violation;
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;

/// Just enough of a Job to see whether it opted into the JAX env (docs/spec.md §4.6) and is not a
/// JobSet's child: every other Job passes without being parsed.
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
pub(super) fn is_opted_in(text: &str) -> bool {
    read_opt_in(text, Upto::TheEnd)
}

/// [`is_opted_in`], read no further than the first `metadata`: exact unless the Job's root
/// object repeats a key, which the lean read of a Job CREATE notes, and
/// [`admit_create`] then reads the opt-in whole.
pub(super) fn opts_in_at_first_metadata(text: &str) -> bool {
    read_opt_in(text, Upto::FirstMetadata)
}

/// How far [`read_opt_in`] reads once the first `metadata` opts in.
#[derive(Clone, Copy, PartialEq)]
enum Upto {
    FirstMetadata,
    TheEnd,
}

/// The opt-in read member by member, as serde reads [`JobHead`], stopping at the first
/// `metadata` when it does not opt in (the API server writes `metadata` before `spec`, so a
/// Job that did not opt in passes without its spec being read). A second `metadata` is serde's
/// "duplicate field": not opted in either. A text that is not an object is serde's to read.
fn read_opt_in(text: &str, upto: Upto) -> bool {
    let serde = || {
        serde_json::from_str::<JobHead>(text)
            .is_ok_and(|head| head.metadata.is_some_and(|m| m.opts_in()))
    };
    let mut cursor = Cursor::new(text);
    if cursor.next_byte() != Some(b'{') {
        return serde();
    }
    let mut opted_in = None;
    let mut stopped = false;
    let read = cursor.object(|c, key| {
        if !key.is("metadata") {
            return c.skip().map(drop);
        }
        let head = c.parse::<Option<JobMetadataHead>>();
        let opts_in = opted_in.is_none() && head.flatten().is_some_and(|m| m.opts_in());
        opted_in = Some(opts_in);
        stopped = !opts_in || upto == Upto::FirstMetadata;
        (!stopped).then_some(())
    });
    match (read, stopped) {
        (None, false) => serde(),
        _ => opted_in == Some(true),
    }
}

impl JobMetadataHead<'_> {
    fn opts_in(self) -> bool {
        let opted_in = self
            .annotations
            .and_then(|a| a.jax_distributed)
            .is_some_and(|v| v == "true");
        let jobset_child = self.labels.is_some_and(|l| l.jobset_name.is_some());
        opted_in && !jobset_child
    }
}

/// Job CREATE of an opted-in plain Job (docs/spec.md §4.6): J1–J4 and N2, then the facts its pods
/// need. `jaxEnv: never` turns the JAX env off for Jobs too, and with it J1–J4; N2 and the
/// references that can never resolve are about the pods, whoever sets their env. The role
/// decides which half runs (docs/spec.md §5).
pub(super) fn admit_create(mut object: Read, settings: &Settings) -> Result<Verdict, InputError> {
    // Served on the first `metadata`; a root with a key twice may have another.
    if object.root_may_repeat_a_key && !read_opt_in(object.text, Upto::TheEnd) {
        return Ok(Verdict::accept());
    }
    let (annotation, warnings) = {
        let view = JobView::parse(&object.tree, &settings.tpu_resource)?;
        let (violations, references) = judge(&view, settings);
        if !violations.is_empty() {
            return Ok(rejection(&violations, references));
        }
        if settings.jax_env == JaxEnv::Never {
            return Ok(Verdict::with(None, references));
        }
        let job = job_plan::job_facts(&view);
        let mut warnings = if settings.role.judges() {
            contradictions::job_warnings(&view, &job, settings)?
        } else {
            Vec::new()
        };
        warnings.extend(references);
        if !settings.role.mutates() {
            return Ok(Verdict::with(None, warnings));
        }
        let facts = job_plan::facts(&view, job);
        // What the stamp writes into the tree is made where the tree's blocks are.
        let change = arena::building_tree(|| mutate::stamp_job::change(&view, &facts));
        (change, warnings)
    };
    let Some(annotation) = annotation else {
        return Ok(Verdict::with(None, warnings));
    };
    let written = arena::building_tree(|| mutate::stamp_job::apply(&mut object.tree, annotation));
    object.mutated(&written, warnings)
}

/// The verdict half of Job CREATE: the violations, and the references that can never resolve.
/// Nothing in the role `mutate`.
fn judge(view: &JobView, settings: &Settings) -> (Vec<Violation>, Vec<String>) {
    if !settings.role.judges() {
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
    if settings.jax_env == JaxEnv::Never || !settings.role.judges() {
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
    match rules::elastic::stale_job_resize(&stamped, &old, &new) {
        Some(problem) => Verdict::reject(problem, 400),
        None => Verdict::accept(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Job CREATE whose root has `metadata` twice is served as serde reads the whole Job:
    /// not at all, even when the first `metadata`, which the cheap read stops at, opts in.
    #[test]
    fn a_job_create_with_metadata_twice_is_not_served_and_with_it_once_is() {
        let metadata = r#""metadata": {"name": "jax-train", "annotations": {"multislice.kubewarden.io/jax-distributed": "true"}}"#;
        let spec = r#""spec": {"completionMode": "Indexed", "completions": 4, "parallelism": 4,
            "template": {"spec": {"subdomain": "jax-train", "restartPolicy": "Never",
            "containers": [{"name": "jax", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}"#;
        let payload_with = |job: String, settings: &str| {
            format!(
                r#"{{"request": {{"kind": {{"group": "batch", "kind": "Job"}},
                    "operation": "CREATE", "namespace": "ml", "object": {job}}}, "settings": {settings}}}"#
            )
        };
        let payload = |job: String| payload_with(job, "{}");
        let once = super::super::evaluate(payload(format!("{{{metadata}, {spec}}}")).as_bytes());
        assert!(once.accepted && once.mutated_json.is_some(), "{once:?}");
        for twice in [
            format!(r#"{{{metadata}, {spec}, "metadata": {{"name": "jax-train"}}}}"#),
            format!(r#"{{{metadata}, "metadata": {{"name": "jax-train"}}, {spec}}}"#),
        ] {
            let verdict = super::super::evaluate(payload(twice.clone()).as_bytes());
            assert_eq!(verdict, Verdict::accept());
            // Not served, so not refused for settings the policy never reads for it.
            let bad_settings = payload_with(twice, r#"{"role": "mutating"}"#);
            assert_eq!(
                super::super::evaluate(bad_settings.as_bytes()),
                Verdict::accept()
            );
        }
        let bad_settings =
            payload_with(format!("{{{metadata}, {spec}}}"), r#"{"role": "mutating"}"#);
        let refused = super::super::evaluate(bad_settings.as_bytes());
        assert_eq!(refused.code, Some(500), "{refused:?}");
    }

    /// The opt-in read member by member says what serde's whole read of [`JobHead`] says, on
    /// every shape of metadata, and stops early only where that cannot change the answer.
    #[test]
    fn the_opt_in_read_from_metadata_is_serdes_read_of_the_whole_job() {
        let yes = r#""annotations": {"multislice.kubewarden.io/jax-distributed": "true"}"#;
        let no = r#""annotations": {"multislice.kubewarden.io/jax-distributed": "false"}"#;
        let child = r#""labels": {"jobset.sigs.k8s.io/jobset-name": "js"}"#;
        let spec = r#""spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}"#;
        let cases = [
            (
                format!(r#"{{"kind": "Job", "metadata": {{{yes}}}, {spec}}}"#),
                true,
            ),
            (format!(r#"{{{spec}, "metadata": {{{yes}}}}}"#), true),
            (format!(r#"{{"metad\u0061ta": {{{yes}}}, {spec}}}"#), true),
            (format!(r#"{{"metadata": {{{no}}}, {spec}}}"#), false),
            (
                format!(r#"{{"metadata": {{{yes}, {child}}}, {spec}}}"#),
                false,
            ),
            (format!(r#"{{"metadata": null, {spec}}}"#), false),
            (format!(r#"{{{spec}}}"#), false),
            ("{}".to_string(), false),
            // A second `metadata`, either way round: serde's "duplicate field".
            (
                format!(r#"{{"metadata": {{{yes}}}, "metadata": {{{no}}}}}"#),
                false,
            ),
            (
                format!(r#"{{"metadata": {{{no}}}, "metadata": {{{yes}}}}}"#),
                false,
            ),
            (
                format!(r#"{{"metadata": {{{yes}}}, {spec}, "metadata": {{}}}}"#),
                false,
            ),
            // Metadata serde cannot read as the head: not opted in.
            (format!(r#"{{"metadata": {{"labels": 1, {yes}}}}}"#), false),
            (format!(r#"{{"metadata": {{{yes}, {yes}}}}}"#), false),
            (r#"{"metadata": 7}"#.to_string(), false),
            // A sequence is a struct to serde, in order of its fields: labels, annotations.
            (
                r#"{"metadata": [null, {"multislice.kubewarden.io/jax-distributed": "true"}]}"#
                    .to_string(),
                true,
            ),
            // Not an object: serde reads it, in order of the head's fields.
            (format!(r#"[{{{yes}}}]"#), true),
            ("7".to_string(), false),
        ];
        for (text, expected) in cases {
            let serde = serde_json::from_str::<JobHead>(&text)
                .is_ok_and(|head| head.metadata.is_some_and(|m| m.opts_in()));
            assert_eq!(serde, expected, "serde, {text}");
            assert_eq!(is_opted_in(&text), expected, "{text}");
            // Read to the first `metadata` only: the same, but where a second one follows a
            // first that opts in, which a Job CREATE learns from the lean read.
            let first_of_two_opts_in = text.starts_with(&format!(r#"{{"metadata": {{{yes}}}"#))
                && text.matches(r#""metadata""#).count() == 2;
            assert_eq!(
                opts_in_at_first_metadata(&text),
                expected || first_of_two_opts_in,
                "{text}"
            );
        }
    }
}
