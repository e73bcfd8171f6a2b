//! `make cluster-test`: the policy as a webhook of a real kube-apiserver, the pods made by the
//! real JobSet and Job controllers and bound by the real scheduler. One control plane serves
//! every case, in order; a case records its failures and the run goes on, then prints
//! `N passed, N failed`. On a failure the control plane's logs are kept. This file only declares
//! and runs the cases; what they share is in common.rs.
mod audit;
mod common;
mod depends_on;
mod fixtures;
mod jax;
mod kubewarden;
mod kueue;
mod labels;
mod match_conditions;
mod multikueue;
mod node_selector;
mod operations;
mod outage;
mod placement;
mod pods;
mod preview;
mod rules;
mod scale;
mod shapes;
mod unprotected;

use crate::common::{part, Report};
use crate::jax::real_jax;
use crate::rules::{bare_label, rejections, BARE_PAIR, BARE_SINGLE, RULES, RULES_SINGLE};
use crate::shapes::shapes_run;
use crate::unprotected::unprotected_runs;
use multislice_cluster::agent::NodeAgent;
use multislice_cluster::policies;
use multislice_cluster::{Binaries, ControlPlane, Options};
use std::path::Path;
use std::process::ExitCode;

pub(crate) async fn main_async() -> anyhow::Result<bool> {
    let binaries = Binaries::build()?;
    if common::named("scale") {
        // make cluster-bench: the measurement alone.
        scale::creation_time(&binaries).await?;
        return Ok(true);
    }
    let mut report = Report::default();
    // Built, and run, only where kwctl and policy-server are found (one `skipped:` line else).
    let scanner = if part("audit") {
        multislice_cluster::audit::scanner()?
    } else {
        None
    };
    if scanner.is_some()
        || [
            "kubewarden",
            "shapes",
            "rules",
            "match-conditions",
            "node-selector",
            "unprotected",
            "labels",
            "outage",
            "operations",
        ]
        .iter()
        .any(|p| part(p))
    {
        plain_cases(&binaries, scanner.as_deref(), &mut report).await?;
    }
    if [
        "kueue",
        "queue-check",
        "queue-check-v1beta2",
        "accelerators",
        "releases",
        "tas",
    ]
    .iter()
    .any(|p| part(p))
    {
        if let Err(e) = kueue::cases(&binaries, &mut report).await {
            report.record("the Kueue cases", Err(e));
        }
    }
    if part("multikueue") {
        if let Err(e) = multikueue::cases(&binaries, &mut report).await {
            report.record("the MultiKueue cases", Err(e));
        }
    }
    if part("kueue") || part("preview-queue-check") {
        // cluster-preview starts a control plane of its own, after the others have stopped.
        preview::cases(&mut report);
    }
    println!("{} passed, {} failed", report.passed, report.failed);
    Ok(report.failed == 0)
}

/// The cases on a control plane without Kueue; the audit scanner's where `scanner` is built.
pub(crate) async fn plain_cases(
    binaries: &Binaries,
    scanner: Option<&Path>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let options = Options {
        role_aggregation: scanner.is_some(),
        ..Options::default()
    };
    let mut plane = ControlPlane::start(binaries, options).await?;
    let agent = NodeAgent::start(plane.cluster.clone(), plane.remaining());
    // Labelled long before their case submits, so the API server's namespace informer has the
    // label by then.
    for (namespace, deployment) in [
        (BARE_PAIR, None),
        (BARE_SINGLE, Some(policies::SINGLE)),
        (RULES, None),
        (RULES_SINGLE, Some(policies::SINGLE)),
    ] {
        policies::namespace(&plane.cluster, namespace, deployment).await?;
    }
    node_selector::namespace(&plane).await?;
    match_conditions::namespaces(&plane).await?;
    labels::namespace(&plane).await?;
    outage::namespace(&plane).await?;
    if scanner.is_some() {
        audit::namespace(&plane).await?;
    }
    let before = report.failed;
    // First, so that the scans find little else on the cluster.
    if let Some(scanner) = scanner {
        for (name, result) in audit::cases(&mut plane, scanner).await {
            report.record(&name, result);
        }
    }
    if part("kubewarden") {
        report.record(
            "kubectl apply -k of examples/: every policy is active, and the webhook Kubewarden's controller wrote is what the example says (matchConditions, rules, namespaceSelector, failurePolicy, timeout)",
            kubewarden::policies_active(&plane).await,
        );
        report.record(
            "Kubewarden's own validator refuses protect -> monitor on the validating policy (\"Recreate instead\")",
            kubewarden::protect_to_monitor_refused(&plane).await,
        );
        report.record(
            "the host serves the controller's own policies.yml, with hostCapabilities [\"*\"] added to each cluster-wide entry as v1.35's controller writes it",
            kubewarden::host_serves_the_controllers_file(&plane).await,
        );
    }
    if part("shapes") {
        match shapes_run(&mut plane, &agent).await {
            Ok((results, pods)) => {
                for (name, r) in results {
                    report.record(&name, r);
                }
                for (i, label) in [
                    "test_data/jobsets/jax-cpu-coordinator-last",
                    "test_data/jobsets/jax-cpu-two-members",
                    "examples/jax-gpu",
                    "test_data/jobsets/trainer-initializer",
                ]
                .iter()
                .enumerate()
                {
                    // Only where the shape ran (CLUSTER_SHAPES narrows the run when debugging).
                    let Some(mut shape_pods) = pods.get(*label).cloned() else {
                        continue;
                    };
                    // The initializer has exited before the node pods start: real JAX runs on
                    // the node pods alone, as they run.
                    shape_pods.retain(|p| !depends_on::of_rjob(p, "dataset-initializer"));
                    report.record(
                        &format!("real JAX initializes on the real pods of {label}"),
                        real_jax(label, &shape_pods, 40 + i as u8),
                    );
                }
                if let Some(pods) = pods.get("test_data/jobsets/trainer-initializer") {
                    report.record(
                        "dependsOn: the initializer completes before the node pods are made",
                        Ok(depends_on::initializer_first(pods, "dataset-initializer")),
                    );
                    report.record(
                        "dependsOn: the node pods are the JAX job, and the initializer gets no JAX env",
                        Ok(depends_on::jax_env_of_trainer(pods)),
                    );
                }
            }
            Err(e) => report.record("shapes that must run", Err(e)),
        }
    }
    if part("rules") {
        report.record(
            "rule fixtures are refused with our message",
            rejections(&plane).await,
        );
        report.record(
            "a bare queue label defers nothing: the pair refuses by T3 at CREATE, the single policy accepts",
            bare_label(&plane).await,
        );
    }
    if part("match-conditions") {
        report.record(
            "the example manifests' matchConditions: exactly the expected requests reach each policy, the real API server judging",
            match_conditions::requests_that_reach(&plane).await,
        );
    }
    if part("node-selector") {
        report.record(
            "JobSet's node-selector strategy: a node pool per Job, labelled and tainted as JobSet's docs ask, and the pods bind there with the env",
            node_selector::node_selector_strategy(&plane).await,
        );
    }
    if part("unprotected") {
        match unprotected_runs(&plane).await {
            Ok(results) => {
                for (name, r) in results {
                    report.record(&name, r);
                }
            }
            Err(e) => report.record("unprotected runs", Err(e)),
        }
    }
    if part("labels") {
        report.record(
            "a group name that is no label value (train/eval, JobSet before v0.9): the API server creates every pod, with the group-name annotation and no group-name label",
            labels::invalid_group_label_is_not_written(&plane).await,
        );
    }
    if part("outage") {
        report.record(
            "the policy's host SIGKILLed while the Job controller makes a 4 x 16-host JobSet's pods, back 30 s later: every pod exists with its env, none made while it was down",
            outage::host_killed_while_pods_are_made(&mut plane).await,
        );
    }
    if part("operations") {
        // Last: it deletes and applies the policies again.
        operations::cases(&plane, report).await;
    }
    if let Err(e) = plane.check_alive() {
        report.record("the control plane stayed up", Err(e));
    }
    if report.failed > before {
        plane.keep_logs();
    }
    Ok(())
}

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(main_async()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            println!("FAILED: the control plane: {e:#}");
            println!("0 passed, 1 failed");
            ExitCode::FAILURE
        }
    }
}
