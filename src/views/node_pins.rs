//! The node labels a pod spec pins to one value, read the way the scheduler reads them. Part
//! of the JobSet view: it is read once, with the pod template.
use crate::error::InputError;
use crate::json::{self, join, Object};
use crate::keys;

/// A node label a pod template pins to one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin<'a> {
    pub key: &'a str,
    pub value: &'a str,
    pub source: PinSource,
}

/// Where a pin stands in the pod spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinSource {
    NodeSelector,
    /// The `matchExpressions` index in the single required node selector term.
    Affinity(usize),
    /// GKE dynamic slicing: the pod template annotation `cloud.google.com/gke-tpu-slice-topology`.
    SliceTopologyAnnotation,
}

impl Pin<'_> {
    /// JSON path of the selector entry under `pod_spec_path` (built for messages only).
    pub fn path(&self, pod_spec_path: &str) -> String {
        match self.source {
            PinSource::NodeSelector => format!("{pod_spec_path}.nodeSelector[{:?}]", self.key),
            PinSource::Affinity(i) => format!(
                "{pod_spec_path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[{i}]"
            ),
            PinSource::SliceTopologyAnnotation => format!(
                "{}.metadata.annotations[{:?}]",
                pod_spec_path
                    .strip_suffix(".spec")
                    .unwrap_or(pod_spec_path),
                keys::SLICE_TOPOLOGY
            ),
        }
    }
}

/// The labels a pod spec pins: `nodeSelector` entries, and the `In` expressions with exactly
/// one value of a required node affinity with exactly one term. Several terms are ORed, and
/// several values allow several nodes, so neither pins a label.
pub fn pins<'a>(pod_spec: &'a Object, path: &str) -> Result<Vec<Pin<'a>>, InputError> {
    let mut out = Vec::new();
    if let Some(selector) = json::opt_string_map(pod_spec, "nodeSelector", path)? {
        for (key, value) in selector {
            out.push(Pin {
                key,
                value: value.as_str().unwrap_or(""),
                source: PinSource::NodeSelector,
            });
        }
    }
    let Some(affinity) = json::opt_object(pod_spec, "affinity", path)? else {
        return Ok(out);
    };
    let mut p = join(path, "affinity");
    let Some(node) = json::opt_object(affinity, "nodeAffinity", &p)? else {
        return Ok(out);
    };
    p = join(&p, "nodeAffinity");
    let required_key = "requiredDuringSchedulingIgnoredDuringExecution";
    let Some(required) = json::opt_object(node, required_key, &p)? else {
        return Ok(out);
    };
    p = join(&p, required_key);
    let terms = json::opt_array(required, "nodeSelectorTerms", &p)?.map_or(&[][..], Vec::as_slice);
    p = join(&p, "nodeSelectorTerms");
    let [term] = terms else {
        return Ok(out);
    };
    let t_path = json::index(&p, 0);
    let term = json::as_object(term, &t_path)?;
    let exprs = json::opt_array(term, "matchExpressions", &t_path)?.map_or(&[][..], Vec::as_slice);
    let e_list = join(&t_path, "matchExpressions");
    for (i, expr) in exprs.iter().enumerate() {
        let e_path = json::index(&e_list, i);
        let e = json::as_object(expr, &e_path)?;
        let key = json::opt_str(e, "key", &e_path)?.unwrap_or("");
        let operator = json::opt_str(e, "operator", &e_path)?.unwrap_or("");
        let values = json::opt_array(e, "values", &e_path)?.map_or(&[][..], Vec::as_slice);
        if let ("In", [value]) = (operator, values) {
            let value = value.as_str().ok_or_else(|| InputError::WrongType {
                path: format!("{e_path}.values[0]"),
                expected: "a string",
                found: json::type_name(value),
            })?;
            // A nodeSelector entry for the same key comes first and wins in messages.
            if !out.iter().any(|p| p.key == key) {
                out.push(Pin {
                    key,
                    value,
                    source: PinSource::Affinity(i),
                });
            }
        }
    }
    Ok(out)
}
