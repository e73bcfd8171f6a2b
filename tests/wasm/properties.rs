//! A share of the property cases through the real module.
#[path = "../gen/mod.rs"]
mod gen;

use crate::common::*;
use multislice_host::request::{admission_request, Kind};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn valid_and_broken_jobsets_through_the_module(shape in gen::shape(), rule in 0..gen::BREAKABLE.len()) {
        let valid = validate(&admission_request(Kind::JobSet, "CREATE", &gen::build(&shape), None), &no_settings());
        prop_assert!(valid.accepted, "{:?}", valid.message);
        let rule = gen::BREAKABLE[rule];
        if let Some(jobset) = gen::break_rule(&shape, rule) {
            let broken = validate(&admission_request(Kind::JobSet, "CREATE", &jobset, None), &no_settings());
            let message = broken.message.unwrap_or_default();
            prop_assert!(!message.is_empty() && message.lines().all(|l| l.starts_with(&format!("[{rule}] "))), "{}: {}", rule, message);
        }
    }
}
