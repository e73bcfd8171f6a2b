//! The rule fixtures table: every JobSet under `test_data/rules/` and its expected verdict in
//! `test_data/rules/expected.yaml`. The harness runs it through the wasm module, and the
//! native tests through `admission::evaluate`, so a rule change gets feedback from
//! `cargo test` without building `policy.wasm`.
use multislice_host::fixtures::{load_yaml, test_data};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One fixture's verdict: `message` is the exact rejection (code 400); `accepted` means
/// admitted with no violation; `settings`, where given, are sent with the request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub rule: String,
    #[serde(default)]
    pub accepted: bool,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub warnings: Vec<String>,
    #[serde(default)]
    pub settings: Option<Value>,
}

/// The table, by fixture name.
pub fn expectations() -> BTreeMap<String, Expected> {
    let text = std::fs::read_to_string(test_data().join("rules/expected.yaml")).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// The fixtures on disk, sorted by name, to compare with the table's names.
pub fn fixture_names() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(test_data().join("rules"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".yaml").map(str::to_string))
        .filter(|f| f != "expected")
        .collect();
    files.sort();
    files
}

/// The JobSet of fixture `name`.
pub fn fixture(name: &str) -> Value {
    load_yaml(&test_data().join(format!("rules/{name}.yaml"))).unwrap()
}
