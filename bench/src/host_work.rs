//! What policy-server does with a module's answer before it can reply to the API server
//! (policy-evaluator's `AdmissionResponse::from_policy_validation_response`): read the SDK's
//! `ValidationResponse`, diff the mutated object against the request's object with
//! `json_patch::diff`, and send the patch as base64 of its JSON. `make bench` adds it to
//! every module's call, so that the in-process ratios can be set beside policy-server's.
use anyhow::Result;
use base64::{engine::general_purpose::STANDARD, Engine as _};
use kubewarden_policy_sdk::response::ValidationResponse;
use serde_json::Value;

/// The patch policy-server would send for `answer` to a request whose object is `object`,
/// base64-encoded as in an AdmissionResponse; `None` when there is no mutation.
pub fn patch_for(answer: &[u8], object: &Value) -> Result<Option<String>> {
    let response: ValidationResponse = serde_json::from_slice(answer)?;
    let Some(mutated) = response.mutated_object else {
        return Ok(None);
    };
    let patch = json_patch::diff(object, &mutated);
    Ok(Some(STANDARD.encode(serde_json::to_string(&patch)?)))
}
