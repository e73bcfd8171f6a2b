//! The policy's mark on a pod template whose required node affinity it narrowed (docs/contributing/spec.md §4.7):
//! which (accelerator, topology) pairs it ANDed into the required terms, under which label
//! keys. It is written beside the terms and read back by the view, which takes the pairs out
//! again, so that T3 reads the user's own selection and a second admission changes nothing.
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Accelerator label value → the topologies of it that fit, in the table's order. Ordered by
/// accelerator, so that the terms, the mark and the warning come out the same every time.
pub type Pairs = BTreeMap<String, Vec<String>>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AffinityMark {
    /// The accelerator label key (setting `acceleratorLabel`).
    pub accelerator: String,
    /// The topology label key (setting `topologyLabel`).
    pub topology: String,
    pub pairs: Pairs,
}

impl AffinityMark {
    pub fn to_annotation(&self) -> String {
        // A struct of strings always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The mark an annotation holds; a value that is not one counts as no mark, and every
    /// term is then the user's own.
    pub fn from_annotation(text: &str) -> Option<AffinityMark> {
        serde_json::from_str(text).ok()
    }

    /// The two expressions each pair adds to a term, one pair after the other.
    pub fn pair_expressions(&self) -> Vec<[Value; 2]> {
        self.pairs
            .iter()
            .map(|(accelerator, topologies)| {
                [
                    json!({"key": self.accelerator, "operator": "In", "values": [accelerator]}),
                    json!({"key": self.topology, "operator": "In", "values": topologies}),
                ]
            })
            .collect()
    }
}
