//! JobSets (SPEC §5, §6): JobSet CREATE is judged and stamped; JobSet UPDATE is judged on what it
//! changed.
use super::contradictions;
use super::queue_lookup::{self, ClusterReader};
use super::references;
use super::verdict::{rejection, Verdict};
use crate::error::InputError;
use crate::groups;
use crate::jobset_plan::JobSetPlan;
use crate::multikueue;
use crate::mutate;
use crate::narrowing;
use crate::queue_fit;
use crate::rules::{self, Findings, Moment};
use crate::settings::{QueueCheck, Settings};
use crate::views::jobset_view::JobSetView;
use crate::violation::Violation;
use serde_json::Value;
use std::collections::HashSet;

/// JobSet CREATE: the rules, then the facts each replicated job's pods need, stamped on its pod
/// template, with the warnings about templates that contradict them; and a TPU replicated job that
/// leaves its slice shape to Kueue narrowed to the shapes that fit (SPEC §4.7), with a warning that
/// says so. The role decides which half runs (SPEC §5): `mutate` stamps and judges nothing,
/// `validate` judges and stamps nothing, `both` does both.
pub(super) fn admit_create(
    mut object: Value,
    settings: &Settings,
    cluster: &Cluster,
) -> Result<Verdict, InputError> {
    let role = settings.role;
    let (stamps, narrowings, warnings) = {
        let view = JobSetView::parse(&object, &settings.tpu_resource)?;
        let plan = JobSetPlan::new(&view, settings);
        let copy = multikueue::is_copy_created(&view, cluster.requester, settings);
        let findings = if role.validates() {
            let mut findings = rules::judge(&plan, Moment::Create)?;
            check_queue(&plan, cluster, &mut findings);
            if copy {
                let violations = std::mem::take(&mut findings.violations);
                findings
                    .warnings
                    .extend(violations.iter().map(multikueue::copy_warning));
            }
            findings
        } else {
            rules::check_input(&plan)?;
            Findings::default()
        };
        // Every parsed JobSet, judged or not: an empty value is as empty on a CPU pod.
        let references = if role.validates() {
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
        let facts = groups::facts(&plan, &mut about_facts)?;
        // The judging half speaks, so that the pair gives each warning once.
        if role.validates() {
            warnings.extend(about_facts);
            warnings.extend(contradictions::warnings(&plan, &facts)?);
        }
        warnings.extend(references);
        if !role.mutates() {
            return Ok(Verdict::with(None, warnings));
        }
        let mut narrowings =
            mutate::affinity::changes(&view, narrowing::marks(plan.shapes(), settings));
        let mut stamps = mutate::stamp_jobset::changes(&view, &facts);
        if copy {
            narrowings.retain(|n| !multikueue::narrowed_in_the_manager(&view, n.index));
            stamps = multikueue::keep_stamped_facts(&view, stamps, &mut warnings);
        }
        warnings.extend(
            narrowings
                .iter()
                .map(|n| narrowing::warning(&view.replicated_jobs[n.index], &n.mark)),
        );
        (stamps, narrowings, warnings)
    };
    if stamps.is_empty() && narrowings.is_empty() {
        return Ok(Verdict::with(None, warnings));
    }
    mutate::stamp_jobset::apply(&mut object, stamps);
    mutate::affinity::apply(&mut object, narrowings);
    Ok(Verdict::with(Some(object), warnings))
}

/// Where the request's JobSet lives, how to read the cluster's objects, and who asks.
pub(super) struct Cluster<'a> {
    pub namespace: &'a str,
    pub reader: &'a dyn ClusterReader,
    pub requester: &'a str,
}

/// The queue check (SPEC §8 `queueCheck`), where it applies: at CREATE of a TPU JobSet the policy
/// judges, that names a queue and waits in it. A running JobSet is never looked up.
fn check_queue(plan: &JobSetPlan, cluster: &Cluster, findings: &mut Findings) {
    let settings = plan.settings;
    let Some(queue) = plan.view.queue else { return };
    if settings.queue_check == QueueCheck::Off || !findings.waits_for_a_flavour {
        return;
    }
    let found = queue_lookup::look_up(
        cluster.reader,
        cluster.namespace,
        queue.name,
        &settings.tpu_resource,
    );
    let judged = match found {
        Ok(q) => queue_fit::judge(plan, &q),
        Err(why) => {
            findings.warnings.push(format!(
                "{}: queue {:?} was not checked: {why}",
                queue.path(),
                format!("{}/{}", cluster.namespace, queue.name)
            ));
            return;
        }
    };
    findings.warnings.extend(judged.warnings);
    match settings.queue_check {
        QueueCheck::Refuse => findings.violations.extend(judged.violations),
        _ => findings
            .warnings
            .extend(judged.violations.iter().map(ToString::to_string)),
    }
}

fn findings_of(
    view: &Result<JobSetView, InputError>,
    settings: &Settings,
) -> Result<Findings, InputError> {
    let view = view.as_ref().map_err(Clone::clone)?;
    rules::judge(&JobSetPlan::new(view, settings), Moment::Update)
}

/// JobSet UPDATE never mutates (`replicatedJobs` are immutable), and judges only what the
/// update changed: a violation the old object already had is not the update's fault, and
/// blocking an update the user cannot fix helps nobody. Unsuspending is a change: T3 and T4
/// were deferred on the suspended old object, so their violations count as new.
pub(super) fn admit_update(object: &Value, old: Option<&Value>, settings: &Settings) -> Verdict {
    let parse = |o| JobSetView::parse(o, &settings.tpu_resource);
    let (old_view, new_view) = (old.map(parse), parse(object));
    let before = old_view.as_ref().map(|v| findings_of(v, settings));
    let after = match findings_of(&new_view, settings) {
        Ok(f) => f,
        Err(e) if matches!(&before, Some(Err(old_e)) if *old_e == e) => return Verdict::accept(),
        Err(e) => return e.into(),
    };
    let old_findings = before.and_then(Result::ok).unwrap_or_default();
    // Looked up, not scanned: a JobSet of many replicated jobs may have as many findings.
    let old_violations: HashSet<&Violation> = old_findings.violations.iter().collect();
    let old_warnings: HashSet<&String> = old_findings.warnings.iter().collect();
    let mut new_violations: Vec<Violation> = after
        .violations
        .into_iter()
        .filter(|v| !old_violations.contains(v))
        .collect();
    let new_warnings: Vec<String> = after
        .warnings
        .into_iter()
        .filter(|w| !old_warnings.contains(w))
        .collect();
    // ElasticJobSet resizes that would leave stamped values stale (SPEC §5, E1). Objects that
    // cannot be read have no sizes to compare; their problem is reported by the findings.
    if let (Some(Ok(old)), Ok(new)) = (&old_view, &new_view) {
        let old = JobSetPlan::new(old, settings);
        new_violations.extend(rules::elastic::stale_resizes(&old, new));
    }
    if let Some(Ok(old)) = &old_view {
        if multikueue::is_copy(old) {
            let mut warnings = new_warnings;
            warnings.extend(new_violations.iter().map(multikueue::copy_warning));
            return Verdict::with(None, warnings);
        }
    }
    if new_violations.is_empty() {
        Verdict::with(None, new_warnings)
    } else {
        rejection(&new_violations, new_warnings)
    }
}
