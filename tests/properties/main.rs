//! Property tests of validation on the native build of the policy (the same code the wasm
//! module runs; `tests/wasm/properties.rs` runs a share of the cases through the module).
#[path = "../gen/mod.rs"]
mod gen;

use jobset_multislice_policy::admission::{evaluate, Verdict};
use multislice_host::request::{admission_request, Kind};
use proptest::prelude::*;
use serde_json::{json, Value};

fn create(jobset: &Value) -> Verdict {
    let request = admission_request(Kind::JobSet, "CREATE", jobset, None);
    evaluate(&serde_json::to_vec(&json!({"request": request, "settings": {}})).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_valid_jobset_is_accepted_without_warnings(shape in gen::shape()) {
        let verdict = create(&gen::build(&shape));
        prop_assert!(verdict.accepted, "{:?}", verdict.message);
        prop_assert!(verdict.warnings.is_empty(), "{:?}", verdict.warnings);
    }

    #[test]
    fn one_broken_field_is_rejected_by_exactly_its_rule(shape in gen::shape(), rule in 0..gen::BREAKABLE.len()) {
        let rule = gen::BREAKABLE[rule];
        if let Some(jobset) = gen::break_rule(&shape, rule) {
            let verdict = create(&jobset);
            prop_assert!(!verdict.accepted, "{rule} not caught");
            prop_assert_eq!(verdict.code, Some(400));
            let message = verdict.message.unwrap_or_default();
            for line in message.lines() {
                prop_assert!(line.starts_with(&format!("[{rule}] ")), "broke {} but got: {}", rule, message);
            }
        }
    }
}

/// The generator reaches every rule: no property above passes by skipping a rule.
#[test]
fn the_generator_breaks_every_rule() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let mut broken = [0u32; gen::BREAKABLE.len()];
    for _ in 0..300 {
        let shape = gen::shape().new_tree(&mut runner).unwrap().current();
        for (i, rule) in gen::BREAKABLE.iter().enumerate() {
            if let Some(jobset) = gen::break_rule(&shape, rule) {
                assert!(!create(&jobset).accepted, "{rule}");
                broken[i] += 1;
            }
        }
    }
    for (rule, n) in gen::BREAKABLE.iter().zip(broken) {
        assert!(n >= 30, "{rule} was broken only {n} times in 300 shapes");
    }
    eprintln!(
        "breaks per rule over 300 shapes: {:?}",
        gen::BREAKABLE.iter().zip(broken).collect::<Vec<_>>()
    );
}
