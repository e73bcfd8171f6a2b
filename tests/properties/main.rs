//! Property tests of validation on the native build of the policy (the same code the wasm
//! module runs; `tests/wasm/properties.rs` runs a share of the cases through the module).
use jobset_multislice_policy::admission::{evaluate, Verdict};
use multislice_gen as gen;
use multislice_host::request::{admission_request, Kind};
use proptest::prelude::*;
use serde_json::{json, Value};

/// The verdict on the CREATE of the shape's JobSet `jobset` (valid or broken), under the
/// settings the shape needs (`tpuResource`).
fn create(shape: &gen::Shape, jobset: &Value) -> Verdict {
    let request = admission_request(Kind::JobSet, "CREATE", jobset, None);
    let settings = shape.settings(&json!({}));
    evaluate(&serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Valid JobSets are accepted, and warned about only where a template sets a value the
    /// policy contradicts: the generator's literal MEGASCALE_NUM_SLICES "999" (docs/contributing/spec.md §4.2),
    /// once per TPU container of each TPU replicated job that has pods (one with `replicas: 0`
    /// has none to warn about; a split pod has two TPU containers). Its other user env (a fieldRef to the user's own
    /// annotation, a `$(VAR)` of an injected variable, `envFrom`) earns none. A queued one
    /// that leaves its slice shape to the flavour is also told what it was narrowed to.
    #[test]
    fn every_valid_jobset_is_accepted_and_warned_only_about_contradictions(shape in gen::shape()) {
        let jobset = gen::build(&shape);
        let verdict = create(&shape, &jobset);
        prop_assert!(verdict.accepted, "{:?}", verdict.message);
        // A slice group of one slice gets no MEGASCALE_* env, so nothing to contradict.
        let tpu_rjobs = gen::oracle::tpu_rjobs_in_multislices(&jobset, shape.tpu_resource());
        let tpu_containers = if shape.extras.split_tpu { 2 } else { 1 };
        let expected = if shape.extras.user_env == 1 { tpu_rjobs * tpu_containers } else { 0 };
        let narrowed = gen::narrowed_rjobs(&shape);
        // A CPU coordinator of slices that run JAX is warned about (docs/contributing/spec.md §4.2),
        // first; then the contradictions; then one warning per replicated job left to the Kueue
        // flavour, in order (§4.7). Past 10, the first 9 and how many more.
        let coordinators =
            gen::oracle::groups_with_a_coordinator_without_tpus(&jobset, shape.tpu_resource());
        let total = coordinators + expected + narrowed;
        let mut warnings = verdict.warnings.clone();
        if total > 10 {
            prop_assert_eq!(warnings.len(), 10, "{:?}", warnings);
            prop_assert_eq!(warnings.pop(), Some(format!("… and {} more like these", total - 9)));
        } else {
            prop_assert_eq!(warnings.len(), total, "{:?}", warnings);
        }
        for (i, w) in warnings.iter().enumerate() {
            if i < coordinators {
                prop_assert!(w.starts_with("spec.coordinator: replicated job "), "{}", w);
            } else if i < coordinators + expected {
                prop_assert!(w.contains(": MEGASCALE_NUM_SLICES keeps \"999\" for pod "), "{}", w);
            } else {
                prop_assert!(w.contains(gen::NARROWED), "{}", w);
            }
        }
    }

    /// Each broken JobSet is refused with exactly the rejection the generator states for the
    /// field it broke: code 400, and every violation's rule, path, words and fix. The shape is
    /// first made breakable for the rule, so a break that does not happen fails the property
    /// instead of passing it unchecked.
    #[test]
    fn one_broken_field_is_rejected_with_exactly_its_message(shape in gen::shape(), rule in 0..gen::BREAKABLE.len()) {
        let rule = gen::BREAKABLE[rule];
        let shape = gen::breakable(&shape, rule);
        let broken = gen::break_rule(&shape, rule);
        prop_assert!(broken.is_some(), "the generator broke nothing for {}", rule);
        let broken = broken.unwrap();
        let verdict = create(&shape, &broken.jobset);
        prop_assert!(!verdict.accepted, "{} not caught", rule);
        prop_assert_eq!(verdict.code, Some(400));
        prop_assert_eq!(verdict.message.as_deref(), Some(broken.message.as_str()), "broke {}", rule);
    }
}

/// The generator breaks every rule in every shape made breakable for it, each with exactly its
/// rejection, and breaks most rules often in shapes as they come (so [`gen::breakable`] does not
/// do all the work): no property above passes by skipping a rule.
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
    let mut as_they_come = [0u32; gen::BREAKABLE.len()];
    for _ in 0..300 {
        let shape = gen::shape().new_tree(&mut runner).unwrap().current();
        for (i, rule) in gen::BREAKABLE.iter().enumerate() {
            if gen::break_rule(&shape, rule).is_some() {
                as_they_come[i] += 1;
            }
            let shape = gen::breakable(&shape, rule);
            let broken = gen::break_rule(&shape, rule)
                .unwrap_or_else(|| panic!("{rule}: nothing broken in {shape:?}"));
            let verdict = create(&shape, &broken.jobset);
            assert!(!verdict.accepted, "{rule}");
            assert_eq!(verdict.code, Some(400), "{rule}");
            assert_eq!(
                verdict.message.as_deref(),
                Some(broken.message.as_str()),
                "{rule}: {shape:?}"
            );
        }
    }
    for (rule, n) in gen::BREAKABLE.iter().zip(as_they_come) {
        assert!(
            n >= 30,
            "{rule} was broken only {n} times in 300 shapes as they came"
        );
    }
    eprintln!(
        "breaks per rule over 300 shapes as they came: {:?}",
        gen::BREAKABLE.iter().zip(as_they_come).collect::<Vec<_>>()
    );
}

fn admit_native(request: &Value, settings: &Value) -> gen::invariants::Admitted {
    let bytes = serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap();
    let verdict = evaluate(&bytes);
    let (accepted, message, mutated) = (
        verdict.accepted,
        verdict.message.clone(),
        verdict.mutated_object.clone(),
    );
    let out = serde_json::to_vec(&verdict.to_response()).unwrap();
    gen::invariants::Admitted {
        accepted,
        message,
        mutated,
        bytes: out,
    }
}

/// Settings the mutation properties run under.
pub const SETTINGS: [&str; 4] = [
    "{}",
    r#"{"tpuWorkerEnv": true, "jaxEnv": "always"}"#,
    r#"{"multisliceEnv": false}"#,
    r#"{"jaxEnv": "never", "jaxCoordinatorPort": 1234}"#,
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Nothing lost, only allowed paths, idempotent, deterministic, and docs/contributing/spec.md §4 on every pod.
    /// Mostly under the `tpuResource` the shape's containers ask for; now and then without it,
    /// where a shape of another resource has no TPU container at all for the policy and the
    /// oracle alike.
    #[test]
    fn mutation_invariants_hold_for_every_generated_jobset(
        shape in gen::shape(),
        v09 in any::<bool>(),
        settings in 0..SETTINGS.len(),
        name_the_resource in prop::bool::weighted(0.8),
    ) {
        let api = if v09 { multislice_host::controller::JobSetApi::V09 } else { multislice_host::controller::JobSetApi::V08 };
        let settings: Value = serde_json::from_str(SETTINGS[settings]).unwrap();
        let settings = if name_the_resource { shape.settings(&settings) } else { settings };
        let result = gen::invariants::check(&admit_native, &gen::build(&shape), api, &settings);
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// docs/contributing/spec.md §4.5 and §4.6 over generated opted-in Jobs and every pod of each: nothing lost,
    /// only allowed paths, idempotent, deterministic, and each JAX process's env.
    #[test]
    fn mutation_invariants_hold_for_every_generated_job(
        shape in gen::jobs::job_shape(),
        settings in 0..SETTINGS.len(),
    ) {
        let settings: Value = serde_json::from_str(SETTINGS[settings]).unwrap();
        let result = gen::jobs::check_job(&admit_native, &shape, &shape.settings(&settings));
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }
}
