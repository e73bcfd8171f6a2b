//! docs/operations.md's smoke test shows what the policy answers: the facts annotation the
//! mutating half stamps on examples/multislice-v5p.yaml, and the validating half's refusal of
//! the copy with `completions: 2`, as printed there.
use jobset_multislice_policy::admission::evaluate;
use multislice_host::fixtures::load_yaml;
use multislice_host::request::{admission_request, Kind};
use multislice_host::workspace_root;
use serde_json::{json, Value};

/// The output lines of the smoke test's console block (the lines that are no `$ ` command).
fn printed() -> Vec<String> {
    let text = std::fs::read_to_string(workspace_root().join("docs/operations.md")).unwrap();
    let section = text.split("## Smoke test").nth(1).unwrap();
    let block = section.split("```console\n").nth(1).unwrap();
    let block = block.split("```").next().unwrap();
    block
        .lines()
        .filter(|l| !l.starts_with("$ "))
        .map(str::to_string)
        .collect()
}

fn answer(object: &Value, role: &str) -> jobset_multislice_policy::admission::Verdict {
    let request = admission_request(Kind::JobSet, "CREATE", object, None);
    let payload = json!({"request": request, "settings": {"role": role}});
    evaluate(&serde_json::to_vec(&payload).unwrap())
}

#[test]
fn the_smoke_test_prints_what_the_policy_answers() {
    let printed = printed();
    assert_eq!(printed.len(), 2, "{printed:?}");
    let example = workspace_root().join("examples/multislice-v5p.yaml");
    let jobset = load_yaml(&example).unwrap();
    let stamped = answer(&jobset, "mutate").mutated_object.expect("a patch");
    let facts = &stamped["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]
        ["annotations"]["multislice.kubewarden.io/facts"];
    assert_eq!(facts.as_str(), Some(printed[0].as_str()));

    let text = std::fs::read_to_string(&example).unwrap();
    assert_eq!(
        text.matches("completions: 4").count(),
        1,
        "the sed edits one line"
    );
    let broken: Value =
        serde_yaml::from_str(&text.replace("completions: 4", "completions: 2")).unwrap();
    let refused = answer(&broken, "validate");
    assert!(!refused.accepted);
    let said = format!(
        "… admission webhook \"clusterwide-jobset-multislice-validate.kubewarden.admission\" \
         denied the request: {}",
        refused.message.unwrap()
    );
    assert_eq!(printed[1], said);
}
