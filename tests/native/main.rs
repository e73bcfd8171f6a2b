//! Tests of the native build that need no `policy.wasm`: the rule fixtures table through
//! `admission::evaluate`, and the shape of the source tree.
mod rules;
mod source_tree;
