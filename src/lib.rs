//! jobset-multislice-policy: a Kubewarden policy that gives JobSet pods their replica-group
//! labels and the TPU multislice, TPU host and JAX distributed env, and rejects TPU JobSets
//! that cannot work. This file only registers the waPC entry points.
//!
//! The comments cite the contract, docs/contributing/spec.md, as `SPEC §n`.
//!
//! Data flows one way: request → view → plan → patch or rejection. The modules, by layer; a
//! module names only modules of its own layer and those above it here
//! (`tests/native/source_tree.rs` holds the table; CONTRIBUTING.md "Source map" says what's where):

// Foundations: errors, paths, JSON reads, keys, names and their syntax, and the facts for pods.
pub mod affinity_mark;
pub mod error;
pub mod facts;
pub mod json;
pub mod k8s_syntax;
pub mod keys;
pub mod names;
pub mod paths;
pub mod quantity;
pub mod spelling;

// Configuration: the settings, the accelerator table they extend, and which slices of it fit.
pub mod accelerators;
pub mod settings;
pub mod slice_fit;
pub mod topology;

// Views: read-only, typed views over the raw JobSet, Job, pod and pod spec.
pub mod views;

// Plans: pure functions of the views: the groups and the facts of a JobSet and a Job, placement
// and narrowing, the rules and their violations, the judging half's warnings about the
// templates, each pod's plan.
pub mod groups;
pub mod job_facts;
pub mod jobset_facts;
pub mod multikueue;
pub mod narrowing;
pub mod placement;
pub mod pods;
pub mod queue_fit;
pub mod rules;
pub mod tas;
pub mod violation;
pub mod warnings;

// Patches: the plans written into the object, only where something differs.
pub mod mutate;

// The edge: kwctl's payload in, a verdict out, dispatched by kind and operation.
pub mod admission;

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
