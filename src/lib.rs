//! jobset-multislice-policy: a Kubewarden policy that gives JobSet pods their replica-group
//! labels and the TPU multislice, TPU host and JAX distributed env, and rejects TPU JobSets
//! that cannot work. This file only registers the waPC entry points.
pub mod accelerators;
pub mod admission;
pub mod error;
pub mod facts;
pub mod groups;
pub mod json;
pub mod keys;
pub mod mutate;
pub mod placement;
pub mod pods;
pub mod quantity;
pub mod rules;
pub mod settings;
pub mod views;
pub mod violation;

use kubewarden_policy_sdk::protocol_version_guest;
use wapc_guest::{register_function, CallResult};

#[no_mangle]
pub extern "C" fn wapc_init() {
    register_function("validate", validate);
    register_function("validate_settings", validate_settings);
    register_function("protocol_version", protocol_version_guest);
}

fn validate(payload: &[u8]) -> CallResult {
    Ok(admission::validate(payload)?)
}

fn validate_settings(payload: &[u8]) -> CallResult {
    Ok(serde_json::to_vec(&admission::evaluate_settings(payload))?)
}
