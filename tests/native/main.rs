//! Tests of the native build that need no `policy.wasm`: the rule fixtures table through
//! `admission::evaluate`, the shape of the source tree, the facts the docs state (and the rules
//! they say each setting turns off, and what the operator's smoke test prints), the pair's one
//! settings source, and release.yml's signing formats.
mod docs;
mod jax_members;
mod kueue_topology;
mod operations;
mod pair;
mod rules;
mod setting_claims;
mod signing;
mod source_tree;
