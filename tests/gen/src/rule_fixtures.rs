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
    /// Other rules the fixture breaks too, where breaking `rule` alone cannot be done (P3's
    /// coordinator past parallelism is always also P2's parallelism below completions).
    #[serde(default)]
    pub also: Vec<String>,
}

/// The table, by fixture name. It names exactly the fixtures on disk: a fixture without an
/// expectation, or one the other way round, fails every runner.
pub fn expectations() -> BTreeMap<String, Expected> {
    let text = std::fs::read_to_string(test_data().join("rules/expected.yaml")).unwrap();
    let table: BTreeMap<String, Expected> = serde_yaml::from_str(&text).unwrap();
    assert_eq!(
        fixture_names(),
        table.keys().cloned().collect::<Vec<_>>(),
        "fixtures and expectations differ"
    );
    table
}

/// The fixtures on disk, sorted by name, to compare with the table's names.
fn fixture_names() -> Vec<String> {
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

/// What the policy answered for one fixture, from whichever runner sent it.
pub struct Answer<'a> {
    pub accepted: bool,
    pub message: Option<&'a str>,
    pub warnings: &'a [String],
    pub code: Option<u16>,
}

impl Expected {
    /// Asserts the answer is the expected verdict: acceptance, the exact message and warnings,
    /// code 400 for a rejection, and every line of its message tagged with the rule (or one
    /// of `also`), the rule on one line at least.
    pub fn assert_answered(&self, name: &str, answer: &Answer) {
        assert_eq!(
            answer.accepted, self.accepted,
            "{name}: {:?}",
            answer.message
        );
        assert_eq!(answer.message, self.message.as_deref(), "{name}");
        assert_eq!(answer.warnings, self.warnings.as_slice(), "{name}");
        if let Some(message) = answer.message {
            assert_eq!(answer.code, Some(400), "{name}");
            let tagged = |line: &str, rule: &str| line.starts_with(&format!("[{rule}] "));
            for line in message.lines() {
                assert!(
                    std::iter::once(&self.rule)
                        .chain(&self.also)
                        .any(|rule| tagged(line, rule)),
                    "{name}: {line}"
                );
            }
            assert!(
                message.lines().any(|line| tagged(line, &self.rule)),
                "{name}: no line of {}",
                self.rule
            );
        }
    }
}
