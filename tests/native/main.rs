//! Tests of the native build that need no `policy.wasm`: the rule fixtures table through
//! `admission::evaluate`, the shape of the source tree, and the facts the docs state.
mod docs;
mod pair;
mod rules;
mod source_tree;
