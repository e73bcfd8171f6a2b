//! JobSet CREATE's patch: each pod template stamped with its [`Facts`], a Kueue slice topology
//! given the slice size it lacks (SPEC §6, K2), and the narrowing of SPEC §4.7 written as a
//! required node affinity and the policy's mark. Each of the author's terms
//! is repeated once per term of the mark, with its expressions appended, so that Kueue, which
//! drops an affinity that a term leaves empty after its label filter, keeps it.
use super::{annotate, object_at};
use crate::affinity_mark::AffinityMark;
use crate::facts::Facts;
use crate::groups::JobSetPlan;
use crate::json::map_str;
use crate::keys;
use crate::multikueue;
use crate::narrowing;
use crate::paths::{TemplateAt, REQUIRED_TERMS};
use crate::tas;
use crate::views::jobset_view::{JobSetView, ReplicatedJob};
use serde_json::{Map, Value};

/// What a JobSet lacks: facts annotations, as (replicated job index, value), and narrowings.
pub struct JobSetPatch {
    stamps: Vec<(usize, String)>,
    slice_sizes: Vec<(usize, String)>,
    narrowings: Vec<Narrowing>,
}

/// One replicated job's narrowed affinity: its index, its required terms, and the mark.
struct Narrowing {
    index: usize,
    terms: Vec<Value>,
    mark: AffinityMark,
}

impl JobSetPatch {
    /// What the JobSet lacks of `facts` and of the narrowing of its plan, and the warnings that
    /// say what each narrowing adds. On a MultiKueue `copy`, what the manager stamped stays:
    /// the worker's Workload was admitted on it.
    pub fn new(plan: &JobSetPlan, facts: &[Facts], copy: bool) -> (JobSetPatch, Vec<String>) {
        let view = plan.view;
        let marks = narrowing::marks(&plan.shapes, plan.settings);
        let mut narrowings = narrowings(view, marks);
        let mut stamps = stamps(view, facts);
        let mut warnings = Vec::new();
        if copy {
            narrowings.retain(|n| !multikueue::narrowed_in_the_manager(view, n.index));
            (stamps, warnings) = multikueue::keep_stamped_facts(view, stamps);
        }
        let warning = |n: &Narrowing| narrowing::warning(&view.replicated_jobs[n.index], &n.mark);
        warnings.extend(narrowings.iter().map(warning));
        let slice_sizes = view
            .tpu_jobs()
            .filter_map(|(i, r)| {
                let size = tas::filled_size(r, &plan.tas[i], plan.settings)?;
                Some((i, size.to_string()))
            })
            .collect();
        let patch = JobSetPatch {
            stamps,
            slice_sizes,
            narrowings,
        };
        (patch, warnings)
    }

    /// The JobSet, patched in place (no copy of a JobSet that may be megabytes); `None` when it
    /// lacks nothing.
    pub fn applied_to(self, mut object: Value) -> Option<Value> {
        if self.stamps.is_empty() && self.slice_sizes.is_empty() && self.narrowings.is_empty() {
            return None;
        }
        for (i, value) in self.stamps {
            annotate(
                &mut object,
                TemplateAt::ReplicatedJob(i),
                keys::FACTS,
                value,
            );
        }
        for (i, size) in self.slice_sizes {
            let at = TemplateAt::ReplicatedJob(i);
            annotate(&mut object, at, keys::KUEUE_SLICE_SIZE, size);
        }
        let [affinity @ .., terms] = REQUIRED_TERMS;
        let required = [&["spec"][..], &affinity].concat();
        for n in self.narrowings {
            let at = TemplateAt::ReplicatedJob(n.index);
            annotate(&mut object, at, keys::AFFINITY_MARK, n.mark.to_annotation());
            if let Some(required) = object_at(&mut object, &at.keys(&required)) {
                required.insert(terms.into(), Value::Array(n.terms));
            }
        }
        Some(object)
    }
}

/// The facts annotations to write; empty when the JobSet already carries exactly them. A stale or
/// forged facts annotation on a JobSet that needs none is overwritten with `{}`, so no pod can
/// claim facts this admission did not compute.
fn stamps(view: &JobSetView, facts: &[Facts]) -> Vec<(usize, String)> {
    view.replicated_jobs
        .iter()
        .zip(facts)
        .filter_map(|(rjob, f)| {
            let current = map_str(rjob.template.annotations, keys::FACTS);
            let wanted = (!f.is_empty() || current.is_some()).then(|| f.to_annotation())?;
            (current != Some(wanted.as_str())).then_some((rjob.index, wanted))
        })
        .collect()
}

/// The narrowings to write; empty when every template already carries exactly them.
fn narrowings(view: &JobSetView, marks: Vec<Option<AffinityMark>>) -> Vec<Narrowing> {
    view.replicated_jobs
        .iter()
        .zip(marks)
        .filter_map(|(rjob, mark)| {
            let mark = mark?;
            let terms = narrowed_terms(rjob, &mark);
            let unchanged =
                rjob.mark.as_ref() == Some(&mark) && rjob.required_terms == terms.as_slice();
            (!unchanged).then_some(Narrowing {
                index: rjob.index,
                terms,
                mark,
            })
        })
        .collect()
}

/// The required terms of `rjob` narrowed to `mark`'s pairs.
fn narrowed_terms(rjob: &ReplicatedJob, mark: &AffinityMark) -> Vec<Value> {
    let pairs = mark.term_expressions();
    if rjob.own_terms.is_empty() {
        return pairs
            .into_iter()
            .map(|pair| {
                let mut term = Map::new();
                term.insert("matchExpressions".into(), Value::Array(pair));
                Value::Object(term)
            })
            .collect();
    }
    let mut out = Vec::with_capacity(rjob.own_terms.len().saturating_mul(pairs.len()));
    for own in &rjob.own_terms {
        for pair in &pairs {
            let mut term = own.term.clone();
            let mut expressions = own.expressions.to_vec();
            expressions.extend(pair.iter().cloned());
            term.insert("matchExpressions".into(), Value::Array(expressions));
            out.push(Value::Object(term));
        }
    }
    out
}
