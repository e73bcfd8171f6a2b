//! JobSets (SPEC §5, §6): JobSet CREATE is judged and stamped; JobSet UPDATE is judged on what it
//! changed.
use super::contradictions;
use super::queue_lookup::{self, Cluster};
use super::references;
use super::verdict::{rejection, Verdict};
use crate::error::InputError;
use crate::facts::of_jobset;
use crate::groups::JobSetPlan;
use crate::multikueue;
use crate::mutate::jobset_patch::JobSetPatch;
use crate::rules::{self, Findings, Moment};
use crate::settings::Settings;
use crate::views::jobset_view::JobSetView;
use serde_json::Value;
use std::collections::HashSet;
use std::hash::Hash;

/// JobSet CREATE, in the steps of SPEC §5: validate (roles `validate` and `both`): the rules, the
/// queue of a JobSet that waits in one for a flavour, and the references; then mutate (`mutate`
/// and `both`). The facts each replicated job's pods need are computed in every role, warned
/// about where the templates contradict them, and stamped on the pod templates, with a TPU
/// replicated job that leaves its slice shape to Kueue narrowed to the shapes that fit (§4.7).
pub(super) fn admit_create(
    object: Value,
    settings: &Settings,
    cluster: &Cluster,
) -> Result<Verdict, InputError> {
    let view = JobSetView::parse(&object, &settings.tpu_resource)?;
    let plan = JobSetPlan::new(&view, settings);
    let copy = multikueue::is_copy_created(&view, cluster.requester, settings);
    let mut findings = rules::judge_create(&plan)?;
    if findings.waits_for_a_flavour {
        let queue = queue_lookup::check_queue(&plan, cluster);
        findings.violations.extend(queue.violations);
        findings.warnings.extend(queue.warnings);
    }
    if copy {
        let violations = std::mem::take(&mut findings.violations);
        findings
            .warnings
            .extend(violations.iter().map(multikueue::copy_warning));
    }
    // Every parsed JobSet, judged or not: an empty value is as empty on a CPU pod.
    let references = if settings.role.validates() {
        references::jobset_warnings(&view)
    } else {
        Vec::new()
    };
    let mut warnings = findings.warnings;
    if !findings.violations.is_empty() {
        warnings.extend(references);
        return Ok(rejection(&findings.violations, warnings));
    }
    let mut about_facts = Vec::new();
    let facts = of_jobset::facts(&plan, &mut about_facts)?;
    // The judging half speaks, so that the pair gives each warning once.
    if settings.role.validates() {
        warnings.extend(about_facts);
        warnings.extend(contradictions::warnings(&plan, &facts)?);
    }
    warnings.extend(references);
    if !settings.role.mutates() {
        return Ok(Verdict::with(None, warnings));
    }
    let patch = JobSetPatch::new(&plan, &facts, copy, &mut warnings);
    Ok(Verdict::with(patch.applied_to(object), warnings))
}

/// JobSet UPDATE (SPEC §5) judges only what the update changed: a violation the old object
/// already had is not the update's fault, and blocking an update the user cannot fix helps nobody.
pub(super) fn admit_update(object: &Value, old: Option<&Value>, settings: &Settings) -> Verdict {
    let parse = |o| JobSetView::parse(o, &settings.tpu_resource);
    let findings_of = |view: &Result<JobSetView, InputError>| -> Result<Findings, InputError> {
        let view = view.as_ref().map_err(Clone::clone)?;
        rules::judge(&JobSetPlan::new(view, settings), Moment::Update)
    };
    let (old_view, new_view) = (old.map(parse), parse(object));
    let before = old_view.as_ref().map(findings_of);
    let after = match findings_of(&new_view) {
        Ok(f) => f,
        Err(e) if matches!(&before, Some(Err(old_e)) if *old_e == e) => return Verdict::accept(),
        Err(e) => return e.into(),
    };
    let old_findings = before.and_then(Result::ok).unwrap_or_default();
    let mut new_violations = not_in(after.violations, &old_findings.violations);
    let mut new_warnings = not_in(after.warnings, &old_findings.warnings);
    // Objects that cannot be read have no sizes to compare; the findings report their problem.
    if let (Some(Ok(old)), Ok(new)) = (&old_view, &new_view) {
        let old = JobSetPlan::new(old, settings);
        new_violations.extend(rules::elastic::stale_resizes(&old, new));
    }
    if matches!(&old_view, Some(Ok(old)) if multikueue::is_copy_updated(old)) {
        new_warnings.extend(new_violations.iter().map(multikueue::copy_warning));
        return Verdict::with(None, new_warnings);
    }
    if new_violations.is_empty() {
        Verdict::with(None, new_warnings)
    } else {
        rejection(&new_violations, new_warnings)
    }
}

/// The items of `after` that `before` does not hold; looked up, not scanned: a JobSet of many
/// replicated jobs may have as many findings.
fn not_in<T: Eq + Hash>(after: Vec<T>, before: &[T]) -> Vec<T> {
    let before: HashSet<&T> = before.iter().collect();
    after.into_iter().filter(|x| !before.contains(x)).collect()
}
