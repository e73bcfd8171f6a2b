//! The floor of the benchmark: a policy built with the same SDK and release profile that
//! deserializes the whole request, as most Kubewarden policies do, and accepts it.
use kubewarden_policy_sdk::request::ValidationRequest;
use kubewarden_policy_sdk::{accept_request, protocol_version_guest};
use wapc_guest::{register_function, CallResult};

#[no_mangle]
pub extern "C" fn wapc_init() {
    register_function("validate", validate);
    register_function("validate_settings", validate_settings);
    register_function("protocol_version", protocol_version_guest);
}

fn validate(payload: &[u8]) -> CallResult {
    let _request: ValidationRequest<serde_json::Value> = serde_json::from_slice(payload)?;
    accept_request()
}

fn validate_settings(_payload: &[u8]) -> CallResult {
    Ok(br#"{"valid":true}"#.to_vec())
}
