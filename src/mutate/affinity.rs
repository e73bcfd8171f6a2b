//! JobSet CREATE: the narrowing of SPEC §4.7 written into each replicated job's pod template, as a
//! required node affinity and the policy's mark. The author's own terms are kept whole: each is
//! repeated once per term of the mark, with its expressions appended, so that Kueue, which drops an
//! affinity that a term leaves empty after its label filter, keeps it.
use super::in_pod_template;
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

/// Writes the narrowings into the JobSet in place.
pub fn apply(object: &mut Value, changes: Vec<Narrowing>) {
    const REQUIRED: [&str; 4] = [
        "spec",
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
    ];
    for n in changes {
        if let Some(annotations) = in_pod_template(object, n.index, &["metadata", "annotations"]) {
            annotations.insert(
                keys::AFFINITY_MARK.to_string(),
                Value::String(n.mark.to_annotation()),
            );
        }
        if let Some(required) = in_pod_template(object, n.index, &REQUIRED) {
            required.insert("nodeSelectorTerms".into(), Value::Array(n.terms));
        }
    }
}
