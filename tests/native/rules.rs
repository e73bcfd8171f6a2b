//! The rule fixtures table (`test_data/rules/expected.yaml`) through the native
//! `admission::evaluate`, with the same checks as the harness runs through the module.
use jobset_multislice_policy::admission::evaluate;
use multislice_gen::rule_fixtures::{expectations, fixture, Answer};
use multislice_host::request::{admission_request, Kind};
use serde_json::json;

#[test]
fn every_rule_fixture_gets_its_expected_verdict_natively() {
    let expected = expectations();
    for (name, want) in &expected {
        let request = admission_request(Kind::JobSet, "CREATE", &fixture(name), None);
        let settings = want.settings.clone().unwrap_or_else(|| json!({}));
        let payload = json!({"request": request, "settings": settings});
        let verdict = evaluate(&serde_json::to_vec(&payload).unwrap());
        want.assert_answered(
            name,
            &Answer {
                accepted: verdict.accepted,
                message: verdict.message.as_deref(),
                warnings: &verdict.warnings,
                code: verdict.code,
            },
        );
    }
}
