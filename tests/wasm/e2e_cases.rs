//! The e2e cases of `e2e.bats` (test_data/e2e/cases.json) through the same module, so every
//! expectation kwctl is held to is proven here too, where kwctl cannot be installed. Every
//! other `@test` of e2e.bats is accounted for in [`NOT_CASES`]: its twin here, or why it can
//! have none.
use crate::common::*;
use multislice_host::fixtures::load_json;
use multislice_host::session::replay_as_kwctl;
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
    /// A recorded session (kwctl's format) that answers the policy's host calls, given with
    /// `--allow-context-aware --replay-host-capabilities-interactions`; every exchange is read.
    #[serde(default)]
    session: Option<String>,
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
        let outcome = match &case.session {
            None => validate(&request, &case.settings),
            Some(session) => {
                let (capabilities, session) = replay_as_kwctl(
                    &workspace_root().join(session),
                    &workspace_root().join("policy-metadata.yml"),
                )
                .unwrap();
                let outcome = policy()
                    .with_capabilities(capabilities)
                    .validate(&request, &case.settings)
                    .unwrap();
                assert_eq!(session.remaining(), 0, "{}: answers left unread", case.name);
                outcome
            }
        };
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

/// Where an `@test` of e2e.bats that runs no `check_case` stands in `make test`.
enum Twin {
    /// The harness test (a `fn` under tests/wasm/) that asserts the same of the policy.
    Harness(&'static str),
    /// What it asserts is kwctl's own behaviour, so no twin can exist (docs/contributing/testing.md's test
    /// table marks it kwctl-only).
    KwctlOnly(&'static str),
}

/// Every `@test` of e2e.bats that is not a cases.json case, by its exact title.
const NOT_CASES: &[(&str, Twin)] = &[
    (
        "manifest: every example JobSet and Job gets its stated verdict through the \
         ClusterAdmissionPolicy",
        Twin::Harness("every_example_gets_its_stated_verdict_under_each_manifests_settings"),
    ),
    (
        "manifest: every example JobSet and Job gets its stated verdict through the \
         AdmissionPolicy",
        Twin::Harness("every_example_gets_its_stated_verdict_under_each_manifests_settings"),
    ),
    (
        "manifest: kwctl applies the manifest's settings exactly as --settings-json",
        Twin::Harness("the_manifests_settings_give_what_their_json_gives"),
    ),
    (
        "artifacthub-pkg.yml is exactly what kwctl generates, but for createdAt",
        Twin::KwctlOnly(
            "the output of `kwctl scaffold artifacthub`; what it derives from the metadata is \
             checked by artifacthub_pkg_holds_what_kwctl_derives_from_the_metadata",
        ),
    ),
    (
        "README: the pre-submit kwctl commands admit an example JobSet",
        Twin::KwctlOnly(
            "the README's `kwctl scaffold admission-request` and `kwctl run` lines; the policy's \
             answer to each example under `{}` is \
             every_example_gets_its_stated_verdict_under_each_manifests_settings",
        ),
    ),
    (
        "operations.md: the settings check runs the rendered pair, and refuses invalid settings \
         as the page says",
        Twin::Harness("the_settings_check_of_operations_md_runs_the_rendered_pair"),
    ),
    (
        "make artifacthub leaves the committed artifacthub-pkg.yml unchanged",
        Twin::KwctlOnly("runs `kwctl scaffold artifacthub` through make"),
    ),
];

/// The `@test`s of e2e.bats: (title, whether its body runs `check_case`).
fn bats_tests() -> Vec<(String, bool)> {
    let bats = std::fs::read_to_string(workspace_root().join("e2e.bats")).unwrap();
    let mut out = Vec::new();
    let mut lines = bats.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("@test \"") else {
            continue;
        };
        let (title, _) = rest
            .rsplit_once("\" {")
            .unwrap_or_else(|| panic!("unparsed @test line: {line}"));
        let is_case = lines
            .by_ref()
            .take_while(|l| *l != "}")
            .any(|l| l.trim().starts_with("check_case "));
        out.push((title.to_string(), is_case));
    }
    out
}

#[test]
fn every_bats_test_is_a_case_or_has_its_twin_listed() {
    let tests = bats_tests();
    assert!(
        tests.len() > NOT_CASES.len(),
        "no @test parsed from e2e.bats"
    );
    let listed: Vec<&str> = NOT_CASES.iter().map(|(title, _)| *title).collect();
    let unlisted: Vec<&String> = tests
        .iter()
        .filter(|(title, is_case)| !is_case && !listed.contains(&title.as_str()))
        .map(|(title, _)| title)
        .collect();
    assert!(
        unlisted.is_empty(),
        "@tests of e2e.bats that are not cases.json cases and have no entry in NOT_CASES \
         (name their harness twin, or say why they are kwctl-only): {unlisted:?}"
    );
    for title in &listed {
        assert!(
            tests.iter().any(|(t, is_case)| t == title && !is_case),
            "NOT_CASES lists {title:?}, which is not a non-case @test of e2e.bats"
        );
    }
}

#[test]
fn every_listed_twin_is_a_harness_test() {
    let sources: String = std::fs::read_dir(workspace_root().join("tests/wasm"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    for (title, twin) in NOT_CASES {
        match twin {
            Twin::Harness(name) => assert!(
                sources.contains(&format!("#[test]\nfn {name}() {{"))
                    || sources.contains(&format!("#[test]\npub fn {name}() {{")),
                "{title:?}: its twin {name} is no #[test] fn under tests/wasm/"
            ),
            Twin::KwctlOnly(why) => assert!(!why.is_empty(), "{title:?}: say why"),
        }
    }
}
