//! The node labels a pod spec pins to one value, read as the scheduler reads them, per template.
use crate::affinity_mark::AffinityMark;
use crate::error::InputError;
use crate::json::{self, Object};
use crate::keys;
use crate::paths::{SpecAt, TemplateAt, REQUIRED_TERMS};
use serde_json::Value;
use std::collections::BTreeSet;

/// A node label a pod template pins to one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin<'a> {
    pub key: &'a str,
    pub value: &'a str,
    pub source: PinSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinSource {
    NodeSelector,
    /// The `matchExpressions` index in the single required node selector term.
    Affinity(usize),
    /// GKE dynamic slicing: the pod template annotation `cloud.google.com/gke-tpu-slice-topology`.
    SliceTopologyAnnotation,
}

impl Pin<'_> {
    /// The selector entry in the pod template at `at`, for messages.
    pub fn path(&self, at: TemplateAt) -> String {
        match self.source {
            PinSource::NodeSelector => format!("{}[{:?}]", at.spec_field("nodeSelector"), self.key),
            PinSource::Affinity(i) => {
                let terms = SpecAt::Template(at).required_terms();
                format!("{terms}[0].matchExpressions[{i}]")
            }
            PinSource::SliceTopologyAnnotation => at.annotation(keys::SLICE_TOPOLOGY),
        }
    }
}

/// A required node-selector term as the pod template's author wrote it: a stored term, and how
/// many of its `matchExpressions` are theirs (the policy appends its pair after them, §4.7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OwnTerm<'a> {
    pub term: &'a Object,
    pub expressions: &'a [Value],
}

/// What a pod spec selects of its own: its pins, and its required node-selector terms.
#[derive(Debug)]
pub struct Selection<'a> {
    pub pins: Vec<Pin<'a>>,
    pub terms: &'a [Value],
    pub own_terms: Vec<OwnTerm<'a>>,
}

/// The labels a pod spec pins: `nodeSelector` entries, and the `In` expressions with exactly
/// one value of a required node affinity with exactly one term of its own. Several terms are
/// ORed, and several values allow several nodes, so neither pins a label. What the policy's
/// narrowing added (`mark`) is not the author's selection, and is left out.
pub fn selection<'a>(
    pod_spec: &'a Object,
    at: SpecAt,
    mark: Option<&AffinityMark>,
) -> Result<Selection<'a>, InputError> {
    let mut pins = Vec::new();
    let mut pinned_keys = BTreeSet::new();
    // The first pin of a key (a nodeSelector entry before any expression) wins in messages.
    let mut pin = |key: &'a str, value: &'a str, source| {
        if pinned_keys.insert(key) {
            pins.push(Pin { key, value, source });
        }
    };
    if let Some(selector) = json::opt_string_map(pod_spec, "nodeSelector", &at.path())? {
        for (key, value) in selector {
            pin(key, value.as_str().unwrap_or(""), PinSource::NodeSelector);
        }
    }
    let terms = required_terms(pod_spec, at)?;
    let terms_path = at.required_terms();
    let t_path = |i: usize| json::index(&terms_path, i);
    let mut stored = Vec::with_capacity(terms.len());
    for (i, term) in terms.iter().enumerate() {
        let path = t_path(i);
        let term = json::as_object(term, &path)?;
        let expressions =
            json::opt_array(term, "matchExpressions", &path)?.map_or(&[][..], Vec::as_slice);
        stored.push(OwnTerm { term, expressions });
    }
    let own_terms = mark.and_then(|m| strip_mark(&stored, m)).unwrap_or(stored);
    if let [own] = own_terms.as_slice() {
        for (i, expr) in own.expressions.iter().enumerate() {
            let e_path = format!("{}.matchExpressions[{i}]", t_path(0));
            let e = json::as_object(expr, &e_path)?;
            let key = json::opt_str(e, "key", &e_path)?.unwrap_or("");
            let operator = json::opt_str(e, "operator", &e_path)?.unwrap_or("");
            let values = json::opt_array(e, "values", &e_path)?.map_or(&[][..], Vec::as_slice);
            if let ("In", [value]) = (operator, values) {
                let value = value.as_str().ok_or_else(|| {
                    json::wrong(&format!("{e_path}.values[0]"), "a string", value)
                })?;
                pin(key, value, PinSource::Affinity(i));
            }
        }
    }
    Ok(Selection {
        pins,
        terms,
        own_terms,
    })
}

/// The required node-selector terms ([`REQUIRED_TERMS`]), none where a step is missing.
fn required_terms(pod_spec: &Object, at: SpecAt) -> Result<&[Value], InputError> {
    let [objects @ .., terms] = REQUIRED_TERMS;
    let (mut object, mut path) = (pod_spec, at.path());
    for key in objects {
        let Some(inner) = json::opt_object(object, key, &path)? else {
            return Ok(&[]);
        };
        (object, path) = (inner, json::join(&path, key));
    }
    Ok(json::opt_array(object, terms, &path)?.map_or(&[][..], Vec::as_slice))
}

/// The author's terms, when the stored ones are exactly what the policy makes of them with
/// `mark`: each own term repeated once per term of the mark, in order, with its expressions
/// appended. `None` when they are not (the template was edited since): then every stored term
/// counts as the author's. Terms made from no own term hold the pair's expressions alone.
fn strip_mark<'a>(stored: &[OwnTerm<'a>], mark: &AffinityMark) -> Option<Vec<OwnTerm<'a>>> {
    let added = mark.term_expressions();
    if added.is_empty() || stored.is_empty() || !stored.len().is_multiple_of(added.len()) {
        return None;
    }
    let mut own = Vec::new();
    for chunk in stored.chunks(added.len()) {
        let first = chunk[0];
        let keep = first.expressions.len().checked_sub(added[0].len())?;
        let prefix = &first.expressions[..keep];
        for (term, pair) in chunk.iter().zip(&added) {
            let (theirs, ours) = term
                .expressions
                .split_at(term.expressions.len().checked_sub(pair.len())?);
            let same_rest = term.term.len() == first.term.len()
                && term
                    .term
                    .iter()
                    .all(|(k, v)| k == "matchExpressions" || first.term.get(k) == Some(v));
            if theirs != prefix || ours != pair.as_slice() || !same_rest {
                return None;
            }
        }
        own.push(OwnTerm {
            term: first.term,
            expressions: prefix,
        });
    }
    match own.as_slice() {
        // Made from no term of the author's: the policy's pair alone.
        [t] if t.expressions.is_empty() && t.term.len() == 1 => Some(Vec::new()),
        _ => Some(own),
    }
}
