//! `make cluster-preview` as a user runs it, with Kueue: the binary starts a control plane of
//! its own, and its JSON report is checked.
use super::{Failures, Report};
use multislice_host::workspace_root;
use serde_json::{json, Value};

/// `make cluster-preview FILE=examples/kueue-queued.yaml QUEUE_FLAVOR=…`, run as a user runs
/// it: the report shows the queued JobSet's pods with the flavour's selectors and their env,
/// or, in a flavour that does not fit, our refusal of Kueue's unsuspending UPDATE.
fn preview_in_flavour(flavour: &str, fits: bool) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let file = workspace_root().join("examples/kueue-queued.yaml");
    let out = std::process::Command::new("timeout")
        .args(["--kill-after=5", "400"])
        .arg(env!("CARGO_BIN_EXE_cluster-preview"))
        .arg(&file)
        .args(["--queue-flavor", flavour, "--wait", "150"])
        .stderr(std::process::Stdio::inherit())
        .output()?;
    f.check(out.status.success(), || {
        format!("cluster-preview exited {}", out.status)
    });
    let report: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| anyhow::anyhow!("cluster-preview printed no JSON report: {e}"))?;
    let (accelerator, topology) = flavour.split_once(':').unwrap_or_default();
    f.eq(&report["complete"], &json!(true), "complete");
    let object = &report["objects"][0];
    f.eq(
        &object["allowed"],
        &json!(true),
        "queued-v5p: CREATE allowed",
    );
    let verdicts = object["kueue"]["unsuspendingUpdates"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    f.check(!verdicts.is_empty(), || {
        "no unsuspending UPDATE in the report".to_string()
    });
    let pods = report["pods"].as_array().cloned().unwrap_or_default();
    if fits {
        f.check(verdicts.iter().all(|v| v["allowed"] == json!(true)), || {
            format!("verdicts {verdicts:?}")
        });
        f.eq(pods.len(), 8, "pods");
        let mut slice_ids = std::collections::BTreeSet::new();
        for p in &pods {
            let name = p["name"].as_str().unwrap_or_default();
            f.eq(
                &p["nodeSelector"]["cloud.google.com/gke-tpu-accelerator"],
                &json!(accelerator),
                &format!("{name}: accelerator selector"),
            );
            f.eq(
                &p["nodeSelector"]["cloud.google.com/gke-tpu-topology"],
                &json!(topology),
                &format!("{name}: topology selector"),
            );
            f.check(p["nodeName"].is_string(), || format!("{name}: not bound"));
            let env = &p["containers"][0]["env"];
            f.eq(
                &env["MEGASCALE_NUM_SLICES"],
                &json!("2"),
                &format!("{name}: MEGASCALE_NUM_SLICES"),
            );
            f.eq(
                &env["MEGASCALE_COORDINATOR_ADDRESS"],
                &json!("queued-v5p-slice-0-0.queued-v5p"),
                &format!("{name}: MEGASCALE_COORDINATOR_ADDRESS"),
            );
            slice_ids.insert(
                env["MEGASCALE_SLICE_ID"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string(),
            );
        }
        f.eq(
            slice_ids,
            ["0", "1"].into_iter().map(String::from).collect(),
            "slice ids",
        );
    } else {
        let message = format!("[T4] spec.replicatedJobs[0].template.spec.parallelism: is 4 but a {accelerator} {topology} slice with 4 chips per pod has 2 hosts; set parallelism and completions to 2");
        f.check(
            verdicts
                .iter()
                .all(|v| v["allowed"] == json!(false) && v["message"] == json!(message)),
            || format!("verdicts {verdicts:?}, want each refused with {message:?}"),
        );
        f.eq(pods.len(), 0, "pods");
        let conditions = object["kueue"]["workloads"][0]["conditions"].to_string();
        f.check(conditions.contains("Admitted=True"), || {
            format!("Workload conditions {conditions}")
        });
    }
    eprintln!(
        "kueue: cluster-preview QUEUE_FLAVOR={flavour}: {} pods, unsuspending UPDATEs {:?}",
        pods.len(),
        verdicts.iter().map(|v| &v["allowed"]).collect::<Vec<_>>()
    );
    Ok(f)
}

/// Both preview runs: a flavour that fits examples/kueue-queued.yaml, and one that does not.
pub fn cases(report: &mut Report) {
    report.record(
        "make cluster-preview QUEUE_FLAVOR=tpu-v5p-slice:2x2x4 runs examples/kueue-queued.yaml through Kueue",
        preview_in_flavour("tpu-v5p-slice:2x2x4", true),
    );
    report.record(
        "make cluster-preview QUEUE_FLAVOR=tpu-v5p-slice:2x2x2 reports our refusal of Kueue's UPDATE",
        preview_in_flavour("tpu-v5p-slice:2x2x2", false),
    );
}
