//! Tests that run the built `policy.wasm` in wasmtime through waPC, as kwctl and
//! policy-server do. `make test` builds the module first.
mod bad_corpus;
mod bad_input;
mod common;
mod e2e_cases;
mod env_features;
mod example_references;
mod jobs;
mod narrowing;
mod native_agrees;
mod operations;
mod properties;
mod real_jax;
mod real_shapes;
mod references;
mod roles;
mod rules;
mod runner;
mod settings;
mod shipping;
mod simulation;
mod slice_groups;
mod slow_shapes;
mod spoofing;
mod tpu_containers;
mod warnings;
