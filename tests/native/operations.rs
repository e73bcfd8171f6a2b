//! docs/operations.md run as written: every command on the page is run by a test that checks
//! what the page shows it doing, or is marked "real cluster only: <what the test control plane
//! lacks>" ([`RUNS`] names the test of each; multislice_host::operations_page reads the page).
//! And the smoke test's two outputs are the policy's answers: the facts annotation the mutating
//! half stamps on examples/multislice-v5p.yaml as JobSet v0.9+ serves it, and the validating
//! half's refusal of the copy with `completions: 2`.
use jobset_multislice_policy::admission::evaluate;
use multislice_host::controller::{as_served, JobSetApi};
use multislice_host::fixtures::load_yaml;
use multislice_host::operations_page::{commands, in_section, page, Command};
use multislice_host::request::{admission_request, Kind};
use multislice_host::workspace_root;
use serde_json::{json, Value};

/// What runs a command of the page.
enum Run {
    /// A `#[test] fn` of tests/native/.
    Native(&'static str),
    /// An `@test` of e2e.bats, by its title (run where kwctl is installed).
    Bats(&'static str),
    /// cluster/tests/cluster/operations.rs (`CLUSTER_PARTS=operations make cluster-test`), which
    /// takes the command's text from the page by this same key.
    Cluster,
}

/// Every unmarked command of the page, as it is written there on one line, and what runs it.
const RUNS: &[(&str, &[Run])] = &[
    ("kubectl apply -f policy-server.yaml", &[Run::Cluster]),
    ("kubectl apply -k <your overlay of examples/>", &[Run::Cluster]),
    (
        "kubectl wait --for=jsonpath='{.status.policyStatus}'=active --timeout=5m clusteradmissionpolicy/jobset-multislice-mutate clusteradmissionpolicy/jobset-multislice-validate",
        &[Run::Cluster],
    ),
    (
        "kubectl -n kubewarden rollout status deployment/policy-server-jobset-multislice",
        &[Run::Cluster],
    ),
    (
        "kubectl apply --dry-run=server -f examples/multislice-v5p.yaml -o jsonpath='{.spec.replicatedJobs[0].template.spec.template.metadata.annotations.multislice\\.kubewarden\\.io/facts}'",
        &[
            Run::Native("the_smoke_test_prints_what_the_policy_answers"),
            Run::Cluster,
        ],
    ),
    (
        "sed 's/completions: 4/completions: 2/' examples/multislice-v5p.yaml | kubectl apply --dry-run=server -f -",
        &[
            Run::Native("the_smoke_test_prints_what_the_policy_answers"),
            Run::Cluster,
        ],
    ),
    (
        "kubectl delete clusteradmissionpolicy jobset-multislice",
        &[Run::Cluster],
    ),
    (
        "kubectl get clusteradmissionpolicy NAME -o jsonpath='{.status.conditions}'",
        &[Run::Cluster],
    ),
    (
        "kubectl -n kubewarden get pods -l kubewarden/policy-server=jobset-multislice",
        &[Run::Cluster],
    ),
    (
        "kubectl kustomize <your overlay of examples/> > pair.yaml",
        &[Run::Bats(SETTINGS_CHECK)],
    ),
    (
        "kwctl run --request-path REQUEST.json pair.yaml",
        &[Run::Bats(SETTINGS_CHECK)],
    ),
    (
        "kubectl delete -k <your overlay of examples/>",
        &[Run::Cluster],
    ),
    ("kubectl delete -f policy-server.yaml", &[Run::Cluster]),
];

const SETTINGS_CHECK: &str =
    "operations.md: the settings check runs the rendered pair, and refuses invalid settings as the page says";

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap()
}

#[test]
fn every_command_on_the_page_is_run_by_a_test_or_marked() {
    let all = commands(&page().unwrap());
    assert!(all.len() > RUNS.len(), "only {} commands read", all.len());
    let native = std::fs::read_dir(workspace_root().join("tests/native"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect::<String>();
    let bats = read("e2e.bats");
    let cluster = read("cluster/tests/cluster/operations.rs");
    let mut wrong = Vec::new();
    for command in &all {
        let runs = RUNS.iter().find(|(text, _)| *text == command.text);
        match (&command.mark, runs) {
            (None, None) => wrong.push(format!(
                "{:?} ({}) is neither run by a test listed in RUNS nor marked \
                 \"real cluster only: <what the test control plane lacks>\"",
                command.text, command.section
            )),
            (Some(mark), Some(_)) => wrong.push(format!(
                "{:?} is marked \"real cluster only: {mark}\" and run by a test: drop one",
                command.text
            )),
            _ => {}
        }
    }
    for (text, runs) in RUNS {
        if !all.iter().any(|c| c.text == *text) {
            wrong.push(format!("RUNS lists {text:?}, which the page does not hold"));
        }
        assert!(!runs.is_empty(), "{text:?}: no test named");
        for run in *runs {
            let found = match run {
                Run::Native(name) => native.contains(&format!("#[test]\nfn {name}() {{")),
                Run::Bats(title) => bats.contains(&format!("@test \"{title}\" {{")),
                // The cluster case holds each key in its source and takes the text from the page.
                Run::Cluster => cluster.contains(&format!("{text:?}")),
            };
            if !found {
                wrong.push(format!("{text:?}: its test is not there"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The smoke test's commands, and the lines the page shows them printing.
fn smoke_test() -> Vec<Command> {
    let all = commands(&page().unwrap());
    in_section(&all, "Smoke test")
        .into_iter()
        .cloned()
        .collect()
}

fn answer(object: &Value, role: &str) -> jobset_multislice_policy::admission::Verdict {
    let request = admission_request(Kind::JobSet, "CREATE", object, None);
    let payload = json!({"request": request, "settings": {"role": role}});
    evaluate(&serde_json::to_vec(&payload).unwrap())
}

#[test]
fn the_smoke_test_prints_what_the_policy_answers() {
    let smoke = smoke_test();
    let printed: Vec<&[String]> = smoke.iter().map(|c| c.output.as_slice()).collect();
    assert_eq!(printed.iter().map(|o| o.len()).collect::<Vec<_>>(), [1, 1]);
    let example = workspace_root().join("examples/multislice-v5p.yaml");
    // As JobSet v0.9+ serves it (its CRD defaults each groupName), which the page names.
    let jobset = as_served(&load_yaml(&example).unwrap(), JobSetApi::V09);
    let stamped = answer(&jobset, "mutate").mutated_object.expect("a patch");
    let facts = &stamped["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]
        ["annotations"]["multislice.kubewarden.io/facts"];
    assert_eq!(facts.as_str(), Some(printed[0][0].as_str()));
    // Before v0.9 the facts carry the group too, as the page says.
    let v08 = as_served(&load_yaml(&example).unwrap(), JobSetApi::V08);
    let stamped = answer(&v08, "mutate").mutated_object.expect("a patch");
    let facts = stamped["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]
        ["annotations"]["multislice.kubewarden.io/facts"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        facts.starts_with(r#"{"group":{"name":"default""#),
        "{facts}"
    );

    let text = std::fs::read_to_string(&example).unwrap();
    assert_eq!(
        text.matches("completions: 4").count(),
        1,
        "the sed edits one line"
    );
    let broken: Value =
        serde_yaml::from_str(&text.replace("completions: 4", "completions: 2")).unwrap();
    let refused = answer(&as_served(&broken, JobSetApi::V09), "validate");
    assert!(!refused.accepted);
    let said = format!(
        "… admission webhook \"clusterwide-jobset-multislice-validate.kubewarden.admission\" \
         denied the request: {}",
        refused.message.unwrap()
    );
    assert_eq!(printed[1][0], said);
}
