//! The policy's mark on a pod template whose required node affinity it narrowed (SPEC §4.7): which
//! (accelerator, topology) pairs it ANDed into the required terms, under which label keys. It is
//! written beside the terms and read back by the view, which takes the pairs out again, so that T3
//! reads the user's own selection and a second admission changes nothing.
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Accelerator label value → the topologies of it that fit, in the table's order. Ordered by
/// accelerator, so that the terms, the mark and the warning come out the same every time.
pub type Pairs = BTreeMap<String, Vec<String>>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AffinityMark {
    /// The accelerator label key (setting `acceleratorLabel`).
    pub accelerator: String,
    /// The topology label key (setting `topologyLabel`).
    pub topology: String,
    pub pairs: Pairs,
    /// When not empty, one more term admits a node of any accelerator but these (the table's
    /// names): a flavour of an accelerator the table lacks is left open, since the policy cannot
    /// judge its slice shapes (SPEC §4.7).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub any_accelerator_but: Vec<String>,
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

    /// The expressions each of the policy's terms adds: two per pair (accelerator In,
    /// topology In), one after the other, then the accelerator NotIn the table's names where
    /// unknown accelerators are left open.
    pub fn term_expressions(&self) -> Vec<Vec<Value>> {
        let mut out: Vec<Vec<Value>> = self
            .pairs
            .iter()
            .map(|(accelerator, topologies)| {
                vec![
                    json!({"key": self.accelerator, "operator": "In", "values": [accelerator]}),
                    json!({"key": self.topology, "operator": "In", "values": topologies}),
                ]
            })
            .collect();
        if !self.any_accelerator_but.is_empty() {
            out.push(vec![json!({
                "key": self.accelerator,
                "operator": "NotIn",
                "values": self.any_accelerator_but,
            })]);
        }
        out
    }

    /// Whether the terms leave `accelerator`, one the table lacks, open.
    pub fn leaves_open(&self, accelerator: &str) -> bool {
        !self.any_accelerator_but.is_empty()
            && !self.any_accelerator_but.iter().any(|a| a == accelerator)
    }
}
