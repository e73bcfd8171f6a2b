//! The e2e cases of `e2e.bats` (test_data/e2e/cases.json) through the same module, so every
//! expectation kwctl is held to is proven here too, where kwctl cannot be installed.
use crate::common::*;
use multislice_host::fixtures::load_json;
use multislice_host::{workspace_root, SettingsOutcome};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Case {
    name: String,
    request: String,
    settings: Value,
    allowed: Option<bool>,
    patch: Option<Value>,
    message: Option<String>,
    code: Option<u16>,
    warnings: Option<Vec<String>>,
    #[serde(default)]
    settings_error: Option<String>,
}

fn cases() -> Vec<Case> {
    serde_json::from_value(load_json(&workspace_root().join("test_data/e2e/cases.json")).unwrap())
        .unwrap()
}

#[test]
fn every_e2e_case_holds_through_the_module() {
    for case in cases() {
        if let Some(error) = &case.settings_error {
            assert_eq!(
                policy().validate_settings(&case.settings).unwrap(),
                SettingsOutcome {
                    valid: false,
                    message: Some(error.clone())
                },
                "{}",
                case.name
            );
            continue;
        }
        let request = load_json(&workspace_root().join(&case.request)).unwrap();
        let outcome = validate(&request, &case.settings);
        assert_eq!(
            Some(outcome.accepted),
            case.allowed,
            "{}: {:?}",
            case.name,
            outcome.message
        );
        let patch = outcome.patch.as_ref().map(|_| outcome.patch_json());
        assert_eq!(patch, case.patch, "{}", case.name);
        assert_eq!(outcome.message, case.message, "{}", case.name);
        assert_eq!(outcome.code, case.code, "{}", case.name);
        assert_eq!(Some(outcome.warnings), case.warnings, "{}", case.name);
    }
}

#[test]
fn e2e_bats_runs_every_case_and_only_those() {
    let bats = std::fs::read_to_string(workspace_root().join("e2e.bats")).unwrap();
    let in_bats: Vec<&str> = bats
        .lines()
        .filter_map(|l| l.trim().strip_prefix("check_case "))
        .collect();
    let mut in_json: Vec<String> = cases().into_iter().map(|c| c.name).collect();
    let mut in_bats: Vec<String> = in_bats.into_iter().map(str::to_string).collect();
    in_json.sort();
    in_bats.sort();
    assert_eq!(in_bats, in_json);
}
