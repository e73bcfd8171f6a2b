//! JobSet CREATE: the narrowing of docs/spec.md §4.7 written into each replicated job's pod template,
//! as a required node affinity and the policy's mark. The author's own terms are kept whole:
//! each is repeated once per pair, with the pair's two expressions appended, so that Kueue,
//! which drops an affinity that a term leaves empty after its label filter, keeps it.
use super::splice::Written;
use super::{object_at, path_to, pod_template_mut, pod_template_steps, replicated_jobs_mut};
use crate::affinity_mark::AffinityMark;
use crate::keys;
use crate::views::jobset_view::{JobSetView, ReplicatedJob};
use serde_json::{Map, Value};

/// One replicated job's narrowed affinity: its index, its required terms, and the mark.
#[derive(Debug, Clone, PartialEq)]
pub struct Narrowing {
    pub index: usize,
    pub terms: Vec<Value>,
    pub mark: AffinityMark,
}

/// The required terms of `rjob` narrowed to `mark`'s pairs.
fn narrowed_terms(rjob: &ReplicatedJob, mark: &AffinityMark) -> Vec<Value> {
    let pairs = mark.pair_expressions();
    if rjob.own_terms.is_empty() {
        return pairs
            .into_iter()
            .map(|pair| {
                let mut term = Map::new();
                term.insert("matchExpressions".into(), Value::Array(pair.to_vec()));
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

/// The narrowings to write; empty when every template already carries exactly them.
pub fn changes(view: &JobSetView, marks: Vec<Option<AffinityMark>>) -> Vec<Narrowing> {
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

/// Writes the narrowings into the JobSet in place; where it wrote.
pub fn apply(object: &mut Value, changes: Vec<Narrowing>) -> Written {
    let mut written = Written::new();
    // The view has checked every step to each template, and read what is below it where it
    // is; so these paths resolve.
    let Some(replicated_jobs) = replicated_jobs_mut(object) else {
        return written;
    };
    for n in changes {
        let Some(pod_template) = pod_template_mut(replicated_jobs, n.index) else {
            continue;
        };
        let template = pod_template_steps(n.index);
        let annotations_path = path_to(&template, &["metadata", "annotations"]);
        if let Some(annotations) = object_at(pod_template, &annotations_path[template.len()..]) {
            annotations.insert(
                keys::AFFINITY_MARK.to_string(),
                Value::String(n.mark.to_annotation()),
            );
            written.push(annotations_path);
        }
        let required = path_to(
            &template,
            &[
                "spec",
                "affinity",
                "nodeAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
            ],
        );
        if let Some(at) = object_at(pod_template, &required[template.len()..]) {
            at.insert("nodeSelectorTerms".into(), Value::Array(n.terms));
            written.push(required);
        }
    }
    written
}
