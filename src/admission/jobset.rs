//! JobSets (SPEC §5, §6): JobSet CREATE is judged and stamped; JobSet UPDATE is judged on what it
//! changed.
use super::queue_lookup::{self, Cluster};
use super::verdict::{rejection, Verdict};
use crate::error::InputError;
use crate::groups::JobSetPlan;
use crate::jobset_facts;
use crate::multikueue;
use crate::mutate::jobset_patch::JobSetPatch;
use crate::rules::{self, Moment};
use crate::settings::Settings;
use crate::views::jobset_view::JobSetView;
use crate::violation::Findings;
use crate::warnings::{dead_references, template_env};
use serde_json::Value;
use std::collections::HashSet;
use std::hash::Hash;

/// JobSet CREATE, in the steps of SPEC §5: validate (roles `validate` and `both`), and refuse on a
/// violation; then the facts each replicated job's pods need, computed in every role, and what the
/// judging half says of them; then mutate (`mutate` and `both`): the facts stamped on the pod
/// templates, and a TPU replicated job that leaves its slice shape to Kueue narrowed to the shapes
/// that fit (§4.7).
pub(super) fn admit_create(
    object: Value,
    settings: &Settings,
    cluster: &Cluster,
) -> Result<Verdict, InputError> {
    let view = JobSetView::parse(&object, &settings.tpu_resource)?;
    let plan = JobSetPlan::new(&view, settings)?;
    let copy = multikueue::is_copy_created(&view, cluster.requester, settings);
    let judged = settings
        .role
        .validates()
        .then(|| validate(&plan, cluster, copy));
    if let Some((findings, references)) = &judged {
        if !findings.violations.is_empty() {
            let warnings = [findings.warnings.as_slice(), references].concat();
            return Ok(rejection(&findings.violations, warnings));
        }
    }
    let (facts, about_facts) = jobset_facts::facts(&plan)?;
    // The judging half speaks, so that the pair gives each warning once; the references last.
    let mut warnings = match judged {
        Some((findings, references)) => {
            let template_env = template_env::warnings(&plan, &facts)?;
            [findings.warnings, about_facts, template_env, references].concat()
        }
        None => Vec::new(),
    };
    if !settings.role.mutates() {
        return Ok(Verdict::with(None, warnings));
    }
    let (patch, about_patch) = JobSetPatch::new(&plan, &facts, copy);
    warnings.extend(about_patch);
    Ok(Verdict::with(patch.applied_to(object), warnings))
}

/// What the validate half finds at CREATE: the rules, the queue of a JobSet that waits in one for
/// a flavour, a MultiKueue copy's violations said as warnings; and apart, the references that can
/// never resolve, which a response lists last.
fn validate(plan: &JobSetPlan, cluster: &Cluster, copy: bool) -> (Findings, Vec<String>) {
    let mut findings = rules::judge(plan, Moment::Create);
    if rules::waits_in_its_queue(plan) {
        findings.extend(queue_lookup::check_queue(plan, cluster));
    }
    if copy {
        findings = findings.as_warnings(multikueue::copy_warning);
    }
    // Every parsed JobSet, in scope or not: an empty value is as empty on a CPU pod.
    (findings, dead_references::jobset_warnings(plan.view))
}

/// JobSet UPDATE (SPEC §5) judges only what the update changed: a violation the old object
/// already had is not the update's fault, and blocking an update the user cannot fix helps nobody.
pub(super) fn admit_update(object: &Value, old: Option<&Value>, settings: &Settings) -> Verdict {
    let parse = |o| JobSetView::parse(o, &settings.tpu_resource);
    let findings_of = |view: &Result<JobSetView, InputError>| -> Result<Findings, InputError> {
        let view = view.as_ref().map_err(Clone::clone)?;
        let plan = JobSetPlan::new(view, settings)?;
        Ok(rules::judge(&plan, Moment::Update))
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
        if let Ok(old) = JobSetPlan::new(old, settings) {
            new_violations.extend(rules::elastic::stale_resizes(&old, new));
        }
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
