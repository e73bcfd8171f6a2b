//! P1–P3 through the module (docs/rules.md): every member of a JAX group of a JobSet opted in
//! by its own annotation is Indexed, runs every pod at once, and holds a `spec.coordinator`
//! below its parallelism, so that the JAX process ids are exactly 0..N-1; a member that does
//! not, alone in its group beside a JAX group that does, is a batch job beside the JAX run.
//! Under `jaxEnv: always` without that annotation such a member gets no JAX env and a warning.
use crate::common::*;
use multislice_gen::rule_fixtures::fixture;
use multislice_host::controller::{self, as_served, JobSetApi};
use multislice_host::env::resolve;
use multislice_host::request::{admission_request, Kind};
use multislice_host::Outcome;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const OPT_IN: &str = "multislice.kubewarden.io/jax-distributed";
const FACTS: &str = "multislice.kubewarden.io/facts";

fn create(jobset: &Value, settings: &Value) -> Outcome {
    validate(
        &admission_request(Kind::JobSet, "CREATE", jobset, None),
        settings,
    )
}

/// Every container's resolved env of every pod of the admitted JobSet, by hostname.
fn pod_envs(admitted: &Value, settings: &Value) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out = BTreeMap::new();
    for sim in controller::jobset_pods(admitted).unwrap() {
        let outcome = validate(
            &admission_request(Kind::Pod, "CREATE", &sim.object, None),
            settings,
        );
        assert!(outcome.accepted, "{}: {:?}", sim.hostname, outcome.message);
        assert_eq!(outcome.warnings, Vec::<String>::new(), "{}", sim.hostname);
        let pod = patched(&sim.object, &outcome);
        let containers = pod["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1);
        out.insert(sim.hostname, resolve(&pod, &containers[0]).unwrap());
    }
    out
}

/// Every container's resolved env of a pod, the JAX variables of one process.
type Env = Vec<(String, String)>;

fn jax(coordinator: &str, n: u32, id: u32) -> Env {
    vec![
        (
            "JAX_COORDINATOR_ADDRESS".into(),
            format!("{coordinator}:6666"),
        ),
        ("JAX_NUM_PROCESSES".into(), n.to_string()),
        ("JAX_PROCESS_ID".into(), id.to_string()),
    ]
}

/// P1's and P2's near misses: the member in a group of its own is a batch job beside the JAX
/// run. Its pods get no JAX env, and the JAX group numbers 0..N-1 without it.
#[test]
fn a_batch_job_beside_the_jax_run_gets_no_jax_env_and_the_run_numbers_without_it() {
    let cases: [(&str, Vec<(&str, Env)>); 2] = [
        (
            "p1-pass",
            vec![
                ("p1-pass-head-0-0", jax("p1-pass-head-0-0.p1-pass", 3, 0)),
                ("p1-pass-workers-0-0", jax("p1-pass-head-0-0.p1-pass", 3, 1)),
                ("p1-pass-workers-0-1", jax("p1-pass-head-0-0.p1-pass", 3, 2)),
                ("p1-pass-stats-0-0", vec![]),
            ],
        ),
        (
            "p2-pass",
            vec![
                (
                    "p2-pass-workers-0-0",
                    jax("p2-pass-workers-0-0.p2-pass", 4, 0),
                ),
                (
                    "p2-pass-workers-0-1",
                    jax("p2-pass-workers-0-0.p2-pass", 4, 1),
                ),
                (
                    "p2-pass-workers-1-0",
                    jax("p2-pass-workers-0-0.p2-pass", 4, 2),
                ),
                (
                    "p2-pass-workers-1-1",
                    jax("p2-pass-workers-0-0.p2-pass", 4, 3),
                ),
                ("p2-pass-eval-0-0", vec![]),
                ("p2-pass-eval-0-1", vec![]),
            ],
        ),
    ];
    for (name, want) in cases {
        let jobset = fixture(name);
        let outcome = create(&jobset, &no_settings());
        assert!(outcome.accepted, "{name}: {:?}", outcome.message);
        let admitted = patched(&jobset, &outcome);
        let want: BTreeMap<String, Vec<(String, String)>> = want
            .into_iter()
            .map(|(host, env)| (host.to_string(), env))
            .collect();
        assert_eq!(pod_envs(&admitted, &no_settings()), want, "{name}");
    }
}

/// A CPU JobSet without the JAX opt-in: "train" (1 × 2) and the NonIndexed "prep" in the
/// default group.
fn unannotated() -> Value {
    let rjob = |name: &str, parallelism: u32, mode: Option<&str>| {
        let mut spec = json!({"parallelism": parallelism, "completions": parallelism,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "python:3.12"}]}}});
        if let Some(mode) = mode {
            spec["completionMode"] = json!(mode);
        }
        json!({"name": name, "replicas": 1, "template": {"spec": spec}})
    };
    as_served(
        &json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "etl", "namespace": "ml"},
            "spec": {"replicatedJobs": [rjob("train", 2, None), rjob("prep", 1, Some("NonIndexed"))]}}),
        JobSetApi::V09,
    )
}

#[test]
fn jax_env_always_leaves_out_a_member_that_breaks_p_rules_with_one_warning_in_the_pair() {
    let jobset = unannotated();
    let warning = "spec.replicatedJobs[1].template.spec.completionMode (replicated job \"prep\"): \
                   is \"NonIndexed\", so under jaxEnv: always its pods get no JAX env";
    let mut stamped = jobset.clone();
    stamped["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = json!({
        "annotations": {FACTS: r#"{"jax":{"total":2,"offset":0,"coordinator":"train-0-0"},"podsPerJob":2}"#}
    });
    for (role, warned, mutated) in [
        ("both", true, Some(&stamped)),
        ("validate", true, None),
        ("mutate", false, Some(&stamped)),
    ] {
        let settings = json!({"jaxEnv": "always", "role": role});
        let outcome = create(&jobset, &settings);
        assert!(outcome.accepted, "{role}: {:?}", outcome.message);
        let warnings: Vec<&str> = if warned { vec![warning] } else { vec![] };
        assert_eq!(outcome.warnings, warnings, "{role}");
        assert_eq!(outcome.mutated_object.as_ref(), mutated, "{role}");
    }
    let settings = json!({"jaxEnv": "always"});
    let want: BTreeMap<String, Vec<(String, String)>> = [
        ("etl-train-0-0", jax("etl-train-0-0.etl", 2, 0)),
        ("etl-train-0-1", jax("etl-train-0-0.etl", 2, 1)),
        ("etl-prep-0-0", vec![]),
    ]
    .into_iter()
    .map(|(h, e)| (h.to_string(), e))
    .collect();
    assert_eq!(pod_envs(&stamped, &settings), want);
    // With the JobSet's own opt-in the same member is refused: it shares the group.
    let mut annotated = jobset.clone();
    annotated["metadata"]["annotations"] = json!({OPT_IN: "true"});
    let outcome = create(&annotated, &settings);
    assert_eq!(
        outcome.message.as_deref(),
        Some("[P1] spec.replicatedJobs[1].template.spec.completionMode (replicated job \"prep\"): is \"NonIndexed\", so its pods have no completion index to take a JAX process id from; remove it or set it to Indexed; or, if its pods run no JAX while other replicated jobs do, give it a groupName of its own; see docs/rules.md, P1")
    );
}

/// TPU members are T1's and T2's: P1 and P2 say nothing of the same fields.
#[test]
fn a_tpu_member_is_refused_by_t_rules_alone() {
    for (fixture_name, rule) in [("t1-fail", "[T1] "), ("t2-fail", "[T2] ")] {
        let mut jobset = fixture(fixture_name);
        jobset["metadata"]["annotations"][OPT_IN] = json!("true");
        let outcome = create(&jobset, &no_settings());
        let message = outcome.message.unwrap_or_default();
        assert!(!message.is_empty(), "{fixture_name} accepted");
        for line in message.lines() {
            assert!(line.starts_with(rule), "{fixture_name}: {line}");
        }
    }
}

/// One generated member: replicas, parallelism, completions, completion mode, group.
#[derive(Debug, Clone)]
struct Member {
    replicas: u32,
    parallelism: u32,
    completions: Option<u32>,
    mode: Option<&'static str>,
    group: &'static str,
}

fn member() -> impl Strategy<Value = Member> {
    (
        0..3u32,
        1..4u32,
        0..4u32,
        prop::sample::select(vec![None, Some("Indexed"), Some("NonIndexed")]),
        prop::sample::select(vec!["default", "side"]),
    )
        .prop_map(|(replicas, parallelism, c, mode, group)| Member {
            replicas,
            parallelism,
            // Mostly all at once, else one fewer or more, or unset.
            completions: match c {
                0 | 1 => Some(parallelism),
                2 => Some(parallelism + 1),
                _ => (parallelism > 1).then(|| parallelism - 1),
            },
            mode,
            group,
        })
}

/// What docs/rules.md says of one generated JobSet: whether P1–P3 refuse it, and which
/// members are batch jobs beside the JAX run (no JAX env).
fn expected(
    members: &[Member],
    coordinator: Option<(usize, u32)>,
    opted_in: bool,
) -> (bool, Vec<bool>) {
    let keeps = |i: usize| {
        let m = &members[i];
        m.replicas == 0
            || (m.mode != Some("NonIndexed")
                && m.completions == Some(m.parallelism)
                && coordinator.is_none_or(|(c, pod)| c != i || pod < m.parallelism))
    };
    let in_group = |g: &'static str| (0..members.len()).filter(move |&i| members[i].group == g);
    let good_group = ["default", "side"]
        .iter()
        .any(|g| in_group(g).any(|i| members[i].replicas > 0) && in_group(g).all(keeps));
    let batch: Vec<bool> = (0..members.len())
        .map(|i| {
            let alone = in_group(members[i].group).all(|o| o == i || members[o].replicas == 0);
            !keeps(i) && (!opted_in || (alone && good_group))
        })
        .collect();
    let refused = (0..members.len()).any(|i| !keeps(i) && !batch[i]);
    (refused, batch)
}

fn generated_jobset(
    members: &[Member],
    coordinator: Option<(usize, u32)>,
    opted_in: bool,
) -> Value {
    let rjobs: Vec<Value> = members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut spec = json!({"parallelism": m.parallelism,
                "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "jax", "image": "python:3.12"}]}}});
            if let Some(c) = m.completions {
                spec["completions"] = json!(c);
            }
            if let Some(mode) = m.mode {
                spec["completionMode"] = json!(mode);
            }
            json!({"name": format!("r{i}"), "groupName": m.group, "replicas": m.replicas,
                "template": {"spec": spec}})
        })
        .collect();
    let mut jobset = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "gen", "namespace": "ml"},
        "spec": {"replicatedJobs": rjobs}});
    if opted_in {
        jobset["metadata"]["annotations"] = json!({OPT_IN: "true"});
    }
    if let Some((i, pod)) = coordinator {
        jobset["spec"]["coordinator"] = json!({"replicatedJob": format!("r{i}"), "podIndex": pod});
    }
    jobset
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Wherever a generated CPU JAX JobSet is admitted, the pods that get the JAX env number
    /// exactly 0..N-1 in each JAX group, N being JAX_NUM_PROCESSES, process 0 being the
    /// coordinator; the batch jobs beside the run get none; and P1–P3 refuse exactly the rest.
    #[test]
    fn admitted_jax_jobsets_number_their_processes_0_to_n(
        members in prop::collection::vec(member(), 1..4),
        coordinator in prop::option::of((0..3usize, 0..3u32)),
        opted_in in any::<bool>(),
    ) {
        let coordinator = coordinator.filter(|(i, _)| *i < members.len());
        let jobset = generated_jobset(&members, coordinator, opted_in);
        let settings = json!({"jaxEnv": if opted_in { "annotated" } else { "always" }});
        let outcome = create(&jobset, &settings);
        let message = outcome.message.clone().unwrap_or_default();
        // A coordinator that names no pod is bad input, refused before any rule.
        prop_assume!(!message.starts_with("spec.coordinator."));
        let (refused, batch) = expected(&members, coordinator, opted_in);
        prop_assert_eq!(!outcome.accepted, refused, "{}", message);
        for line in message.lines() {
            prop_assert!(["[P1] ", "[P2] ", "[P3] "].iter().any(|p| line.starts_with(p)), "{}", line);
        }
        prop_assume!(outcome.accepted);
        let admitted = patched(&jobset, &outcome);
        let mut groups: BTreeMap<String, (String, BTreeSet<u32>, usize)> = BTreeMap::new();
        for sim in controller::jobset_pods(&admitted).unwrap() {
            let pod_outcome = validate(&admission_request(Kind::Pod, "CREATE", &sim.object, None), &settings);
            prop_assert!(pod_outcome.accepted);
            let pod = patched(&sim.object, &pod_outcome);
            let env: BTreeMap<String, String> = resolve(&pod, &pod["spec"]["containers"][0]).unwrap().into_iter().collect();
            let i: usize = sim.replicated_job[1..].parse().unwrap();
            if batch[i] {
                prop_assert!(env.is_empty(), "{}: {:?}", sim.hostname, env);
                continue;
            }
            let n = env["JAX_NUM_PROCESSES"].clone();
            let id: u32 = env["JAX_PROCESS_ID"].parse().unwrap();
            let entry = groups.entry(members[i].group.to_string()).or_insert((n.clone(), BTreeSet::new(), 0));
            prop_assert_eq!(&entry.0, &n);
            prop_assert!(entry.1.insert(id), "{}: id {} repeats", sim.hostname, id);
            entry.2 += 1;
            if id == 0 {
                prop_assert_eq!(env["JAX_COORDINATOR_ADDRESS"].clone(), format!("{}.gen:6666", sim.hostname));
            }
        }
        for (group, (n, ids, pods)) in &groups {
            let n: u32 = n.parse().unwrap();
            prop_assert_eq!(ids, &(0..n).collect::<BTreeSet<u32>>(), "group {}", group);
            prop_assert_eq!(*pods, n as usize, "group {}", group);
        }
    }
}
