//! docs/contributing/spec.md §5 for real: queued JobSets admitted by a real Kueue (its webhooks, its JobSet
//! integration, its scheduler), on a control plane of their own. Kueue suspends what carries
//! the queue label, reserves quota in a flavour, then unsuspends it with the flavour's node
//! selectors; that UPDATE goes through our webhook, and the pods the real controllers then
//! make are checked as in every other shape. This file only declares and runs the cases;
//! what they share is in kueue/shared.rs.
mod accelerators;
mod context;
mod fit;
mod namespaced;
mod queue_check;
mod quota;
mod releases;
pub(crate) mod runs;
pub(crate) mod shared;
mod tas;
mod topology;

use crate::common::{part, Report};
use fit::misfit_flavour_is_skipped;
use multislice_cluster::agent::NodeAgent;
use multislice_cluster::policies::Variant;
use multislice_cluster::{Binaries, ControlPlane, Options};
use namespaced::namespaced_policy_sees;
use quota::{partial_admission_refused, third_waits_for_quota};
use runs::{default_queue_runs, queued_fixture_runs};
use serde_json::json;
use shared::{set_up_queues, V6E_4X4};
use topology::topology_aware_scheduling;

/// Every Kueue case, on a control plane with Kueue.
pub async fn cases(binaries: &Binaries, report: &mut Report) -> anyhow::Result<()> {
    let mut plane = ControlPlane::start(
        binaries,
        Options {
            kueue: true,
            ..Options::default()
        },
    )
    .await?;
    let agent = NodeAgent::start(plane.cluster.clone(), plane.remaining());
    set_up_queues(&plane.cluster).await?;
    releases::set_up(&plane, &[UPGRADE, ROLLBACK]).await?;
    let check = queue_check::set_up(&mut plane).await?;
    accelerators::set_up(&mut plane).await?;
    let before = report.failed;
    if part("accelerators") {
        accelerators::cases(&plane, report).await;
    }
    if part("kueue") {
        kueue_cases(&mut plane, &agent, report).await;
    }
    if part("kueue") || part("tas") {
        tas_cases(&plane, report).await;
    }
    if part("kueue") || part("releases") {
        release_cases(&mut plane, report).await;
    }
    let queue_check = part("kueue") || part("queue-check");
    if queue_check || part("queue-check-v1beta2") || part("queue-check-tas") {
        queue_check_cases(&plane, &check, queue_check, report).await;
    }
    if let Err(e) = plane.check_alive() {
        report.record("the Kueue control plane stayed up", Err(e));
    }
    if report.failed > before {
        plane.keep_logs();
    }
    Ok(())
}

/// The queue check's cases (parts `queue-check` and `kueue`, all of them; part
/// `queue-check-v1beta2`, the version case; `queue-check-tas`, it and the Topology case).
async fn queue_check_cases(
    plane: &ControlPlane,
    check: &queue_check::QueueCheck,
    all: bool,
    report: &mut Report,
) {
    if all {
        report.record(
            "queueCheck refuse: kubectl apply of a TPU JobSet into a queue whose only flavour misfits fails with Q1",
            queue_check::misfit_refused(plane, check).await,
        );
    }
    report.record(
        "queueCheck on Kueue v0.17: the lookups ask kueue.x-k8s.io/v1beta2 alone, and the misfit is refused with Q1; a group version the API server does not serve is answered with its 404",
        queue_check::reads_v1beta2(plane, check).await,
    );
    if all || part("queue-check-tas") {
        report.record(
            "queueCheck refuse: a TPU JobSet placed by topology, into a queue whose flavour's Topology lacks a level it names, fails with Q1",
            queue_check::topology_lacks_a_level(plane, check).await,
        );
    }
    if !all {
        return;
    }
    report.record(
        "queueCheck refuse: the same JobSet into a queue whose flavour fits is accepted, admitted by Kueue, and runs",
        queue_check::fitting_runs(plane, check).await,
    );
    report.record(
        "queueCheck warn: the misfit JobSet is accepted with Q1 as a warning and waits as a pending Workload",
        queue_check::misfit_warned(plane, check).await,
    );
}

/// Issue 60's record of Kueue's Topology Aware Scheduling (parts `kueue` and `tas`), all at
/// once.
async fn tas_cases(plane: &ControlPlane, report: &mut Report) {
    if let Err(e) = tas::set_up(&plane.cluster).await {
        report.record("the TAS record's Topologies", Err(e));
        return;
    }
    for (name, result) in tas::cases(plane).await {
        report.record(&name, result);
    }
}

const UPGRADE: &str = "release-upgrade";
const ROLLBACK: &str = "release-rollback";

/// An upgrade and a rollback of the policy while a JobSet waits in a queue (issue 51). Last:
/// they switch the module that every policy of the control plane runs.
async fn release_cases(plane: &mut ControlPlane, report: &mut Report) {
    let old = match releases::old_module() {
        Ok(old) => old,
        Err(e) => {
            report.record("the policy across releases", Err(e));
            return;
        }
    };
    let current = multislice_host::default_wasm_path();
    report.record(
        "upgrade: a JobSet stamped by c27f4e8 waits in a held queue, the host switches to this release, and its pods get the env c27f4e8 would have given them",
        releases::across_releases(
            plane,
            &releases::Releases {
                namespace: UPGRADE,
                stamps: old.clone(),
                admits: current.clone(),
            },
        )
        .await,
    );
    report.record(
        "rollback: a JobSet stamped by this release waits in a held queue, the host switches to c27f4e8, and every pod is admitted with the env this release gives",
        releases::across_releases(
            plane,
            &releases::Releases {
                namespace: ROLLBACK,
                stamps: current,
                admits: old,
            },
        )
        .await,
    );
}

/// The cases of part `kueue` but the queue check's.
async fn kueue_cases(plane: &mut ControlPlane, agent: &NodeAgent, report: &mut Report) {
    report.record(
        "the policy's get_resource host calls: Kueue's objects read back from the API server exactly, a missing one refused in policy-evaluator's words, and only a ClusterAdmissionPolicy that grants the kind gets them",
        context::objects_read_through_the_backend(plane).await,
    );
    report.record(
        "Kueue admits JobSet's own v6e example (no node selectors) into its flavour, and it runs",
        queued_fixture_runs(
            plane,
            "test_data/jobsets/jobset-v6e-example.yaml",
            "kueue-v6e",
            &V6E_4X4,
        )
        .await,
    );
    report.record(
        "single policy (role both): Kueue admits xpk's v6e JobSet (its own selectors), and it runs",
        queued_fixture_runs(
            plane,
            "test_data/jobsets/xpk-v6e-multislice.yaml",
            "kueue-xpk",
            &V6E_4X4,
        )
        .await,
    );
    report.record(
        "a flavour that does not fit is skipped by Kueue (the policy's required node affinity): the JobSet waits with Kueue's reason and Event, holds no quota, gets no UPDATE, and runs once 4x4 joins the queue",
        misfit_flavour_is_skipped(plane).await,
    );
    report.record(
        "a queue of 2x4, then 4x4: Kueue skips the flavour that does not fit, admits JobSet's own v6e example into 4x4, and it runs",
        queued_fixture_runs(
            plane,
            "test_data/jobsets/jobset-v6e-example.yaml",
            "kueue-skip",
            &V6E_4X4,
        )
        .await,
    );
    report.record(
        "single policy (role both): a queue of 2x4, then 4x4: Kueue admits JobSet's own v6e example into 4x4, and it runs",
        queued_fixture_runs(
            plane,
            "test_data/jobsets/jobset-v6e-example.yaml",
            "kueue-skip-single",
            &V6E_4X4,
        )
        .await,
    );
    report.record(
        "a flavour that labels only the accelerator: Kueue admits JobSet's own v6e example, our UPDATE allows it, and the scheduler puts it on 4x4 nodes",
        fit::accelerator_only_flavour(plane).await,
    );
    report.record(
        "G5: a queued slice group of two replicated jobs left with five shapes is refused at CREATE",
        fit::g5_refused_at_create(plane).await,
    );
    report.record(
        "quota for two JobSets, three submitted: the third waits, then runs when the first finishes",
        third_waits_for_quota(plane, agent).await,
    );
    report.record(
        "Kueue's Topology Aware Scheduling places each slice of a queued JobSet in one node pool",
        topology_aware_scheduling(plane).await,
    );
    report.record(
        "a LocalQueue `default` (into 2x4, then 4x4) queues JobSet's v6e example without its label: accepted, admitted into 4x4, and it runs",
        default_queue_runs(plane).await,
    );
    let namespaced = plane
        .install_variant(Variant::Namespaced, None, &json!({}), &[])
        .await
        .and_then(|mut i| {
            i.pop()
                .ok_or_else(|| anyhow::anyhow!("no policy installed"))
        });
    report.record(
        "a namespaced AdmissionPolicy runs after JobSet's and Kueue's webhooks, and sees their defaults",
        match &namespaced {
            Ok(installed) => namespaced_policy_sees(plane, installed).await,
            Err(e) => Err(anyhow::anyhow!("installing it: {e:#}")),
        },
    );
    report.record(
        "J4: an opted-in Job that Kueue could admit partially is refused at CREATE",
        partial_admission_refused(plane).await,
    );
}
