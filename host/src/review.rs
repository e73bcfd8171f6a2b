//! An AdmissionReview's `response`, both ways, as policy-server writes it: built from the
//! policy's [`Outcome`] by the webhook server ([`admission_response`]), and read back into a
//! [`ReviewResponse`] by a client of policy-server, so that the two can be compared.
//!
//! [`Outcome`] is what the policy answered to `validate` (with the patch the host derives);
//! a [`ReviewResponse`] is what went over the wire to the API server.
use crate::Outcome;
use anyhow::{anyhow, bail, Context, Result};
use base64::Engine as _;
use serde_json::{json, Value};

/// What the server (or the waPC harness) answered, in the terms the two can be compared in.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewResponse {
    pub allowed: bool,
    pub message: Option<String>,
    pub code: Option<u16>,
    /// The JSON patch, decoded from the response's base64.
    pub patch: Option<Value>,
    pub warnings: Vec<String>,
}

impl ReviewResponse {
    /// The harness's outcome in the same terms.
    pub fn from_outcome(outcome: &Outcome) -> ReviewResponse {
        ReviewResponse {
            allowed: outcome.accepted,
            message: outcome.message.clone(),
            code: outcome.code,
            patch: outcome.patch.as_ref().map(|_| outcome.patch_json()),
            warnings: outcome.warnings.clone(),
        }
    }

    /// An AdmissionReview `response` as policy-server sends it.
    pub fn from_response(response: &Value) -> Result<ReviewResponse> {
        let allowed = response["allowed"]
            .as_bool()
            .ok_or_else(|| anyhow!("response without `allowed`: {response}"))?;
        let patch = match response.get("patch").and_then(Value::as_str) {
            None => None,
            Some(encoded) => {
                if response["patchType"] != json!("JSONPatch") {
                    bail!(
                        "a patch of type {} is not a JSON patch",
                        response["patchType"]
                    );
                }
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .context("patch is not base64")?;
                Some(serde_json::from_slice(&bytes).context("patch is not JSON")?)
            }
        };
        let status = &response["status"];
        Ok(ReviewResponse {
            allowed,
            message: status["message"].as_str().map(str::to_string),
            code: status["code"].as_u64().and_then(|c| u16::try_from(c).ok()),
            patch,
            // policy-server sends `"warnings": null` when there are none.
            warnings: match response.get("warnings") {
                None | Some(Value::Null) => Vec::new(),
                Some(w) => serde_json::from_value(w.clone()).context("warnings")?,
            },
        })
    }
}

/// The AdmissionReview `response` to a policy's outcome, as policy-server builds it
/// (policy-evaluator's `validation_response_with_constraints`, in protect mode): a policy that
/// may not mutate (`mutating: false`) and answers with a non-empty patch is refused, with
/// policy-evaluator's message, no code and no patch; its warnings stay.
pub fn admission_response(
    uid: Value,
    policy_id: &str,
    mutating: bool,
    outcome: &Outcome,
) -> Result<Value> {
    let patch = outcome.patch.as_ref().filter(|p| !p.0.is_empty());
    let mut response = json!({"uid": uid, "allowed": outcome.accepted});
    if patch.is_some() && !mutating {
        response["allowed"] = json!(false);
        response["status"] = json!({"message": format!(
            "Request rejected by policy {policy_id}. The policy attempted to mutate the request, \
             but it is currently configured to not allow mutations."
        )});
    } else {
        if let Some(message) = &outcome.message {
            response["status"] = json!({"message": message, "code": outcome.code.unwrap_or(400)});
        }
        if let Some(patch) = patch {
            response["patchType"] = json!("JSONPatch");
            response["patch"] =
                json!(base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(patch)?));
        }
    }
    if !outcome.warnings.is_empty() {
        response["warnings"] = json!(outcome.warnings);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "clusterwide-jobset-multislice-validate";

    fn outcome(accepted: bool, patch: Value) -> Outcome {
        Outcome {
            accepted,
            message: None,
            code: None,
            warnings: vec!["a warning".to_string()],
            mutated_object: None,
            patch: Some(serde_json::from_value(patch).unwrap()),
        }
    }

    fn add_label() -> Value {
        json!([{"op": "add", "path": "/metadata/labels/x", "value": "y"}])
    }

    #[test]
    fn a_validating_policy_that_patches_is_refused_as_policy_server_refuses_it() {
        let response =
            admission_response(json!("u-1"), ID, false, &outcome(true, add_label())).unwrap();
        assert_eq!(
            response,
            json!({
                "uid": "u-1",
                "allowed": false,
                "status": {"message": "Request rejected by policy clusterwide-jobset-multislice-validate. The policy attempted to mutate the request, but it is currently configured to not allow mutations."},
                "warnings": ["a warning"],
            })
        );
    }

    #[test]
    fn a_mutating_policy_sends_its_patch() {
        let response =
            admission_response(json!("u-2"), ID, true, &outcome(true, add_label())).unwrap();
        assert_eq!(response["allowed"], json!(true));
        assert_eq!(response["patchType"], json!("JSONPatch"));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(response["patch"].as_str().unwrap())
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&bytes).unwrap(),
            add_label()
        );
        assert!(response.get("status").is_none());
    }

    #[test]
    fn a_validating_policy_without_patch_gives_its_verdict() {
        let mut refused = outcome(false, json!([]));
        refused.message = Some("[T3] no".to_string());
        let response = admission_response(json!("u-3"), ID, false, &refused).unwrap();
        assert_eq!(
            response,
            json!({
                "uid": "u-3",
                "allowed": false,
                "status": {"message": "[T3] no", "code": 400},
                "warnings": ["a warning"],
            })
        );
        let mut accepted = outcome(true, json!([]));
        accepted.patch = None;
        accepted.warnings.clear();
        let response = admission_response(json!("u-4"), ID, false, &accepted).unwrap();
        assert_eq!(response, json!({"uid": "u-4", "allowed": true}));
    }

    #[test]
    fn a_deadline_hit_is_answered_as_policy_server_answers_it() {
        let response = admission_response(json!("u-5"), ID, true, &Outcome::interrupted()).unwrap();
        assert_eq!(
            response,
            json!({
                "uid": "u-5",
                "allowed": false,
                "status": {
                    "message": "Policy execution interrupted because it exceeded the allowed execution time",
                    "code": 500,
                },
            })
        );
    }
}
