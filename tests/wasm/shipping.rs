//! What a user installs from is kept consistent: versions, rules, the mutation flag, the
//! questions UI, the README's tables and the examples. These are also the waPC twins of what
//! e2e.bats checks with kwctl (`kwctl scaffold artifacthub`, the manifests' settings), so
//! that they hold where kwctl is not installed.
use crate::common::*;
use jobset_multislice_policy::settings::KEYS;
use multislice_host::controller::JobSetApi;
use multislice_host::fixtures::{self, load_json, load_yaml};
use multislice_host::request::{admission_request, Kind};
use multislice_host::review::ReviewResponse;
use multislice_host::{files_under, workspace_root};
use serde_json::{json, Map, Value};

/// Every file under examples/, as a path relative to the workspace root.
fn examples() -> Vec<String> {
    files_under(std::path::Path::new("examples"))
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

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

/// The example policy manifests, as e2e.bats runs them through kwctl (with the module of
/// examples/policy/ added).
const MANIFESTS: [&str; 2] = [
    "examples/single/cluster-admission-policy.yaml",
    "examples/namespaced/admission-policy.yaml",
];

/// The kustomizations of examples/ that `kubectl apply -k` takes: the pair, the single policy
/// and the namespaced one.
const KUSTOMIZATIONS: [&str; 3] = ["examples", "examples/single", "examples/namespaced"];

/// The policies a kustomization of examples/ renders (multislice_host::kustomization).
fn rendered(dir: &str) -> Vec<Value> {
    multislice_host::kustomization::render(&workspace_root().join(dir)).unwrap()
}

/// The rendered policy `name` of the pair (examples/kustomization.yaml).
fn pair_policy(name: &str) -> Value {
    rendered("examples")
        .into_iter()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("examples/ renders no {name}"))
}

/// The recommended pair (docs/contributing/spec.md §5): the mutating half, then the validating half.
const PAIR: [&str; 2] = [
    "examples/cluster-admission-policy-mutate.yaml",
    "examples/cluster-admission-policy-validate.yaml",
];

/// A manifest's `spec.settings` as kwctl hands them to the policy: none is `{}`.
fn manifest_settings(file: &str) -> Value {
    match &yaml(file)["spec"]["settings"] {
        Value::Null => json!({}),
        s => s.clone(),
    }
}

/// `Name <email>, Name <email>` (io.kubewarden.policy.author) as artifacthub maintainers.
fn maintainers(authors: &str) -> Value {
    authors
        .split(',')
        .map(|author| {
            let (name, email) = author
                .trim()
                .strip_suffix('>')
                .and_then(|a| a.split_once(" <"))
                .unwrap_or_else(|| panic!("author {author:?} is not `Name <email>`"));
            json!({"name": name, "email": email})
        })
        .collect()
}

/// The settings table of the README: (key, default cell), in order.
fn readme_settings_table() -> Vec<(String, String)> {
    let readme = text("README.md");
    let section = readme
        .split_once("\n## Settings\n")
        .and_then(|(_, rest)| rest.split("\n## ").next())
        .expect("README has a Settings section");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            let key = cells[0].trim_end_matches('`');
            (key.to_string(), cells[2].trim().to_string())
        })
        .collect()
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
    // The CHANGELOG's first section is this version's: `[Unreleased]` until its release renames
    // it `[<version>] - <date>` (CONTRIBUTING.md "Release"), which the release workflow publishes.
    let changelog = text("CHANGELOG.md");
    let first = changelog.lines().find(|l| l.starts_with("## [")).unwrap();
    assert!(
        first == "## [Unreleased]" || first.starts_with(&format!("## [{version}] - ")),
        "CHANGELOG.md starts with {first:?}"
    );
    if first == "## [Unreleased]" {
        let intro = changelog
            .split("## [Unreleased]")
            .nth(1)
            .and_then(|rest| rest.split("\n### ").next())
            .unwrap();
        assert!(
            intro.contains(&version),
            "CHANGELOG.md's [Unreleased] does not name {version}, the version it will be released as"
        );
    }
    // Every reference to the published policy names this version: the module of the example
    // manifests, set once in examples/policy/ for every kustomization the README's install
    // applies.
    let oci = meta["annotations"]["io.kubewarden.policy.ociUrl"]
        .as_str()
        .unwrap();
    for dir in KUSTOMIZATIONS {
        for doc in rendered(dir) {
            let module = doc["spec"]["module"].as_str().unwrap_or_default();
            assert_eq!(
                module,
                format!("registry://{oci}:v{version}"),
                "{dir}: {}",
                doc["metadata"]["name"]
            );
        }
    }
    let file = "examples/policy/kustomization.yaml";
    let source = text(file);
    let refs: Vec<&str> = source
        .match_indices(&format!("{oci}:"))
        .map(|(i, m)| {
            let tag = &source[i + m.len()..];
            &tag[..tag
                .find(|c: char| c.is_whitespace() || c == '`')
                .unwrap_or(tag.len())]
        })
        .collect();
    assert!(!refs.is_empty(), "{file} names no {oci}:TAG");
    for tag in refs {
        assert_eq!(tag, format!("v{version}"), "{file}: {oci}:{tag}");
    }
    // The README's install applies the pair through examples/kustomization.yaml, which lists
    // the two example files as they are (tests/native/pair.rs renders it), and shows no
    // manifest of its own that could drift from them.
    let readme = text("README.md");
    assert!(
        readme.contains("kubectl apply -k examples/\n"),
        "README applies examples/kustomization.yaml"
    );
    let listed: Vec<String> = yaml("examples/kustomization.yaml")["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("examples/{}", r.as_str().unwrap()))
        .collect();
    assert_eq!(listed, PAIR, "examples/kustomization.yaml");
    for block in readme
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split_once("```").map(|(body, _)| body))
    {
        assert!(
            !block.contains("kind: ClusterAdmissionPolicy")
                && !block.contains("kind: AdmissionPolicy"),
            "README shows a policy manifest of its own: link the example file instead"
        );
    }
}

/// What the README's install says both halves of the pair set: `failurePolicy: Fail`,
/// `timeoutSeconds: 5`, a `namespaceSelector` that leaves out `kube-system` and `kubewarden`,
/// and `matchConditions` (whose meaning tests/cel/match_conditions.py holds).
#[test]
fn the_pair_sets_what_the_readme_says_it_sets() {
    // Read as prose: a claim may wrap across lines.
    let readme = text("README.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for claim in [
        "`failurePolicy: Fail`",
        "`timeoutSeconds: 5`",
        "leaves out `kube-system` and `kubewarden`",
        "`matchConditions`",
    ] {
        assert!(
            readme.contains(claim),
            "README's install no longer says {claim}"
        );
    }
    for file in PAIR {
        let name = yaml(file)["metadata"]["name"].clone();
        let spec = &pair_policy(name.as_str().unwrap())["spec"];
        assert_eq!(spec["failurePolicy"], json!("Fail"), "{file}");
        assert_eq!(spec["timeoutSeconds"], json!(5), "{file}");
        assert_eq!(
            spec["namespaceSelector"],
            json!({"matchExpressions": [{
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kubewarden"],
            }]}),
            "{file}"
        );
        let conditions = spec["matchConditions"].as_array().map_or(0, Vec::len);
        assert!(conditions > 0, "{file} has no matchConditions");
    }
}

/// The twin of e2e.bats' "artifacthub-pkg.yml is exactly what kwctl generates": every field
/// `kwctl scaffold artifacthub` derives from policy-metadata.yml and questions-ui.yml holds
/// what it derives it from, and the file has no field that is not accounted for here. (That
/// kwctl derives them this way is kwctl's own behaviour, checked by e2e.bats where kwctl is
/// installed.)
#[test]
fn artifacthub_pkg_holds_what_kwctl_derives_from_the_metadata() {
    let meta = yaml("policy-metadata.yml");
    let a = &meta["annotations"];
    let annotation = |key: &str| -> &str {
        a[key]
            .as_str()
            .unwrap_or_else(|| panic!("policy-metadata.yml lacks annotation {key}"))
    };
    let hub = yaml("artifacthub-pkg.yml");
    let version = cargo_version();
    let oci = annotation("io.kubewarden.policy.ociUrl");
    let source = annotation("io.kubewarden.policy.source");
    assert!(source.starts_with("https://github.com/"), "{source}");
    let keywords: Vec<&str> = annotation("io.artifacthub.keywords")
        .split(',')
        .map(str::trim)
        .collect();
    let derived = json!({
        "version": version,
        "name": annotation("io.kubewarden.policy.title"),
        "displayName": annotation("io.artifacthub.displayName"),
        "description": annotation("io.kubewarden.policy.description"),
        "license": annotation("io.kubewarden.policy.license"),
        "homeURL": annotation("io.kubewarden.policy.url"),
        "containersImages": [{"name": "policy", "image": format!("{oci}:v{version}")}],
        "keywords": keywords,
        // A GitHub source: the release's policy.wasm, then the source itself.
        "links": [
            {"name": "policy", "url": format!("{source}/releases/download/v{version}/policy.wasm")},
            {"name": "source", "url": source},
        ],
        "maintainers": maintainers(annotation("io.kubewarden.policy.author")),
        "provider": {"name": "kubewarden"},
        "recommendations": [
            {"url": "https://artifacthub.io/packages/helm/kubewarden/kubewarden-controller"}
        ],
    });
    let hub_fields = hub.as_object().unwrap();
    for (key, want) in derived.as_object().unwrap() {
        assert_eq!(&hub[key], want, "artifacthub-pkg.yml `{key}`");
    }
    // The install instructions pull and scaffold this version.
    let install = hub["install"].as_str().expect("install");
    assert!(
        install.contains(&format!("kwctl pull {oci}:v{version}\n")),
        "{install}"
    );
    assert!(
        install.contains(&format!("registry://{oci}:v{version}\n")),
        "{install}"
    );
    // createdAt is the one field kwctl writes anew: an RFC 3339 UTC time.
    let created = hub["createdAt"].as_str().expect("createdAt");
    assert!(
        created.len() > 20 && created.as_bytes()[10] == b'T' && created.ends_with('Z'),
        "createdAt {created}"
    );
    let mut known: Vec<&str> = derived
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    known.extend(["install", "createdAt", "annotations"]);
    let unknown: Vec<&String> = hub_fields
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .collect();
    assert!(unknown.is_empty(), "fields not derived here: {unknown:?}");

    // The annotations: the mutation flag, rules, resources, questions and, for a
    // context-aware policy only, the resources it reads.
    let hub_annotations: &Map<String, Value> = hub["annotations"].as_object().unwrap();
    let mut want_keys = vec![
        "kubewarden/mutation",
        "kubewarden/questions-ui",
        "kubewarden/resources",
        "kubewarden/rules",
    ];
    assert_eq!(
        hub_annotations["kubewarden/mutation"],
        json!(meta["mutating"].as_bool().unwrap().to_string())
    );
    assert_eq!(
        nested_yaml(&hub_annotations["kubewarden/rules"]),
        meta["rules"]
    );
    assert_eq!(
        hub_annotations["kubewarden/resources"],
        json!(annotation("io.artifacthub.resources"))
    );
    assert_eq!(
        nested_yaml(&hub_annotations["kubewarden/questions-ui"]),
        yaml("questions-ui.yml")
    );
    let context_aware = meta["contextAwareResources"].as_array().unwrap();
    if !context_aware.is_empty() {
        want_keys.push("kubewarden/contextAwareResources");
        // kwctl (v1.35.0) writes them sorted by apiVersion, then kind, whatever the metadata's order.
        let mut want = context_aware.clone();
        want.sort_by_key(|r| (r["apiVersion"].to_string(), r["kind"].to_string()));
        assert_eq!(
            nested_yaml(&hub_annotations["kubewarden/contextAwareResources"]),
            json!(want)
        );
    }
    let mut got_keys: Vec<&str> = hub_annotations.keys().map(String::as_str).collect();
    got_keys.sort_unstable();
    want_keys.sort_unstable();
    assert_eq!(got_keys, want_keys, "artifacthub-pkg.yml annotations");
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
    let table: Vec<String> = readme_settings_table()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(table, KEYS.to_vec(), "README settings table");
    // Each rule's section in docs/rules.md, and its row in the README: tests/native/docs.rs.
}

/// The defaults a user sees (questions-ui.yml, hence artifacthub-pkg.yml, and the README's
/// table) are the policy's own: settings made of them all are valid and answer a TPU JobSet,
/// its pods and an opted-in Job exactly as `{}` does.
#[test]
fn the_defaults_the_questions_and_the_readme_show_are_the_policys() {
    let questions = yaml("questions-ui.yml");
    let defaults: Map<String, Value> = questions["questions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["variable"].as_str().unwrap().to_string(),
                q["default"].clone(),
            )
        })
        .collect();
    for (key, cell) in readme_settings_table() {
        // Cells in backticks are values (JSON, or a bare string); others describe.
        let Some(value) = cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
            continue;
        };
        let value = serde_json::from_str(value).unwrap_or_else(|_| json!(value));
        assert_eq!(defaults[&key], value, "README default of {key}");
    }
    let defaults = Value::Object(defaults);
    assert!(policy().validate_settings(&defaults).unwrap().valid);
    let jobset = fixture_request("tpu-4-slices", JobSetApi::V09);
    let (_, _, pods) = run(&jobset, &no_settings());
    let job = load_json(&fixtures::job_request_path("jax-gpu-4")).unwrap();
    let mut requests = vec![jobset, job];
    requests.extend(
        pods.into_iter()
            .map(|p| admission_request(Kind::Pod, "CREATE", &p.sim.object, None)),
    );
    for request in &requests {
        assert_eq!(
            ReviewResponse::from_outcome(&validate(request, &defaults)),
            ReviewResponse::from_outcome(&validate(request, &no_settings())),
            "{}",
            request["name"]
        );
    }
}

/// The warnings a file states it gets, one `# Expected warning: ` line each.
fn stated_warnings(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|l| l.strip_prefix("# Expected warning: "))
        .map(str::to_string)
        .collect()
}

/// The twin of e2e.bats' "manifest: every example JobSet and Job gets its stated verdict
/// through the ClusterAdmissionPolicy" and "… the AdmissionPolicy": the same examples, the same
/// request files (test_data/e2e/examples/<stem>.json) and each manifest's own settings, and
/// exactly the warnings each example states; and with no settings at all.
#[test]
fn every_example_gets_its_stated_verdict_under_each_manifests_settings() {
    let mut runs = vec![("no settings".to_string(), no_settings())];
    runs.extend(
        MANIFESTS
            .iter()
            .map(|m| (format!("{m}'s settings"), manifest_settings(m))),
    );
    let mut examples: Vec<_> = std::fs::read_dir(workspace_root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    examples.sort();
    for (under, settings) in &runs {
        let mut seen = 0;
        for path in &examples {
            let source = std::fs::read_to_string(path).unwrap();
            // As e2e.bats selects them: a JobSet, or a Job (perhaps beside its Service).
            if !source
                .lines()
                .any(|l| l == "kind: JobSet" || l == "kind: Job")
            {
                continue;
            }
            let stem = path.file_stem().unwrap().to_string_lossy();
            let stated = source
                .lines()
                .find_map(|l| l.strip_prefix("# Expected verdict: "))
                .and_then(|v| v.strip_suffix('.'))
                .unwrap_or_else(|| panic!("{} states no verdict", path.display()));
            let request = load_json(&fixtures::example_request_path(&stem)).unwrap();
            let outcome = validate(&request, settings);
            let verdict = match (outcome.accepted, outcome.patch.is_some()) {
                (false, _) => "rejected",
                (true, true) => "accepted, mutated",
                (true, false) => "accepted, unchanged",
            };
            assert_eq!(
                verdict, stated,
                "{stem} under {under}: {:?}",
                outcome.message
            );
            assert_eq!(
                outcome.warnings,
                stated_warnings(&source),
                "{stem} under {under}"
            );
            seen += 1;
        }
        assert_eq!(seen, 6, "5 JobSets and 1 Job, under {under}");
    }
}

/// The twin of e2e.bats' "manifest: kwctl applies the manifest's settings exactly as
/// --settings-json", on the policy's side: the TPU pod gets under each manifest's settings what
/// it gets under the JSON those settings spell, and the settings make the difference they are
/// there for (the namespaced example turns on the TPU host env; the cluster-wide one keeps the
/// defaults).
#[test]
fn the_manifests_settings_give_what_their_json_gives() {
    let pod = load_json(&fixtures::pod_request_path("tpu-slice-pod")).unwrap();
    let answer = |settings: &Value| ReviewResponse::from_outcome(&validate(&pod, settings));
    let has_worker_id = |v: &ReviewResponse| {
        v.patch
            .as_ref()
            .is_some_and(|p| p.to_string().contains("TPU_WORKER_ID"))
    };

    let namespaced = answer(&manifest_settings(MANIFESTS[1]));
    assert_eq!(
        namespaced,
        answer(&json!({"tpuWorkerEnv": true, "jaxEnv": "always"}))
    );
    assert!(has_worker_id(&namespaced), "{:?}", namespaced.patch);

    let cluster = answer(&manifest_settings(MANIFESTS[0]));
    assert_eq!(cluster, answer(&json!({})));
    assert!(!has_worker_id(&cluster), "{:?}", cluster.patch);
}

#[test]
fn example_policies_bind_every_rule_with_valid_settings() {
    let meta = yaml("policy-metadata.yml");
    for file in MANIFESTS {
        let policy_doc = yaml(file);
        assert_eq!(policy_doc["spec"]["rules"], meta["rules"], "{file}");
        assert_eq!(policy_doc["spec"]["mutating"], meta["mutating"], "{file}");
        assert_eq!(
            policy_doc["spec"]["backgroundAudit"], meta["backgroundAudit"],
            "{file}"
        );
        let settings = manifest_settings(file);
        for key in settings.as_object().unwrap().keys() {
            assert!(KEYS.contains(&key.as_str()), "{file}: setting {key}");
        }
        assert!(
            policy().validate_settings(&settings).unwrap().valid,
            "{file}"
        );
    }
}

/// The audit scanner reads each result's severity and category from the policy's annotations
/// (docs/operations.md "Background audit"): every policy that examples/ renders carries the
/// module's own, from policy-metadata.yml.
#[test]
fn every_example_policy_carries_the_metadatas_severity_and_category() {
    let meta = yaml("policy-metadata.yml");
    let mut seen = 0;
    for dir in KUSTOMIZATIONS {
        for policy in rendered(dir) {
            for key in [
                "io.kubewarden.policy.severity",
                "io.kubewarden.policy.category",
            ] {
                assert_eq!(
                    policy["metadata"]["annotations"][key], meta["annotations"][key],
                    "{dir}: {} {key}",
                    policy["metadata"]["name"]
                );
            }
            seen += 1;
        }
    }
    assert_eq!(
        seen, 4,
        "the pair, the single policy and the namespaced one"
    );
}

/// The pair's two policies come from one module and differ only where a role must: their
/// settings only in `role`; the mutating one is `mutating: true` without audit (it gives no
/// verdicts), binds only the CREATEs it mutates and pods; the validating one is `mutating:
/// false`, audited, and binds JobSets and Jobs, CREATE and UPDATE, never pods. Every rule either
/// binds is one of the metadata's, and every other field is the same in both.
#[test]
fn the_pair_differs_only_in_role() {
    let [mutate, judge] =
        PAIR.map(|file| pair_policy(yaml(file)["metadata"]["name"].as_str().unwrap()));
    let without_role = |file: &str| {
        let mut s = manifest_settings(file);
        let role = s.as_object_mut().unwrap().remove("role");
        (role, s)
    };
    let (mutate_role, mutate_settings) = without_role(PAIR[0]);
    let (judge_role, judge_settings) = without_role(PAIR[1]);
    assert_eq!(mutate_role, Some(json!("mutate")));
    assert_eq!(judge_role, Some(json!("validate")));
    assert_eq!(mutate_settings, judge_settings, "settings beside role");
    for file in PAIR {
        assert!(
            policy()
                .validate_settings(&manifest_settings(file))
                .unwrap()
                .valid
        );
    }

    assert_eq!(mutate["spec"]["mutating"], json!(true));
    assert_eq!(mutate["spec"]["backgroundAudit"], json!(false));
    assert_eq!(judge["spec"]["mutating"], json!(false));
    assert_eq!(judge["spec"]["backgroundAudit"], json!(true));

    let meta = yaml("policy-metadata.yml");
    let rule = |resource: &str, operations: Value| -> Value {
        let mut r = meta["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resources"] == json!([resource]))
            .unwrap()
            .clone();
        r["operations"] = operations;
        r
    };
    assert_eq!(
        mutate["spec"]["rules"],
        json!([
            rule("jobsets", json!(["CREATE"])),
            rule("pods", json!(["CREATE"])),
            rule("jobs", json!(["CREATE"]))
        ])
    );
    assert_eq!(
        judge["spec"]["rules"],
        json!([
            rule("jobsets", json!(["CREATE", "UPDATE"])),
            rule("jobs", json!(["CREATE", "UPDATE"]))
        ])
    );

    // Everything else is one deployment's: module, failure policy, timeout, namespaces, and
    // the matchConditions, which examples/policy/ writes once for every policy (each
    // condition is true for the resources it does not judge), the single policy's too.
    let single = rendered("examples/single").remove(0);
    for key in [
        "module",
        "failurePolicy",
        "timeoutSeconds",
        "namespaceSelector",
        "matchConditions",
    ] {
        assert_eq!(mutate["spec"][key], judge["spec"][key], "spec.{key}");
    }
    assert_eq!(
        mutate["spec"]["matchConditions"],
        single["spec"]["matchConditions"]
    );
    assert_eq!(
        mutate["spec"]["matchConditions"].as_array().map(Vec::len),
        Some(2)
    );
}

/// The validating policy with the queue check on (docs/kueue-gke-xpk.md "The queue check"),
/// the pair with examples/queue-check/ listed as a component (as cluster/kustomize/queue-check/
/// lists it), is the validating half of the pair plus exactly two things: `queueCheck`, and the
/// `contextAwareResources` that the metadata lists (what the lookup reads).
#[test]
fn the_queue_check_manifest_is_the_validating_half_with_its_context() {
    let validating = |dir: &str| {
        multislice_host::kustomization::render(&workspace_root().join(dir))
            .unwrap()
            .into_iter()
            .find(|d| d["metadata"]["name"] == "jobset-multislice-validate")
            .unwrap()
    };
    let plain = validating("cluster/kustomize/pair");
    let mut checked = validating("cluster/kustomize/queue-check");
    let settings = checked["spec"]["settings"].clone();
    let spec = checked["spec"].as_object_mut().unwrap();
    let context = spec.remove("contextAwareResources").unwrap();
    assert_eq!(
        context,
        yaml("policy-metadata.yml")["contextAwareResources"]
    );
    let own = spec["settings"].as_object_mut().unwrap();
    assert_eq!(own.remove("queueCheck"), Some(json!("refuse")));
    assert_eq!(checked, plain);
    assert!(policy().validate_settings(&settings).unwrap().valid);
}

/// The queue check reads Kueue's v1beta2 first and v1beta1 after any v1beta2 failure
/// (docs/kueue-gke-xpk.md, "Which API version"): the metadata grants each kind it reads in
/// both versions, and nothing else.
#[test]
fn the_metadata_grants_each_kueue_kind_in_both_versions() {
    use jobset_multislice_policy::views::kueue_queue::{API_VERSION, FALLBACK_API_VERSION};
    let granted = yaml("policy-metadata.yml")["contextAwareResources"].clone();
    let want: Vec<Value> = [API_VERSION, FALLBACK_API_VERSION]
        .iter()
        .flat_map(|version| {
            [
                "LocalQueue",
                "ClusterQueue",
                "ResourceFlavor",
                "AdmissionCheck",
                "Topology",
            ]
            .map(|kind| json!({"apiVersion": version, "kind": kind}))
        })
        .collect();
    assert_eq!(granted, json!(want));
}

/// The metadata claims no owner, home or registry the project lacks (issue 29): no field names
/// Kubewarden's maintainers, github.com/kubewarden or ghcr.io/kubewarden; the fields a release
/// must fill hold the one placeholder, SET-AT-RELEASE; and `make push` has no default registry.
#[test]
fn the_metadata_claims_no_owner_home_or_registry_the_project_lacks() {
    let mut files: Vec<String> = [
        "policy-metadata.yml",
        "artifacthub-pkg.yml",
        "artifacthub-repo.yml",
        "questions-ui.yml",
        "Makefile",
    ]
    .map(String::from)
    .to_vec();
    files.extend(examples());
    for file in &files {
        let source = text(file).to_lowercase();
        for claim in [
            "ghcr.io/kubewarden",
            "github.com/kubewarden/jobset",
            "kubewarden developers",
            "cncf-kubewarden-maintainers",
        ] {
            assert!(!source.contains(claim), "{file} claims {claim:?}");
        }
    }
    let meta = yaml("policy-metadata.yml");
    for key in [
        "io.kubewarden.policy.author",
        "io.kubewarden.policy.url",
        "io.kubewarden.policy.source",
        "io.kubewarden.policy.ociUrl",
    ] {
        let value = meta["annotations"][key].as_str().unwrap();
        assert!(
            value.to_uppercase().contains("SET-AT-RELEASE"),
            "{key}: {value} is not the release placeholder"
        );
    }
    let makefile = text("Makefile");
    assert!(
        makefile.contains("\nREGISTRY ?=\n"),
        "REGISTRY has a default"
    );
    assert!(
        makefile.contains("push: need-registry"),
        "make push does not require REGISTRY"
    );
}

/// What the metadata says the policy does is what it does: every variable the policy sets is
/// named in the questions (hence Artifact Hub), the examples' tpuWorkerEnv comment names all
/// of its variables, the description covers the DNS rules, the Job rules and bad input, and
/// nothing says pods are never rejected (bad input is: tests/wasm/bad_input.rs).
#[test]
fn the_metadata_says_what_the_policy_does() {
    let questions = text("questions-ui.yml");
    for var in multislice_host::judges::POLICY_ENV {
        assert!(
            questions.contains(var),
            "questions-ui.yml does not name {var}"
        );
    }
    let tpu_host: Vec<&str> = multislice_host::judges::POLICY_ENV
        .into_iter()
        .filter(|v| v.starts_with("TPU_"))
        .collect();
    assert_eq!(tpu_host.len(), 5);
    for file in examples() {
        for line in text(&file).lines().filter(|l| l.contains("tpuWorkerEnv")) {
            if line.trim_start().starts_with('#') {
                for var in &tpu_host {
                    assert!(line.contains(var), "{file}: {line:?} does not name {var}");
                }
            }
        }
    }
    let meta = yaml("policy-metadata.yml");
    let description = meta["annotations"]["io.kubewarden.policy.description"]
        .as_str()
        .unwrap();
    for says in [
        "DNS",
        "dnsPolicy",
        "Indexed Jobs",
        "subdomain",
        "partial admission",
        "bad input",
    ] {
        assert!(
            description.contains(says),
            "the description does not say {says:?}"
        );
    }
    assert!(
        questions.contains("J1-J4"),
        "jaxEnv never turns off J1-J4 (admission/job.rs)"
    );
    assert!(!text("policy-metadata.yml").contains("never rejected"));
}

/// docs/operations.md's settings check (`kubectl kustomize <your overlay of examples/> >
/// pair.yaml`, then `kwctl run --request-path REQUEST.json pair.yaml`), on the policy's side:
/// an overlay of examples/ rendered as kustomize renders it, each policy of it run with its own
/// settings on the example JobSet's CREATE (the mutating half stamps the facts, the validating
/// one accepts), and `queueCheck: sometimes` on the validating half refused with the message the
/// page quotes. The twin of e2e.bats' run of the page's two commands.
#[test]
fn the_settings_check_of_operations_md_runs_the_rendered_pair() {
    let page = multislice_host::operations_page::page().unwrap();
    let page = page.split_whitespace().collect::<Vec<_>>().join(" ");
    let quoted = page
        .split("`Error: Policy settings are invalid: ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("the page quotes policy-server's refusal");
    let dir = std::env::temp_dir().join(format!("jsp-settings-check-{}", std::process::id()));
    let render = |extra: &str| {
        std::fs::create_dir_all(&dir).unwrap();
        let up = "../".repeat(dir.components().count() - 1);
        let examples = workspace_root().join("examples");
        std::fs::write(
            dir.join("kustomization.yaml"),
            format!(
                "resources:\n- {up}{}\npatches:\n- target: {{group: policies.kubewarden.io}}\n  \
                 patch: |-\n    - {{op: replace, path: /spec/module, value: file:///policy.wasm}}\n{extra}",
                examples.display().to_string().trim_start_matches('/')
            ),
        )
        .unwrap();
        multislice_host::kustomization::render(&dir).unwrap()
    };
    let example = yaml("examples/multislice-v5p.yaml");
    let request = admission_request(Kind::JobSet, "CREATE", &example, None);

    let pair = render("");
    let names: Vec<&str> = pair
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["jobset-multislice-mutate", "jobset-multislice-validate"]
    );
    for half in &pair {
        let settings = &half["spec"]["settings"];
        assert!(policy().validate_settings(settings).unwrap().valid);
        let outcome = validate(&request, settings);
        assert!(outcome.accepted, "{:?}", outcome.message);
        let stamps = outcome
            .patch_json()
            .to_string()
            .contains("multislice.kubewarden.io/facts");
        assert_eq!(stamps, half["spec"]["mutating"] == json!(true));
    }

    let broken = render(
        "- target: {kind: ClusterAdmissionPolicy, name: jobset-multislice-validate}\n  patch: |-\n    \
         - {op: add, path: /spec/settings/queueCheck, value: sometimes}\n",
    );
    let _ = std::fs::remove_dir_all(&dir);
    let verdicts: Vec<(bool, Option<String>)> = broken
        .iter()
        .map(|p| {
            let answer = policy().validate_settings(&p["spec"]["settings"]).unwrap();
            (answer.valid, answer.message)
        })
        .collect();
    assert_eq!(verdicts, [(true, None), (false, Some(quoted.to_string()))]);
}
