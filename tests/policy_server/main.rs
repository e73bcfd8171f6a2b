//! Two hosts, one answer: the annotated policy inside Kubewarden's own policy-server, under
//! several settings, answers every AdmissionReview exactly as the waPC harness answers the
//! same request (allowed, status message and code, decoded patch, warnings).
//!
//! Needs policy-server (`POLICY_SERVER`, else on PATH, else in ../shared/tools) and
//! `annotated-policy.wasm` (kwctl), so `cargo test` does not build it by default (`test =
//! false` in Cargo.toml): `make e2e-tests` runs it where both are installed, and prints one
//! `skipped:` line where they are not. A kwctl-only test: it tests the host, and the answers it
//! compares are the harness's own, which `make test` checks.
use multislice_host::controller::{self, JobSetApi};
use multislice_host::fixtures::{self, load_json};
use multislice_host::policy_server_client::{PolicyServer, ServedPolicy};
use multislice_host::request::{admission_request, Kind};
use multislice_host::review::ReviewResponse;
use multislice_host::runner::apply;
use multislice_host::{default_wasm_path, workspace_root, Policy};
use serde_json::{json, Value};

/// The policy ids the server runs, with their settings and whether they are deployed as
/// mutating policies. The recommended pair (docs/contributing/spec.md §5): the validating half is deployed with
/// `mutating: false`, so policy-server would refuse any patch it returned.
fn settings() -> Vec<(&'static str, Value, bool)> {
    vec![
        ("defaults", json!({}), true),
        (
            "host-env-jax-always",
            json!({"tpuWorkerEnv": true, "jaxEnv": "always"}),
            true,
        ),
        (
            "strict-accelerators",
            json!({"rejectUnknownAccelerators": true}),
            true,
        ),
        ("jax-never", json!({"jaxEnv": "never"}), true),
        ("pair-mutate", json!({"role": "mutate"}), true),
        ("pair-validate", json!({"role": "validate"}), false),
    ]
}

/// Every request sent, named: JobSet CREATE and UPDATE, plain Job CREATE and UPDATE (docs/contributing/spec.md
/// §4.6), and pods of JobSets, of opted-in Jobs, and plain pods.
fn requests(harness: &Policy) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for name in [
        "tpu-4-slices",
        "jax-gpu",
        "tpu7x-two-containers",
        "user-set-env",
    ] {
        out.push((
            format!("JobSet CREATE {name}"),
            fixtures::load_json(&fixtures::jobset_request_path(name, JobSetApi::V09)).unwrap(),
        ));
    }
    for rule in ["t2-fail", "x4-fail", "t4-unknown-accelerator"] {
        out.push((
            format!("JobSet CREATE rule {rule}"),
            load_json(&fixtures::rule_request_path(rule)).unwrap(),
        ));
    }
    // UPDATEs: one that changes nothing, and one that unsuspends a JobSet whose topology does
    // not fit (T4 waited while it was suspended).
    let js = load_json(&fixtures::jobset_request_path(
        "tpu-4-slices",
        JobSetApi::V09,
    ))
    .unwrap()["object"]
        .clone();
    out.push((
        "JobSet UPDATE unchanged".into(),
        admission_request(Kind::JobSet, "UPDATE", &js, Some(&js)),
    ));
    let bad = load_json(&fixtures::rule_request_path("t4-fail")).unwrap()["object"].clone();
    let mut suspended = bad.clone();
    suspended["spec"]["suspend"] = json!(true);
    let mut resumed = bad;
    resumed["spec"]["suspend"] = json!(false);
    out.push((
        "JobSet UPDATE unsuspend rule t4-fail".into(),
        admission_request(Kind::JobSet, "UPDATE", &resumed, Some(&suspended)),
    ));
    // Pods as the controllers make them from the admitted JobSet (default settings), so they
    // carry the facts the JobSet admission stamped.
    for name in ["tpu-4-slices", "jax-gpu", "tpu7x-two-containers"] {
        let request = load_json(&fixtures::jobset_request_path(name, JobSetApi::V09)).unwrap();
        let outcome = harness.validate(&request, &json!({})).unwrap();
        let admitted = match &outcome.patch {
            Some(p) => apply(&request["object"], p).unwrap(),
            None => request["object"].clone(),
        };
        for pod in controller::jobset_pods(&admitted).unwrap() {
            out.push((
                format!("Pod CREATE {}", pod.hostname),
                admission_request(Kind::Pod, "CREATE", &pod.object, None),
            ));
        }
    }
    // Every plain Job fixture: opted in (stamped, or rejected by J1-J3), not opted in, and a
    // JobSet's child.
    for name in fixtures::job_names().unwrap() {
        out.push((
            format!("Job CREATE {name}"),
            load_json(&fixtures::job_request_path(name.as_str())).unwrap(),
        ));
    }
    // Job UPDATEs of the admitted opted-in Job: one that changes nothing the policy judges,
    // and an elastic resize (rejected while the JAX env is on).
    let request = load_json(&fixtures::job_request_path("jax-gpu-4")).unwrap();
    let outcome = harness.validate(&request, &json!({})).unwrap();
    let job = match &outcome.patch {
        Some(p) => apply(&request["object"], p).unwrap(),
        None => request["object"].clone(),
    };
    let mut relabelled = job.clone();
    relabelled["metadata"]["labels"] = json!({"team": "ml"});
    out.push((
        "Job UPDATE labels only".into(),
        admission_request(Kind::Job, "UPDATE", &relabelled, Some(&job)),
    ));
    let mut resized = job.clone();
    resized["spec"]["completions"] = json!(8);
    resized["spec"]["parallelism"] = json!(8);
    out.push((
        "Job UPDATE elastic resize".into(),
        admission_request(Kind::Job, "UPDATE", &resized, Some(&job)),
    ));
    // Pods as the Job controller makes them from the admitted opted-in Jobs (default
    // settings), so they carry the facts the Job admission stamped.
    for name in ["jax-gpu-4", "tpu7x-two-containers"] {
        let request = load_json(&fixtures::job_request_path(name)).unwrap();
        let outcome = harness.validate(&request, &json!({})).unwrap();
        let admitted = match &outcome.patch {
            Some(p) => apply(&request["object"], p).unwrap(),
            None => request["object"].clone(),
        };
        for pod in controller::indexed_job_pods(&admitted).unwrap() {
            out.push((
                format!("Pod CREATE of Job {}", pod.hostname),
                admission_request(Kind::Pod, "CREATE", &pod.object, None),
            ));
        }
    }
    for name in ["tpu-slice-pod", "not-a-jobset-pod"] {
        out.push((
            format!("Pod CREATE fixture {name}"),
            load_json(&fixtures::pod_request_path(name)).unwrap(),
        ));
    }
    out
}

#[test]
fn policy_server_answers_every_review_as_the_wapc_harness_does() {
    let harness = Policy::load(&default_wasm_path()).unwrap_or_else(|e| panic!("{e:#}"));
    let annotated = workspace_root().join("annotated-policy.wasm");
    let served: Vec<ServedPolicy> = settings()
        .into_iter()
        .map(|(id, settings, allowed_to_mutate)| {
            ServedPolicy::cluster_wide(id, annotated.clone(), settings, allowed_to_mutate).unwrap()
        })
        .collect();
    let server = PolicyServer::start(&served, None).unwrap_or_else(|e| panic!("{e:#}"));

    let requests = requests(&harness);
    let (mut patched, mut rejected, mut warned, mut settings_mattered) = (0, 0, 0, 0);
    for (name, request) in &requests {
        let mut verdicts = Vec::new();
        for policy in &served {
            let expected = ReviewResponse::from_outcome(
                &harness
                    .validate(request, &policy.settings)
                    .unwrap_or_else(|e| panic!("{name}: {e:#}")),
            );
            let response = server
                .review(&policy.id, request)
                .unwrap_or_else(|e| panic!("{name} ({}): {e:#}", policy.id));
            let got = ReviewResponse::from_response(&response)
                .unwrap_or_else(|e| panic!("{name} ({}): {e:#}", policy.id));
            assert_eq!(got, expected, "{name} under {}", policy.id);
            patched += usize::from(expected.patch.is_some());
            rejected += usize::from(!expected.allowed);
            warned += usize::from(!expected.warnings.is_empty());
            verdicts.push(expected);
        }
        settings_mattered += usize::from(verdicts.windows(2).any(|w| w[0] != w[1]));
    }
    // The comparison covers each kind of answer, and settings that change the answer.
    println!(
        "{} requests x {} settings: {patched} patched, {rejected} rejected, {warned} with \
         warnings, {settings_mattered} requests answered differently under different settings",
        requests.len(),
        served.len()
    );
    assert!(patched >= 10 && rejected >= 3 && warned >= 2 && settings_mattered >= 5);
}

#[test]
fn policy_server_refuses_an_unknown_policy_id() {
    let annotated = workspace_root().join("annotated-policy.wasm");
    let server = PolicyServer::start(
        &[ServedPolicy::cluster_wide("defaults", annotated, json!({}), true).unwrap()],
        Some(1),
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    let request = load_json(&fixtures::pod_request_path("not-a-jobset-pod")).unwrap();
    assert!(server.review("no-such-policy", &request).is_err());
    assert!(server.review("defaults", &request).is_ok());
}

/// What a role bug would look like in a cluster: the role `both` (which mutates) deployed with
/// `mutating: false`. policy-server refuses the request rather than drop the patch; the
/// harness's webhook host answers the same (host/src/webhook_server.rs), so the cluster tests would
/// catch a `validate` role that mutates.
#[test]
fn policy_server_refuses_a_patch_from_a_policy_not_allowed_to_mutate() {
    let annotated = workspace_root().join("annotated-policy.wasm");
    let policies = [
        ("both-not-mutating", json!({})),
        ("validate", json!({"role": "validate"})),
    ]
    .map(|(id, settings)| {
        ServedPolicy::cluster_wide(id, annotated.clone(), settings, false).unwrap()
    });
    let server = PolicyServer::start(&policies, Some(1)).unwrap_or_else(|e| panic!("{e:#}"));
    let request = load_json(&fixtures::jobset_request_path(
        "tpu-4-slices",
        JobSetApi::V09,
    ))
    .unwrap();
    let refused =
        ReviewResponse::from_response(&server.review("both-not-mutating", &request).unwrap())
            .unwrap();
    // policy-server keeps the rest of the policy's answer: its warnings.
    let harness = Policy::load(&default_wasm_path()).unwrap_or_else(|e| panic!("{e:#}"));
    let answered = harness.validate(&request, &json!({})).unwrap();
    assert!(answered.patch.is_some(), "the fixture must be mutated");
    assert_eq!(
        refused,
        ReviewResponse {
            allowed: false,
            message: Some("Request rejected by policy both-not-mutating. The policy attempted to mutate the request, but it is currently configured to not allow mutations.".into()),
            code: None,
            patch: None,
            warnings: answered.warnings,
        }
    );
    let judged =
        ReviewResponse::from_response(&server.review("validate", &request).unwrap()).unwrap();
    assert!(judged.allowed && judged.patch.is_none(), "{judged:?}");
}

/// The queue check's lookups inside policy-server (1.35 and later) pass two checks before they
/// reach the Kubernetes client: the host capability `kubernetes/get_resource`, which the v1.35
/// controller grants every cluster-wide policy with `hostCapabilities: ["*"]`, and the kind, which
/// `contextAwareResources` must list. Served as that controller serves a ClusterAdmissionPolicy,
/// the lookup gets past both and reaches the client (none here: this policy-server runs with
/// `--ignore-kubernetes-connection-failure` and no cluster); without either grant, the warning
/// names the grant that is missing. A queue that was not checked is a warning, never a refusal.
#[test]
fn policy_server_lets_the_queue_check_through_only_with_both_grants() {
    let annotated = workspace_root().join("annotated-policy.wasm");
    let settings = json!({"role": "validate", "queueCheck": "refuse"});
    let granted =
        ServedPolicy::cluster_wide("granted", annotated.clone(), settings.clone(), false).unwrap();
    let no_capability = ServedPolicy {
        id: "no-host-capabilities".into(),
        host_capabilities: Vec::new(),
        ..granted.clone()
    };
    let no_kinds = ServedPolicy {
        id: "no-context-aware-resources".into(),
        context_aware_resources: Default::default(),
        ..granted.clone()
    };
    let server = PolicyServer::start(&[granted, no_capability, no_kinds], Some(1))
        .unwrap_or_else(|e| panic!("{e:#}"));
    let jobset =
        fixtures::load_yaml(&workspace_root().join("test_data/queue/jobset.yaml")).unwrap();
    let request = admission_request(Kind::JobSet, "CREATE", &jobset, None);
    let not_checked = "metadata.labels[\"kueue.x-k8s.io/queue-name\"]: queue \"team-a/tpu-queue\" \
                       was not checked: reading LocalQueue \"tpu-queue\" in namespace \"team-a\" \
                       failed: ";
    for (id, reason) in [
        (
            "granted",
            "Callback evaluation failure: kube::Client was not initialized properly",
        ),
        (
            "no-host-capabilities",
            "Policy has not been granted access to the 'kubernetes/get_resource' host capability. \
             The violation has been reported.",
        ),
        (
            "no-context-aware-resources",
            "Policy has not been granted access to Kubernetes kueue.x-k8s.io/v1beta2/LocalQueue \
             resources. The violation has been reported.",
        ),
    ] {
        let answer = ReviewResponse::from_response(&server.review(id, &request).unwrap()).unwrap();
        assert!(answer.allowed && answer.patch.is_none(), "{id}: {answer:?}");
        // A warning is at most 256 characters, cut with "…" (docs/contributing/spec.md §4.2).
        let mut warning = format!("{not_checked}{reason}");
        if warning.chars().count() > 256 {
            warning = warning.chars().take(255).collect();
            warning.push('…');
        }
        assert!(
            answer.warnings.contains(&warning),
            "{id}: no warning {warning:?} in {:?}",
            answer.warnings
        );
    }
}

/// policy-server reads a review body of at most 2 MiB (axum's default limit, 2,097,152 bytes)
/// and answers a larger one with HTTP 413 before any policy runs; the API server then counts a
/// failed call (docs/operations.md "Troubleshooting"). Just under the limit, the policy answers.
#[test]
fn policy_server_refuses_a_review_over_2_mib() {
    let annotated = workspace_root().join("annotated-policy.wasm");
    let server = PolicyServer::start(
        &[ServedPolicy::cluster_wide("defaults", annotated, json!({}), true).unwrap()],
        Some(1),
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    let mut request = load_json(&fixtures::pod_request_path("not-a-jobset-pod")).unwrap();
    for (body, answered) in [(2_097_152 - 1024, true), (2_097_152 + 1, false)] {
        // An annotation whose value ('x's, one byte each in JSON) fills the review to `body`.
        request["object"]["metadata"]["annotations"] = json!({"example.com/filler": ""});
        let filler = "x".repeat(body - PolicyServer::review_body(&request).len());
        request["object"]["metadata"]["annotations"] = json!({"example.com/filler": filler});
        assert_eq!(PolicyServer::review_body(&request).len(), body);
        let answer = server.review("defaults", &request);
        if answered {
            assert!(answer.is_ok(), "{body} bytes: {answer:?}");
        } else {
            let error = format!("{:#}", answer.unwrap_err());
            assert!(error.contains("HTTP 413"), "{body} bytes: {error}");
        }
    }
}
