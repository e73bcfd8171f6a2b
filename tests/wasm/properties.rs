//! A share of the property cases through the real module.
use crate::common::*;
use multislice_gen as gen;
use multislice_host::request::{admission_request, Kind};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn valid_and_broken_jobsets_through_the_module(shape in gen::shape(), rule in 0..gen::BREAKABLE.len()) {
        let settings = shape.settings(&no_settings());
        let valid = validate(&admission_request(Kind::JobSet, "CREATE", &gen::build(&shape), None), &settings);
        prop_assert!(valid.accepted, "{:?}", valid.message);
        let rule = gen::BREAKABLE[rule];
        let shape = gen::breakable(&shape, rule);
        let broken = gen::break_rule(&shape, rule);
        prop_assert!(broken.is_some(), "the generator broke nothing for {}", rule);
        let broken = broken.unwrap();
        let refused = validate(&admission_request(Kind::JobSet, "CREATE", &broken.jobset, None), &settings);
        prop_assert!(!refused.accepted, "{} not caught", rule);
        prop_assert_eq!(refused.message.as_deref(), Some(broken.message.as_str()), "broke {}", rule);
    }
}

fn admit_wasm(
    request: &serde_json::Value,
    settings: &serde_json::Value,
) -> gen::invariants::Admitted {
    let payload =
        serde_json::to_vec(&serde_json::json!({"request": request, "settings": settings})).unwrap();
    let bytes = policy().call("validate", &payload).expect("no trap");
    let response: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    gen::invariants::Admitted {
        accepted: response["accepted"] == serde_json::json!(true),
        message: response["message"].as_str().map(str::to_string),
        mutated: Some(response["mutated_object"].clone()).filter(|m| !m.is_null()),
        bytes,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The mutation invariants of tests/properties, through the module.
    #[test]
    fn mutation_invariants_through_the_module(shape in gen::shape(), v09 in any::<bool>(), tpu_worker in any::<bool>()) {
        let api = if v09 { multislice_host::controller::JobSetApi::V09 } else { multislice_host::controller::JobSetApi::V08 };
        let settings = shape.settings(&serde_json::json!({"tpuWorkerEnv": tpu_worker}));
        let result = gen::invariants::check(&admit_wasm, &gen::build(&shape), api, &settings);
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// The Job invariants of tests/properties, through the module.
    #[test]
    fn job_invariants_through_the_module(shape in gen::jobs::job_shape(), never in any::<bool>()) {
        let settings = if never { serde_json::json!({"jaxEnv": "never"}) } else { serde_json::json!({}) };
        let result = gen::jobs::check_job(&admit_wasm, &shape, &shape.settings(&settings));
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }
}
