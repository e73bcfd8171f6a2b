//! Env references that can never resolve (docs/contributing/spec.md §4.2): a `fieldRef` to a
//! `jobset.sigs.k8s.io/` key that no controller puts on the pods is empty in every pod, and the
//! JobSet (or opted-in Job) CREATE response says so, once per entry. Each warning is asserted
//! exactly; the property test at the end generates templates that mix keys JobSet sets, typos
//! and keys the template sets itself.
use crate::common::*;
use multislice_gen as gen;
use multislice_host::controller::JobSetApi;
use multislice_host::env::{get, resolve};
use multislice_host::request::{admission_request, Kind};
use proptest::prelude::*;
use serde_json::{json, Value};

const EMPTY: &str = "is empty in every pod";

fn field_ref(map: &str, key: &str) -> Value {
    json!({"fieldRef": {"fieldPath": format!("metadata.{map}['{key}']")}})
}

fn entry(name: &str, map: &str, key: &str) -> Value {
    json!({"name": name, "valueFrom": field_ref(map, key)})
}

fn path(rjob: usize, container: usize, entry: usize) -> String {
    format!("spec.replicatedJobs[{rjob}].template.spec.template.spec.containers[{container}].env[{entry}]")
}

fn set_env(jobset: &mut Value, rjob: usize, container: usize, env: Value) {
    jobset["spec"]["replicatedJobs"][rjob]["template"]["spec"]["template"]["spec"]["containers"]
        [container]["env"] = env;
}

/// The JobSet CREATE warnings of `fixture` (served as JobSet v0.9) after `edit`.
fn warnings_of(fixture: &str, edit: impl Fn(&mut Value)) -> Vec<String> {
    let mut jobset = fixture_request(fixture, JobSetApi::V09)["object"].clone();
    edit(&mut jobset);
    let outcome = create(&jobset, &no_settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    outcome.warnings
}

fn coordinator_warning(path: &str, var: &str, map: &str) -> String {
    format!(
        "{path}: {var} reads the {map} jobset.sigs.k8s.io/coordinator, which JobSet sets only with spec.coordinator, so it {EMPTY}; set spec.coordinator"
    )
}

fn unknown_warning(path: &str, var: &str, map: &str, key: &str, near: Option<&str>) -> String {
    let hint = near.map_or(String::new(), |n| format!("; did you mean {n}?"));
    format!(
        "{path}: {var} reads the {map} {key}, which no JobSet release sets, so it {EMPTY}{hint}"
    )
}

/// Every key the spec counts as set on a JobSet's pods, whatever the JobSet.
const SET_BY_JOBSET: [&str; 15] = [
    "jobset-name",
    "replicatedjob-name",
    "replicatedjob-replicas",
    "job-index",
    "job-global-index",
    "global-replicas",
    "job-key",
    "restart-attempt",
    "jobset-uid",
    "job-restart-attempt",
    "in-place-restart-attempt",
    "priority",
    "group-name",
    "group-replicas",
    "job-group-index",
];

#[test]
fn the_manual_block_without_spec_coordinator_warns_once_per_entry() {
    // Through kwctl too: the e2e case warn-references-never-resolve.
    let outcome = create(
        &fixture_request("manual-env-block", JobSetApi::V09)["object"],
        &no_settings(),
    );
    assert!(outcome.accepted);
    assert_eq!(
        outcome.warnings,
        [
            coordinator_warning(
                &path(0, 0, 0),
                "MEGASCALE_COORDINATOR_ADDRESS",
                "annotation"
            ),
            unknown_warning(
                &path(0, 0, 2),
                "MEGASCALE_SLICE_ID",
                "label",
                "jobset.sigs.k8s.io/job-globalindex",
                Some("jobset.sigs.k8s.io/job-global-index")
            ),
        ]
    );
}

#[rstest::rstest]
fn the_pods_of_the_manual_block_do_get_empty_values(
    #[values(JobSetApi::V08, JobSetApi::V09)] api: JobSetApi,
) {
    // What the warning predicts, on the pods the controllers make: the user's entries are
    // kept, and both resolve to nothing.
    let (_, _, pods) = run(&fixture_request("manual-env-block", api), &no_settings());
    assert_eq!(pods.len(), 2);
    for p in &pods {
        let env = resolve(&p.pod, &p.pod["spec"]["containers"][0]).unwrap();
        assert_eq!(get(&env, "MEGASCALE_COORDINATOR_ADDRESS"), Some(""));
        assert_eq!(get(&env, "MEGASCALE_SLICE_ID"), Some(""));
        assert_eq!(get(&env, "MEGASCALE_NUM_SLICES"), Some("2"));
    }
}

#[test]
fn the_coordinator_resolves_once_spec_coordinator_names_a_pod() {
    let got = warnings_of("manual-env-block", |js| {
        js["spec"]["coordinator"] = json!({"replicatedJob": "slice", "jobIndex": 0, "podIndex": 0});
        set_env(
            js,
            0,
            0,
            json!([
                entry(
                    "MEGASCALE_COORDINATOR_ADDRESS",
                    "annotations",
                    "jobset.sigs.k8s.io/coordinator"
                ),
                // xpk reads it as a label; treated as set in both maps.
                entry("COORDINATOR", "labels", "jobset.sigs.k8s.io/coordinator"),
            ]),
        );
    });
    assert_eq!(got, Vec::<String>::new());
}

#[test]
fn every_key_jobset_sets_resolves_as_label_and_as_annotation() {
    let got = warnings_of("tpu-4-slices", |js| {
        let env: Vec<Value> = SET_BY_JOBSET
            .iter()
            .flat_map(|k| {
                let key = format!("jobset.sigs.k8s.io/{k}");
                [entry("A", "labels", &key), entry("B", "annotations", &key)]
            })
            .collect();
        set_env(js, 0, 0, json!(env));
    });
    assert_eq!(got, Vec::<String>::new());
}

#[test]
fn a_key_the_template_sets_itself_resolves_in_both_maps() {
    let got = warnings_of("tpu-4-slices", |js| {
        js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]
            ["jobset.sigs.k8s.io/team"] = json!("ml");
        set_env(
            js,
            0,
            0,
            json!([
                entry("TEAM", "labels", "jobset.sigs.k8s.io/team"),
                entry("TEAM_TOO", "annotations", "jobset.sigs.k8s.io/team"),
            ]),
        );
    });
    assert_eq!(got, Vec::<String>::new());
}

#[test]
fn keys_outside_the_prefix_and_other_sources_earn_nothing() {
    let got = warnings_of("tpu-4-slices", |js| {
        set_env(
            js,
            0,
            0,
            json!([
                entry("A", "labels", "my-team/slice"),
                entry("B", "annotations", "alpha.jobset.sigs.k8s.io/exclusive-topology"),
                {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "D", "value": "jobset.sigs.k8s.io/typo"},
                {"name": "E", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "jobset.sigs.k8s.io/typo"}}}
            ]),
        );
    });
    assert_eq!(got, Vec::<String>::new());
}

#[test]
fn a_typo_far_from_every_key_gets_no_suggestion_and_init_containers_count() {
    let got = warnings_of("tpu-init-container", |js| {
        js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["initContainers"]
            [0]["env"] = json!([entry("WHO", "annotations", "jobset.sigs.k8s.io/owner")]);
    });
    assert_eq!(
        got,
        [format!(
            "spec.replicatedJobs[0].template.spec.template.spec.initContainers[0].env[0]: WHO reads the annotation jobset.sigs.k8s.io/owner, which no JobSet release sets, so it {EMPTY}"
        )]
    );
}

#[test]
fn one_entry_gets_one_warning_not_a_contradiction_as_well() {
    // MEGASCALE_SLICE_ID is one the policy computes; its never-resolving reference is the
    // warning, and no contradiction is reported beside it.
    let got = warnings_of("tpu-4-slices", |js| {
        set_env(
            js,
            0,
            0,
            json!([
                entry(
                    "MEGASCALE_SLICE_ID",
                    "labels",
                    "jobset.sigs.k8s.io/job-globalindex"
                ),
                entry(
                    "MEGASCALE_COORDINATOR_ADDRESS",
                    "annotations",
                    "jobset.sigs.k8s.io/coordinator"
                ),
            ]),
        );
    });
    assert_eq!(
        got,
        [
            unknown_warning(
                &path(0, 0, 0),
                "MEGASCALE_SLICE_ID",
                "label",
                "jobset.sigs.k8s.io/job-globalindex",
                Some("jobset.sigs.k8s.io/job-global-index")
            ),
            coordinator_warning(
                &path(0, 0, 1),
                "MEGASCALE_COORDINATOR_ADDRESS",
                "annotation"
            ),
        ]
    );
}

#[test]
fn the_user_set_env_fixture_gets_its_contradiction_and_its_reference() {
    let got = warnings_of("user-set-env", |_| {});
    assert_eq!(
        got,
        [
            format!("{}: MEGASCALE_NUM_SLICES keeps \"3\" for pod handwritten-slice-0-0, not the \"2\" the policy computed", path(0, 0, 0)),
            coordinator_warning(&path(0, 0, 1), "MEGASCALE_COORDINATOR_ADDRESS", "annotation"),
        ]
    );
}

#[test]
fn a_jobset_the_policy_does_not_judge_is_still_warned() {
    // Every JobSet CREATE is parsed, and the reference is as empty on CPU pods.
    let got = warnings_of("cpu-only", |js| {
        set_env(
            js,
            1,
            0,
            json!([entry("INDEX", "labels", "jobset.sigs.k8s.io/jobindex")]),
        );
    });
    assert_eq!(
        got,
        [unknown_warning(
            &path(1, 0, 0),
            "INDEX",
            "label",
            "jobset.sigs.k8s.io/jobindex",
            Some("jobset.sigs.k8s.io/job-index")
        )]
    );
}

#[test]
fn a_rejected_jobset_carries_the_warning_beside_its_violations() {
    let mut jobset = fixture_request("tpu-4-slices", JobSetApi::V09)["object"].clone();
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"] = json!(3);
    set_env(
        &mut jobset,
        0,
        0,
        json!([entry("X", "annotations", "jobset.sigs.k8s.io/coordinator")]),
    );
    let outcome = create(&jobset, &no_settings());
    assert!(!outcome.accepted);
    assert!(outcome.message.unwrap().starts_with("[T2] "));
    assert_eq!(
        outcome.warnings,
        [coordinator_warning(&path(0, 0, 0), "X", "annotation")]
    );
}

#[test]
fn updates_and_pods_carry_no_reference_warning() {
    let jobset = fixture_request("manual-env-block", JobSetApi::V09)["object"].clone();
    let update = validate(
        &admission_request(Kind::JobSet, "UPDATE", &jobset, Some(&jobset)),
        &no_settings(),
    );
    assert!(update.accepted);
    assert_eq!(update.warnings, Vec::<String>::new());
    let (_, _, pods) = run(
        &admission_request(Kind::JobSet, "CREATE", &jobset, None),
        &no_settings(),
    );
    for p in pods {
        assert_eq!(
            p.outcome.warnings,
            Vec::<String>::new(),
            "{}",
            p.sim.hostname
        );
    }
}

// --- Opted-in plain Jobs (docs/contributing/spec.md §4.6): the Job controller's keys.

fn job_with_env(env: Value) -> Value {
    let mut job = crate::jobs::job_request("jax-gpu-4")["object"].clone();
    job["spec"]["template"]["spec"]["containers"][0]["env"] = env;
    job
}

fn job_create(job: &Value, settings: &Value) -> multislice_host::Outcome {
    validate(&admission_request(Kind::Job, "CREATE", job, None), settings)
}

#[test]
fn a_plain_job_warns_about_jobset_keys_and_batch_typos() {
    let job = job_with_env(json!([
        entry("RANK", "labels", "jobset.sigs.k8s.io/job-index"),
        entry(
            "INDEX",
            "annotations",
            "batch.kubernetes.io/job-completion-index"
        ),
        entry("NAME", "labels", "batch.kubernetes.io/job-name"),
        entry("UID", "labels", "batch.kubernetes.io/controller-uid"),
        entry("LEGACY", "labels", "job-name"),
        entry("LEGACY_UID", "labels", "controller-uid"),
        entry(
            "TYPO",
            "annotations",
            "batch.kubernetes.io/job-completion-idx"
        ),
        entry("OWN", "labels", "app"),
    ]));
    let outcome = job_create(&job, &no_settings());
    assert!(outcome.accepted, "{:?}", outcome.message);
    let env = "spec.template.spec.containers[0].env";
    assert_eq!(
        outcome.warnings,
        [
            format!("{env}[0]: RANK reads the label jobset.sigs.k8s.io/job-index, which no controller sets on a plain Job's pods, so it {EMPTY}"),
            format!("{env}[6]: TYPO reads the annotation batch.kubernetes.io/job-completion-idx, which the Job controller does not set, so it {EMPTY}; did you mean batch.kubernetes.io/job-completion-index?"),
        ]
    );
}

#[test]
fn a_plain_job_template_that_sets_the_key_itself_resolves() {
    let mut job = job_with_env(json!([entry(
        "RANK",
        "annotations",
        "jobset.sigs.k8s.io/job-index"
    )]));
    job["spec"]["template"]["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] = json!("0");
    assert_eq!(
        job_create(&job, &no_settings()).warnings,
        Vec::<String>::new()
    );
}

// --- The property: a warning exactly for the keys that never resolve, and the rest of the
// response what the same template gets without those entries.

#[derive(Debug, Clone)]
enum Key {
    /// One of SET_BY_JOBSET.
    Set(usize),
    Coordinator,
    Typo(String),
    /// `own-<n>`, which the referencing template sets itself when the flag says so.
    Own(u8, bool),
}

#[derive(Debug, Clone)]
struct Reference {
    rjob: usize,
    container: usize,
    label: bool,
    key: Key,
}

fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        (0..SET_BY_JOBSET.len()).prop_map(Key::Set),
        Just(Key::Coordinator),
        prop_oneof![
            Just("job-globalindex".to_string()),
            Just("jobset_name".to_string()),
            Just("replicatedjob-replica".to_string()),
            Just("coordinater".to_string()),
            "[a-z]{1,10}(-[a-z]{1,8})?",
        ]
        .prop_map(Key::Typo),
        (0u8..3, any::<bool>()).prop_map(|(n, set)| Key::Own(n, set)),
    ]
}

fn reference() -> impl Strategy<Value = Reference> {
    (0usize..8, 0usize..3, any::<bool>(), key()).prop_map(|(rjob, container, label, key)| {
        Reference {
            rjob,
            container,
            label,
            key,
        }
    })
}

fn key_name(key: &Key) -> String {
    match key {
        Key::Set(i) => SET_BY_JOBSET[*i].to_string(),
        Key::Coordinator => "coordinator".to_string(),
        Key::Typo(t) => t.clone(),
        Key::Own(n, _) => format!("own-{n}"),
    }
}

/// The pod template metadata of replicated job `r`, created when missing.
fn pod_metadata(jobset: &mut Value, r: usize) -> &mut serde_json::Map<String, Value> {
    let template = jobset["spec"]["replicatedJobs"][r]["template"]["spec"]["template"]
        .as_object_mut()
        .unwrap();
    template
        .entry("metadata")
        .or_insert(json!({}))
        .as_object_mut()
        .unwrap()
}

/// A container the property added entries to: (replicated job, container, env length before).
type Touched = (usize, usize, Option<usize>);

/// Places `refs` on the JobSet of `shape`: (without the entries, with them, the containers
/// touched, and the expected warning prefixes).
fn place(shape: &gen::Shape, refs: &[Reference]) -> (Value, Value, Vec<Touched>, Vec<String>) {
    let mut base = gen::build(shape);
    let count = base["spec"]["replicatedJobs"].as_array().unwrap().len();
    // Keys the templates set themselves go on the base too: only the entries differ.
    let mut own: Vec<Vec<String>> = vec![Vec::new(); count];
    for r in refs {
        if let Key::Own(n, true) = r.key {
            let rjob = r.rjob % count;
            let key = format!("jobset.sigs.k8s.io/own-{n}");
            let map = if r.label { "labels" } else { "annotations" };
            pod_metadata(&mut base, rjob)
                .entry(map)
                .or_insert(json!({}))[&key] = json!("x");
            own[rjob].push(key);
        }
    }
    let coordinator = base["spec"].get("coordinator").is_some();
    let mut with = base.clone();
    let mut touched = Vec::new();
    let mut expected: Vec<((usize, usize, usize), String)> = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        let rjob = r.rjob % count;
        let containers = with["spec"]["replicatedJobs"][rjob]["template"]["spec"]["template"]
            ["spec"]["containers"]
            .as_array_mut()
            .unwrap();
        let c = r.container % containers.len();
        let container = containers[c].as_object_mut().unwrap();
        let before = container.get("env").and_then(Value::as_array).map(Vec::len);
        if !touched.iter().any(|(tr, tc, _)| (*tr, *tc) == (rjob, c)) {
            touched.push((rjob, c, before));
        }
        let env = container
            .entry("env")
            .or_insert(json!([]))
            .as_array_mut()
            .unwrap();
        let name = format!("REF_{i}");
        let key = format!("jobset.sigs.k8s.io/{}", key_name(&r.key));
        let (map, singular) = if r.label {
            ("labels", "label")
        } else {
            ("annotations", "annotation")
        };
        env.push(entry(&name, map, &key));
        let k = key_name(&r.key);
        let resolves = SET_BY_JOBSET.contains(&k.as_str())
            || (k == "coordinator" && coordinator)
            || own[rjob].contains(&key);
        if !resolves {
            expected.push((
                (rjob, c, env.len() - 1),
                format!(
                    "{}: {name} reads the {singular} {key}, which ",
                    path(rjob, c, env.len() - 1)
                ),
            ));
        }
    }
    expected.sort();
    (
        base,
        with,
        touched,
        expected.into_iter().map(|(_, w)| w).collect(),
    )
}

/// The admitted object with the added entries taken out again.
fn without_entries(mut object: Value, touched: &[Touched]) -> Value {
    for (r, c, before) in touched {
        let container = object["spec"]["replicatedJobs"][*r]["template"]["spec"]["template"]
            ["spec"]["containers"][*c]
            .as_object_mut()
            .unwrap();
        match before {
            Some(n) => container["env"].as_array_mut().unwrap().truncate(*n),
            None => {
                container.remove("env");
            }
        }
    }
    object
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_warning_exactly_for_each_reference_that_never_resolves(
        shape in gen::shape(),
        refs in prop::collection::vec(reference(), 0..6),
    ) {
        let (base, with, touched, expected) = place(&shape, &refs);
        let plain = create(&base, &no_settings());
        let got = create(&with, &no_settings());
        // Past 10 warnings a response sums up the rest (a_response_carries_at_most_ten_warnings
        // in warnings.rs): each one is compared here where all are given.
        prop_assume!(!got.warnings.last().is_some_and(|w| w.starts_with("… and ")));
        prop_assert_eq!(got.accepted, plain.accepted);
        prop_assert_eq!(&got.message, &plain.message);
        prop_assert_eq!(got.code, plain.code);
        // The narrowing's warnings (docs/contributing/spec.md §4.7) come last, and the entries change none.
        let (got_warnings, got_narrowed) = split_narrowing(&got.warnings);
        let (plain_warnings, plain_narrowed) = split_narrowing(&plain.warnings);
        prop_assert_eq!(got_narrowed, plain_narrowed);
        let n = plain_warnings.len();
        prop_assert!(got_warnings.len() >= n, "{:?}", got_warnings);
        prop_assert_eq!(&got_warnings[..n], &plain_warnings[..]);
        let extra = &got_warnings[n..];
        prop_assert_eq!(extra.len(), expected.len(), "{:?} vs {:?}", extra, expected);
        for (w, prefix) in extra.iter().zip(&expected) {
            prop_assert!(w.starts_with(prefix.as_str()), "{} does not start with {}", w, prefix);
            prop_assert!(w.contains(EMPTY), "{}", w);
        }
        prop_assert_eq!(
            without_entries(patched(&with, &got), &touched),
            patched(&base, &plain)
        );
    }
}

/// Every `batch.kubernetes.io/` key the spec counts as set on a plain Job's pods.
const SET_BY_JOB_CONTROLLER: [&str; 5] = [
    "job-name",
    "job-completion-index",
    "controller-uid",
    "job-index-failure-count",
    "job-index-ignored-failure-count",
];

#[derive(Debug, Clone)]
enum JobKey {
    /// `batch.kubernetes.io/` + one of SET_BY_JOB_CONTROLLER, or any other suffix.
    Batch(Result<usize, String>),
    /// `jobset.sigs.k8s.io/` + a key JobSet sets on its own pods, or a typo.
    JobSet(Key),
    /// `jobset.sigs.k8s.io/own-<n>`, set by the template itself when the flag says so.
    Own(u8, bool),
}

fn job_key() -> impl Strategy<Value = JobKey> {
    prop_oneof![
        (0..SET_BY_JOB_CONTROLLER.len()).prop_map(|i| JobKey::Batch(Ok(i))),
        prop_oneof![
            Just("job-completion-idx".to_string()),
            Just("jobname".to_string()),
            "[a-z]{1,10}(-[a-z]{1,8})?",
        ]
        .prop_map(|t| JobKey::Batch(Err(t))),
        key().prop_map(JobKey::JobSet),
        (0u8..3, any::<bool>()).prop_map(|(n, set)| JobKey::Own(n, set)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The same property on opted-in plain Jobs (docs/contributing/spec.md §4.6): no JobSet owns them, so every
    /// `jobset.sigs.k8s.io/` key the template does not set itself is missing.
    #[test]
    fn a_plain_job_warns_exactly_for_each_reference_that_never_resolves(
        shape in gen::jobs::job_shape(),
        refs in prop::collection::vec((0usize..4, any::<bool>(), job_key()), 0..6),
    ) {
        let mut base = gen::jobs::build_job(&shape);
        for (_, label, key) in &refs {
            if let JobKey::Own(n, true) = key {
                let map = if *label { "labels" } else { "annotations" };
                base["spec"]["template"]["metadata"][map][format!("jobset.sigs.k8s.io/own-{n}")] = json!("x");
            }
        }
        let mut with = base.clone();
        let containers = with["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap();
        let before: Vec<Option<usize>> = containers
            .iter()
            .map(|c| c.get("env").and_then(Value::as_array).map(Vec::len))
            .collect();
        let mut expected = Vec::new();
        for (i, (c, label, key)) in refs.iter().enumerate() {
            let c = c % containers.len();
            let full = match key {
                JobKey::Batch(Ok(k)) => format!("batch.kubernetes.io/{}", SET_BY_JOB_CONTROLLER[*k]),
                JobKey::Batch(Err(t)) => format!("batch.kubernetes.io/{t}"),
                JobKey::JobSet(k) => format!("jobset.sigs.k8s.io/{}", key_name(k)),
                JobKey::Own(n, _) => format!("jobset.sigs.k8s.io/own-{n}"),
            };
            let set_by_template = base["spec"]["template"]["metadata"]
                .as_object()
                .is_some_and(|m| m.values().any(|v| v.get(&full).is_some()));
            let resolves = set_by_template
                || full
                    .strip_prefix("batch.kubernetes.io/")
                    .is_some_and(|k| SET_BY_JOB_CONTROLLER.contains(&k));
            let (map, singular) = if *label { ("labels", "label") } else { ("annotations", "annotation") };
            let env = containers[c].as_object_mut().unwrap().entry("env").or_insert(json!([])).as_array_mut().unwrap();
            let name = format!("REF_{i}");
            env.push(entry(&name, map, &full));
            if !resolves {
                expected.push((
                    (c, env.len() - 1),
                    format!("spec.template.spec.containers[{c}].env[{}]: {name} reads the {singular} {full}, which ", env.len() - 1),
                ));
            }
        }
        expected.sort();
        let plain = job_create(&base, &no_settings());
        let got = job_create(&with, &no_settings());
        prop_assume!(!got.warnings.last().is_some_and(|w| w.starts_with("… and ")));
        prop_assert_eq!(got.accepted, plain.accepted);
        prop_assert_eq!(&got.message, &plain.message);
        let n = plain.warnings.len();
        prop_assert!(got.warnings.len() >= n, "{:?}", got.warnings);
        prop_assert_eq!(&got.warnings[..n], &plain.warnings[..]);
        let extra = &got.warnings[n..];
        prop_assert_eq!(extra.len(), expected.len(), "{:?} vs {:?}", extra, expected);
        for (w, (_, prefix)) in extra.iter().zip(&expected) {
            prop_assert!(w.starts_with(prefix.as_str()), "{} does not start with {}", w, prefix);
            prop_assert!(w.contains(EMPTY), "{}", w);
        }
        let mut admitted = patched(&with, &got);
        for (c, len) in before.iter().enumerate() {
            let container = admitted["spec"]["template"]["spec"]["containers"][c].as_object_mut().unwrap();
            match len {
                Some(len) => container["env"].as_array_mut().unwrap().truncate(*len),
                None => {
                    container.remove("env");
                }
            }
        }
        prop_assert_eq!(admitted, patched(&base, &plain));
    }
}
