//! The policy's library compiled natively ([`Native`], what `make preview` runs) answers as
//! policy.wasm does in the waPC harness, on every fixture: the same response (verdict, code,
//! message, warnings and mutated object) to every request under every settings document the
//! e2e cases use, to every pod the controllers make from each admitted JobSet and Job, to the
//! bad corpus and the recorded sessions; the same settings verdicts; and so the same preview.
use crate::common::policy;
use multislice_host::controller::{self, JobSetApi};
use multislice_host::fixtures::load_json;
use multislice_host::preview::preview;
use multislice_host::request::{admission_request, Kind};
use multislice_host::runner::apply;
use multislice_host::session::replay_as_kwctl;
use multislice_host::{workspace_root, Evaluator, Native, Outcome};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The `.json` (or `.yaml`) files of a folder of the workspace, sorted.
fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(workspace_root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    out
}

fn name(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Every settings document of the e2e cases that is valid, `{}` first.
fn settings_documents() -> Vec<Value> {
    let cases = load_json(&workspace_root().join("test_data/e2e/cases.json")).unwrap();
    let mut out = vec![json!({})];
    for case in cases.as_array().unwrap() {
        if case.get("settingsError").is_none() && !out.contains(&case["settings"]) {
            out.push(case["settings"].clone());
        }
    }
    assert!(out.len() >= 5, "only {} settings documents", out.len());
    out
}

/// The response to one payload from each, as JSON; they must be the same. Returns the
/// module's response bytes.
fn same_response(native: &Native, payload: &[u8], what: &str) -> Vec<u8> {
    let wasm = policy()
        .call("validate", payload)
        .unwrap_or_else(|e| panic!("{what}: the module failed: {e:#}"));
    let native = native.response(payload).unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&native).unwrap(),
        serde_json::from_slice::<Value>(&wasm).unwrap(),
        "{what}: native and wasm answer differently"
    );
    wasm
}

/// A request's response from each, and then each pod's the controllers make from the
/// admitted JobSet or Job; returns how many answers were compared.
fn same_answers_with_pods(request: &Value, settings: &Value, what: &str) -> usize {
    let payload = serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap();
    let object = &request["object"];
    let response = same_response(&Native::new(), &payload, what);
    let Some(patch) = Outcome::from_response(&response, Some(object))
        .unwrap()
        .patch
    else {
        return 1;
    };
    let admitted = apply(object, &patch).unwrap();
    let pods = match request.pointer("/kind/kind").and_then(Value::as_str) {
        Some("JobSet") => controller::jobset_pods(&admitted),
        Some("Job") if request["operation"] == "CREATE" => controller::indexed_job_pods(&admitted),
        _ => return 1,
    };
    let Ok(pods) = pods else {
        // An object the simulated controllers cannot expand (a JobSet rule fixture that
        // is accepted with warnings, say) has no pods to compare.
        return 1;
    };
    for pod in &pods {
        let request = admission_request(Kind::Pod, "CREATE", &pod.object, None);
        let payload =
            serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap();
        same_response(
            &Native::new(),
            &payload,
            &format!("{what}, pod {}", pod.hostname),
        );
    }
    1 + pods.len()
}

#[test]
fn every_request_fixture_gets_the_same_answer_under_every_settings_document() {
    let mut requests = files("test_data/requests", "json");
    requests.extend(files("test_data/e2e/examples", "json"));
    assert!(requests.len() >= 100, "only {} requests", requests.len());
    let mut compared = 0;
    for settings in settings_documents() {
        for path in &requests {
            let request = load_json(path).unwrap();
            let what = format!("{} under {settings}", name(path));
            compared += same_answers_with_pods(&request, &settings, &what);
        }
    }
    assert!(compared > 2_000, "only {compared} answers compared");
}

#[test]
fn every_bad_request_gets_the_same_answer() {
    let bad = files("test_data/bad/requests", "json");
    assert!(bad.len() >= 40, "only {} bad requests", bad.len());
    for path in bad {
        same_response(&Native::new(), &std::fs::read(&path).unwrap(), &name(&path));
    }
}

#[test]
fn every_settings_document_gets_the_same_verdict() {
    let mut documents: Vec<(String, Value)> = settings_documents()
        .into_iter()
        .map(|s| (s.to_string(), s))
        .collect();
    for path in files("test_data/bad/settings", "json") {
        documents.push((name(&path), load_json(&path).unwrap()));
    }
    let cases = load_json(&workspace_root().join("test_data/e2e/cases.json")).unwrap();
    for case in cases.as_array().unwrap() {
        documents.push((case["name"].to_string(), case["settings"].clone()));
    }
    for (what, settings) in documents {
        assert_eq!(
            Evaluator::validate_settings(&Native::new(), &settings).unwrap(),
            policy().validate_settings(&settings).unwrap(),
            "{what}"
        );
    }
}

/// The cases with a recorded session: the policy's host calls answered by the same replay,
/// each side reading every exchange.
#[test]
fn every_recorded_session_gets_the_same_answer() {
    let cases = load_json(&workspace_root().join("test_data/e2e/cases.json")).unwrap();
    let mut seen = 0;
    for case in cases.as_array().unwrap() {
        let Some(session) = case.get("session").and_then(Value::as_str) else {
            continue;
        };
        let request = load_json(&workspace_root().join(case["request"].as_str().unwrap())).unwrap();
        let payload =
            serde_json::to_vec(&json!({"request": request, "settings": case["settings"]})).unwrap();
        let replay = || {
            replay_as_kwctl(
                &workspace_root().join(session),
                &workspace_root().join("policy-metadata.yml"),
            )
            .unwrap()
        };
        let (capabilities, wasm_session) = replay();
        let wasm = policy()
            .with_capabilities(capabilities)
            .call("validate", &payload)
            .unwrap();
        let (capabilities, native_session) = replay();
        let native = Native::with_capabilities(capabilities)
            .response(&payload)
            .unwrap();
        let what = &case["name"];
        assert_eq!(
            serde_json::from_slice::<Value>(&native).unwrap(),
            serde_json::from_slice::<Value>(&wasm).unwrap(),
            "{what}"
        );
        assert_eq!(
            wasm_session.remaining(),
            0,
            "{what}: the module left answers"
        );
        assert_eq!(native_session.remaining(), 0, "{what}: native left answers");
        seen += 1;
    }
    assert!(seen >= 10, "only {seen} cases with a session");
}

/// What `make preview` prints, of every example and every JobSet and Job source of the
/// fixtures, under each settings document and both JobSet APIs.
#[test]
fn every_preview_is_the_same() {
    let mut sources = files("examples", "yaml");
    sources.extend(files("test_data/jobsets", "yaml"));
    sources.extend(files("test_data/jobs", "yaml"));
    for path in sources {
        let yaml = std::fs::read_to_string(&path).unwrap();
        for settings in settings_documents() {
            for api in [JobSetApi::V08, JobSetApi::V09] {
                let what = format!("{} under {settings}, {api:?}", name(&path));
                let wasm = preview(policy(), &yaml, &settings, api);
                let native = preview(&Native::new(), &yaml, &settings, api);
                match (native, wasm) {
                    (Ok(native), Ok(wasm)) => assert_eq!(native, wasm, "{what}"),
                    (Err(native), Err(wasm)) => {
                        assert_eq!(format!("{native:#}"), format!("{wasm:#}"), "{what}")
                    }
                    (native, wasm) => panic!("{what}: native {native:?}, wasm {wasm:?}"),
                }
            }
        }
    }
}
