//! policy.wasm answers every bench payload and rule fixture exactly as the module recorded in
//! test_data/responses/ did (the commit before the last change made for speed): the same
//! verdict, message and warnings, and the same JSON patch once a host diffs the mutated object.
use multislice_bench::responses::{cases, recorded_dir, response};
use multislice_host::{fixtures::load_json, workspace_root, Policy};

#[test]
fn every_case_gets_the_recorded_response() {
    let policy = Policy::load(&workspace_root().join("policy.wasm")).unwrap();
    let cases = cases().unwrap();
    let mut differ = Vec::new();
    for case in &cases {
        let recorded = load_json(&recorded_dir().join(format!("{}.json", case.name)))
            .unwrap_or_else(|e| panic!("{}: no recorded response ({e})", case.name));
        let now = response(&policy, case).unwrap();
        if now != recorded {
            differ.push(format!(
                "{}:\n  now      {now}\n  recorded {recorded}",
                case.name
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} differ:\n{}",
        differ.len(),
        cases.len(),
        differ.join("\n")
    );
    let files = std::fs::read_dir(recorded_dir()).unwrap().count();
    assert_eq!(files, cases.len(), "a recorded response has no case");
}
