//! What a user installs from is kept consistent: versions, rules, the mutation flag, the
//! questions UI, the README's tables and the examples.
use crate::common::*;
use jobset_multislice_policy::settings::KEYS;
use multislice_host::controller::{as_served, JobSetApi};
use multislice_host::fixtures::{self, load_yaml};
use multislice_host::request::{admission_request, Kind};
use multislice_host::workspace_root;
use serde_json::{json, Value};

fn yaml(path: &str) -> Value {
    load_yaml(&workspace_root().join(path)).unwrap()
}

fn text(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap()
}

fn cargo_version() -> String {
    text("Cargo.toml")
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap()
        .to_string()
}

fn nested_yaml(v: &Value) -> Value {
    multislice_host::preview::yaml_documents(v.as_str().unwrap())
        .unwrap()
        .remove(0)
}

#[test]
fn versions_rules_and_mutation_flag_agree() {
    let meta = yaml("policy-metadata.yml");
    let hub = yaml("artifacthub-pkg.yml");
    let version = cargo_version();
    assert_eq!(
        meta["annotations"]["io.kubewarden.policy.version"],
        json!(version)
    );
    assert_eq!(hub["version"], json!(version));
    assert_eq!(
        hub["containersImages"][0]["image"],
        json!(format!(
            "{}:v{version}",
            meta["annotations"]["io.kubewarden.policy.ociUrl"]
                .as_str()
                .unwrap()
        ))
    );
    assert_eq!(
        nested_yaml(&hub["annotations"]["kubewarden/rules"]),
        meta["rules"]
    );
    assert_eq!(
        hub["annotations"]["kubewarden/mutation"],
        json!(meta["mutating"].as_bool().unwrap().to_string())
    );
    assert_eq!(
        hub["annotations"]["kubewarden/resources"],
        meta["annotations"]["io.artifacthub.resources"]
    );
    assert_eq!(
        nested_yaml(&hub["annotations"]["kubewarden/questions-ui"]),
        yaml("questions-ui.yml")
    );
    assert!(text("CHANGELOG.md").contains(&format!("## [{version}]")));
}

#[test]
fn the_questions_ui_and_the_readme_cover_every_setting() {
    let questions = yaml("questions-ui.yml");
    let variables: Vec<&str> = questions["questions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["variable"].as_str().unwrap())
        .collect();
    assert_eq!(variables, KEYS.to_vec());
    let readme = text("README.md");
    for key in KEYS {
        assert!(
            readme.contains(&format!("| `{key}` |")),
            "README settings table lacks {key}"
        );
    }
    for rule in [
        "G1", "G2", "G3", "G4", "T1", "T2", "T3", "T4", "X1", "X2", "X3", "X4", "N1", "J1", "J2",
        "J3",
    ] {
        assert!(
            readme.contains(&format!("#### {rule} — ")),
            "README lacks a section for {rule}"
        );
    }
}

#[test]
fn every_example_jobset_and_job_gets_the_verdict_its_comment_states() {
    let jobsets = fixtures::example_jobsets()
        .unwrap()
        .into_iter()
        .map(|(stem, doc)| (stem, Kind::JobSet, as_served(&doc, JobSetApi::V09)));
    let jobs = fixtures::example_jobs()
        .unwrap()
        .into_iter()
        .map(|(stem, doc)| (stem, Kind::Job, doc));
    let mut seen = 0;
    for (stem, kind, object) in jobsets.chain(jobs) {
        let path = workspace_root()
            .join("examples")
            .join(format!("{stem}.yaml"));
        let source = std::fs::read_to_string(&path).unwrap();
        let stated = source
            .lines()
            .find_map(|l| l.strip_prefix("# Expected verdict: "))
            .unwrap_or_else(|| panic!("{} states no verdict", path.display()))
            .trim_end_matches('.');
        let outcome = validate(
            &admission_request(kind, "CREATE", &object, None),
            &no_settings(),
        );
        let verdict = match (outcome.accepted, outcome.mutated_object.is_some()) {
            (false, _) => "rejected",
            (true, true) => "accepted, mutated",
            (true, false) => "accepted, unchanged",
        };
        assert_eq!(verdict, stated, "{}: {:?}", path.display(), outcome.message);
        assert!(
            outcome.warnings.is_empty(),
            "{}: {:?}",
            path.display(),
            outcome.warnings
        );
        seen += 1;
    }
    assert_eq!(seen, 6, "5 JobSets and 1 Job");
}

#[test]
fn example_policies_bind_every_rule_with_valid_settings() {
    let meta = yaml("policy-metadata.yml");
    for file in [
        "examples/cluster-admission-policy.yaml",
        "examples/admission-policy.yaml",
    ] {
        let policy_doc = yaml(file);
        assert_eq!(policy_doc["spec"]["rules"], meta["rules"], "{file}");
        assert_eq!(policy_doc["spec"]["mutating"], json!(true), "{file}");
        let settings = match &policy_doc["spec"]["settings"] {
            Value::Null => json!({}),
            s => s.clone(),
        };
        assert!(
            policy().validate_settings(&settings).unwrap().valid,
            "{file}"
        );
    }
}
