//! Every non-TPU member of a JAX group of a JobSet opted in by its own annotation is exactly one
//! of: a batch job beside the JAX run, refused by P1–P3, or a JAX member that keeps them
//! (docs/rules.md, P1), for every mode × completions (unset, 0–3) × parallelism (0–3) × replicas
//! (0–2) × coordinator (none, pod 0–4 of its job 0), alone in its group or beside a member that
//! keeps them, through JobSet CREATE. The expectation is written from docs/rules.md P1–P3 alone;
//! a coordinator that names no pod is an input error (rules.md, Validation).
use jobset_multislice_policy::admission::evaluate;
use multislice_host::request::{admission_request, Kind};
use serde_json::{json, Value};

/// What the policy made of the member `m`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Class {
    /// No JAX env, a warning, and no refusal for it.
    BatchBesideJax,
    /// Refused by exactly these of P1–P3.
    Refused(Vec<&'static str>),
    /// Neither: one of the JAX processes.
    Keeps,
    /// `spec.coordinator` names no pod of it.
    InputError,
}

#[derive(Debug, Clone, Copy)]
struct Member {
    mode: Option<&'static str>,
    completions: Option<u32>,
    parallelism: u32,
    replicas: u32,
    /// The coordinator's `podIndex` in job 0 of `m`.
    coordinator: Option<u32>,
    /// Alone in a group of its own, or in the group of `train`, which keeps P1–P3.
    alone: bool,
}

fn container() -> Value {
    json!([{"name": "jax", "image": "jax:cpu", "command": ["python3", "train.py"]}])
}

fn jobset(m: &Member) -> Value {
    let mut spec = json!({"parallelism": m.parallelism, "template": {"spec": {
        "restartPolicy": "Never", "containers": container()}}});
    if let Some(mode) = m.mode {
        spec["completionMode"] = json!(mode);
    }
    if let Some(c) = m.completions {
        spec["completions"] = json!(c);
    }
    let group = if m.alone { "side" } else { "train" };
    let train = json!({"name": "train", "groupName": "train", "replicas": 1, "template": {"spec": {
        "parallelism": 2, "completions": 2,
        "template": {"spec": {"restartPolicy": "Never", "containers": container()}}}}});
    let member = json!({"name": "m", "groupName": group, "replicas": m.replicas,
                        "template": {"spec": spec}});
    let mut js = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "run", "namespace": "ml",
                     "annotations": {"multislice.kubewarden.io/jax-distributed": "true"}},
        "spec": {"replicatedJobs": [train, member]},
    });
    if let Some(pod) = m.coordinator {
        js["spec"]["coordinator"] = json!({"replicatedJob": "m", "jobIndex": 0, "podIndex": pod});
    }
    js
}

/// docs/rules.md, P1–P3: a member with replicas breaks P1 when NonIndexed, P2 when its
/// completions are not its parallelism (unset, for an Indexed one), P3 when the coordinator is a
/// pod of it past its parallelism. One that breaks them alone in its group, beside a JAX group
/// whose members keep them (`train`), is a batch job beside the JAX run; else it is refused. A
/// coordinator past the Job's replicas or completions (parallelism, where unset) names no pod.
fn expected(m: &Member) -> Class {
    let runs = m.completions.unwrap_or(m.parallelism);
    if m.coordinator
        .is_some_and(|pod| m.replicas == 0 || pod >= runs)
    {
        return Class::InputError;
    }
    if m.replicas == 0 {
        return Class::Keeps;
    }
    let indexed = m.mode != Some("NonIndexed");
    let mut broken = Vec::new();
    if !indexed {
        broken.push("P1");
    }
    if m.completions.map_or(indexed, |c| c != m.parallelism) {
        broken.push("P2");
    }
    if m.coordinator.is_some_and(|pod| pod >= m.parallelism) {
        broken.push("P3");
    }
    match (broken.is_empty(), m.alone) {
        (true, _) => Class::Keeps,
        (false, true) => Class::BatchBesideJax,
        (false, false) => Class::Refused(broken),
    }
}

/// What the policy answered about `m`, found from the answer alone; `Err` where it is more than
/// one thing at once.
fn answered(m: &Member) -> Result<Class, String> {
    let request = admission_request(Kind::JobSet, "CREATE", &jobset(m), None);
    let payload = json!({"request": request, "settings": {}});
    let verdict = evaluate(&serde_json::to_vec(&payload).unwrap());
    let message = verdict.message.clone().unwrap_or_default();
    let about_m = |line: &str| {
        line.contains("(replicated job \"m\")") || line.contains("replicated job \"m\" runs")
    };
    let batch = verdict
        .warnings
        .iter()
        .any(|w| about_m(w) && w.contains("batch job beside the JAX run"));
    let rules: Vec<&'static str> = ["P1", "P2", "P3"]
        .into_iter()
        .filter(|r| {
            message
                .lines()
                .any(|l| l.starts_with(&format!("[{r}] ")) && about_m(l))
        })
        .collect();
    let input_error = !verdict.accepted && message.starts_with("spec.coordinator");
    match (input_error, batch, rules.is_empty()) {
        (true, false, true) => Ok(Class::InputError),
        (false, true, true) => Ok(Class::BatchBesideJax),
        (false, false, false) => Ok(Class::Refused(rules)),
        (false, false, true) if verdict.accepted => Ok(Class::Keeps),
        _ => Err(format!(
            "{batch} batch warning, rules {rules:?}, accepted {}: {message:?} {:?}",
            verdict.accepted, verdict.warnings
        )),
    }
}

#[test]
fn every_non_tpu_jax_member_is_exactly_one_of_batch_refused_or_kept() {
    let mut seen = [0usize; 4];
    for mode in [None, Some("Indexed"), Some("NonIndexed")] {
        for completions in [None, Some(0), Some(1), Some(2), Some(3)] {
            for parallelism in 0..=3 {
                for replicas in 0..=2 {
                    for coordinator in [None, Some(0), Some(1), Some(2), Some(3), Some(4)] {
                        for alone in [true, false] {
                            let m = Member {
                                mode,
                                completions,
                                parallelism,
                                replicas,
                                coordinator,
                                alone,
                            };
                            let want = expected(&m);
                            assert_eq!(answered(&m), Ok(want.clone()), "{m:?}");
                            seen[match want {
                                Class::BatchBesideJax => 0,
                                Class::Refused(_) => 1,
                                Class::Keeps => 2,
                                Class::InputError => 3,
                            }] += 1;
                        }
                    }
                }
            }
        }
    }
    // Every class is met, so that none of the four arms is left untried.
    assert!(seen.iter().all(|n| *n > 0), "{seen:?}");
    assert_eq!(seen.iter().sum::<usize>(), 3 * 5 * 4 * 3 * 6 * 2);
}
