//! What the docs say a setting does to the rules is what the code does. The README's settings
//! table is the one place that says it, as "`VALUE` turns off RULES" in a setting's row; each
//! such claim is run here: every failing fixture of each named rule is refused by that rule
//! under the defaults, and no longer by it under `{key: VALUE}`. And a range of rule ids written
//! anywhere a user reads (`J1–J4`) names a whole family, so that a rule added to a family cannot
//! be left out of the sentences that list the family.
use crate::docs::rule_ids;
use jobset_multislice_policy::admission::evaluate;
use multislice_gen::rule_fixtures::expectations;
use multislice_host::fixtures::{self, load_yaml, test_data};
use multislice_host::request::{admission_request, Kind};
use multislice_host::workspace_root;
use serde_json::{json, Value};

/// `J1–J4` (or `J1-J4`) as its family letter and bounds; `None` for anything else.
fn range(word: &str) -> Option<(char, u32, u32)> {
    let (a, b) = word.split_once('–').or_else(|| word.split_once('-'))?;
    let family = a.chars().next()?;
    let from: u32 = a.strip_prefix(family)?.parse().ok()?;
    let to: u32 = b.strip_prefix(family).unwrap_or(b).parse().ok()?;
    (family.is_ascii_uppercase() && from < to).then_some((family, from, to))
}

/// The ids a word names: one id (`T3`), or every id of a range (`J1–J4`).
fn ids_of(word: &str, known: &[String]) -> Option<Vec<String>> {
    if known.iter().any(|id| id == word) {
        return Some(vec![word.to_string()]);
    }
    let (family, from, to) = range(word)?;
    Some((from..=to).map(|n| format!("{family}{n}")).collect())
}

/// Each claim of the README's settings table: (key, value, rule ids it turns off).
fn claims() -> Vec<(String, Value, Vec<String>)> {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let table = readme
        .split_once("\n## Settings\n")
        .and_then(|(_, rest)| rest.split("\n## ").next())
        .expect("README has a Settings section");
    let known = rule_ids();
    let mut out = Vec::new();
    for row in table.lines().filter_map(|l| l.strip_prefix("| `")) {
        let key = row.split('`').next().unwrap().to_string();
        let mut rest = row;
        while let Some(at) = rest.find("` turns off ") {
            let value = rest[..at].rsplit('`').next().unwrap();
            let value = serde_json::from_str(value).unwrap_or_else(|_| json!(value));
            let mut ids = Vec::new();
            for word in rest[at + "` turns off ".len()..].split(' ') {
                let word = word.trim_end_matches([',', ';', '.', ')']);
                match ids_of(word, &known) {
                    Some(named) => ids.extend(named),
                    None if word == "and" => {}
                    None => break,
                }
            }
            assert!(
                !ids.is_empty(),
                "README, {key}: a `turns off` that names no rule"
            );
            out.push((key.clone(), value, ids));
            rest = &rest[at + 1..];
        }
    }
    out
}

/// The failing fixtures of a rule, each as the request it is sent in: a JobSet fixture of
/// test_data/rules/ whose expected verdict is a refusal by that rule under the defaults, or
/// the plain Job `test_data/jobs/<rule>-fail.yaml`.
fn failing_requests(rule: &str) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = expectations()
        .into_iter()
        .filter(|(_, want)| want.rule == rule && !want.accepted && want.settings.is_none())
        .map(|(name, _)| {
            let jobset = load_yaml(&test_data().join(format!("rules/{name}.yaml"))).unwrap();
            let request = admission_request(Kind::JobSet, "CREATE", &jobset, None);
            (name, request)
        })
        .collect();
    let job = format!("{}-fail", rule.to_lowercase());
    if test_data().join(format!("jobs/{job}.yaml")).is_file() {
        let object = fixtures::job_yaml(&job).unwrap();
        out.push((job, admission_request(Kind::Job, "CREATE", &object, None)));
    }
    out
}

/// The rules that refuse a request under `settings`, from the `[rule] ` of each line.
fn refused_by(request: &Value, settings: &Value) -> Vec<String> {
    let payload = json!({"request": request, "settings": settings});
    let verdict = evaluate(&serde_json::to_vec(&payload).unwrap());
    let message = verdict.message.unwrap_or_default();
    message
        .lines()
        .filter_map(|l| l.strip_prefix('[')?.split_once(']'))
        .map(|(rule, _)| rule.to_string())
        .collect()
}

#[test]
fn each_setting_turns_off_exactly_the_rules_the_readme_says() {
    let claims = claims();
    // The table says it of these at least; a claim dropped from it is a fact lost.
    let keys: Vec<&str> = claims.iter().map(|(k, _, _)| k.as_str()).collect();
    for key in [
        "jaxEnv",
        "requireTpuNodeSelectors",
        "requireExclusiveTopology",
    ] {
        assert!(
            keys.contains(&key),
            "README's settings table: {key} claims no rule"
        );
    }
    for (key, value, ids) in &claims {
        let settings = Value::Object([(key.clone(), value.clone())].into_iter().collect());
        for id in ids {
            let requests = failing_requests(id);
            assert!(!requests.is_empty(), "{id} has no failing fixture");
            for (name, request) in &requests {
                assert!(
                    refused_by(request, &json!({})).contains(id),
                    "{name} is not refused by {id} under the defaults"
                );
                assert!(
                    !refused_by(request, &settings).contains(id),
                    "README: {settings} turns off {id}, but {name} is still refused by it"
                );
            }
        }
    }
}

/// The claims the README makes on `jaxEnv: never` name every J and P rule (the bug this guards
/// against: docs said J1–J3 after J4 was added).
#[test]
fn jax_env_never_is_claimed_to_turn_off_every_j_and_p_rule() {
    let never = claims()
        .into_iter()
        .find(|(key, value, _)| key == "jaxEnv" && value == "never")
        .expect("README: jaxEnv `never` turns off …");
    let jax_rules: Vec<String> = rule_ids()
        .into_iter()
        .filter(|r| r.starts_with('P') || r.starts_with('J'))
        .collect();
    assert_eq!(never.2, jax_rules);
}

/// Where a user reads a range of rule ids, it runs from the family's first id to its last.
#[test]
fn a_range_of_rule_ids_in_the_docs_names_the_whole_family() {
    let ids = rule_ids();
    let last = |family: char| {
        ids.iter()
            .filter_map(|id| id.strip_prefix(family)?.parse::<u32>().ok())
            .max()
    };
    let mut files = vec![
        "README.md".to_string(),
        "CONTRIBUTING.md".to_string(),
        "questions-ui.yml".to_string(),
        "policy-metadata.yml".to_string(),
    ];
    for dir in [
        "docs",
        "docs/contributing",
        "examples",
        "examples/single",
        "examples/namespaced",
        "examples/queue-check",
    ] {
        for entry in std::fs::read_dir(workspace_root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                let name = path.strip_prefix(workspace_root()).unwrap();
                files.push(name.display().to_string());
            }
        }
    }
    let mut partial = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(workspace_root().join(file)).unwrap();
        for word in text.split(|c: char| c.is_whitespace() || "(),;:`*".contains(c)) {
            let Some((family, from, to)) = range(word.trim_end_matches('.')) else {
                continue;
            };
            if !"GTXNPJEQ".contains(family) {
                continue;
            }
            if from != 1 || Some(to) != last(family) {
                partial.push(format!("{file}: {word}"));
            }
        }
    }
    assert_eq!(partial, Vec::<String>::new(), "ranges that leave out rules");
}
