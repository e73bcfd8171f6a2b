//! `make cluster-preview` as a user runs it, with Kueue: the binary starts a control plane of
//! its own, and its JSON report is checked.
use crate::common::{part, Failures, Report};
use multislice_host::workspace_root;
use serde_json::{json, Value};

/// One run of `make cluster-preview` on examples/kueue-queued.yaml.
struct Run<'a> {
    /// QUEUE_FLAVOR; the last flavour is the one Kueue is expected to use.
    flavours: &'a str,
    /// SETTINGS, as YAML.
    settings: Option<&'a str>,
    /// QUEUE_DEFAULT=1, on the example without its queue label.
    queue_default: bool,
    /// Whether the JobSet fits that flavour and runs, or Kueue's UPDATE is refused.
    fits: bool,
}

/// `make cluster-preview FILE=examples/kueue-queued.yaml QUEUE_FLAVOR=…`, run as a user runs
/// it: the report shows the queued JobSet's pods with the flavour's selectors and their env,
/// or, in a flavour that does not fit, our refusal of Kueue's unsuspending UPDATE.
fn preview_in_flavour(run: &Run) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let scratch = std::env::temp_dir().join(format!(
        "cluster-preview-case-{}-{}",
        std::process::id(),
        run.flavours.replace([':', ','], "-")
    ));
    std::fs::create_dir_all(&scratch)?;
    let mut file = workspace_root().join("examples/kueue-queued.yaml");
    if run.queue_default {
        let text = std::fs::read_to_string(&file)?;
        let unlabelled: String = text
            .lines()
            .filter(|l| !l.contains("kueue.x-k8s.io/queue-name"))
            .map(|l| format!("{l}\n"))
            .collect();
        file = scratch.join("kueue-queued-unlabelled.yaml");
        std::fs::write(&file, unlabelled)?;
    }
    let settings = match run.settings {
        Some(yaml) => {
            let path = scratch.join("settings.yaml");
            std::fs::write(&path, yaml)?;
            path.display().to_string()
        }
        None => String::new(),
    };
    let mut command = std::process::Command::new("timeout");
    command
        .args(["--kill-after=5", "400"])
        .arg(env!("CARGO_BIN_EXE_cluster-preview"))
        .arg(&file)
        .args(["--settings", &settings])
        .args(["--queue-flavor", run.flavours, "--wait", "150"]);
    if run.queue_default {
        command.arg("--queue-default");
    }
    let out = command.stderr(std::process::Stdio::inherit()).output()?;
    let _ = std::fs::remove_dir_all(&scratch);
    f.check(out.status.success(), || {
        format!("cluster-preview exited {}", out.status)
    });
    let report: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| anyhow::anyhow!("cluster-preview printed no JSON report: {e}"))?;
    let flavour = run.flavours.rsplit(',').next().unwrap_or_default();
    let fits = run.fits;
    let (accelerator, topology) = flavour.split_once(':').unwrap_or_default();
    f.eq(&report["complete"], &json!(true), "complete");
    let object = &report["objects"][0];
    f.eq(
        &object["kueue"]["queue"],
        &json!(if run.queue_default {
            "default"
        } else {
            "tpu-v5p"
        }),
        "queued-v5p: its queue",
    );
    let assigned: Vec<&Value> = object["kueue"]["workloads"][0]["flavours"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| &a["flavors"]["google.com/tpu"])
        .collect();
    f.eq(
        assigned,
        vec![&json!(format!("{accelerator}-{topology}"))],
        "queued-v5p: the flavour Kueue assigned",
    );
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
        let message = format!("[T4] spec.replicatedJobs[0].template.spec.parallelism (replicated job \"slice\"): is 4 but a {accelerator} {topology} slice with 4 chips per pod has 2 hosts; set parallelism and completions to 2, or keep 4 hosts and select the topology \"2x2x4\"; see docs/rules.md, T4");
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
        "kueue: cluster-preview QUEUE_FLAVOR={}{}{}: {} pods, unsuspending UPDATEs {:?}",
        run.flavours,
        if run.queue_default {
            " QUEUE_DEFAULT=1"
        } else {
            ""
        },
        run.settings
            .map(|s| format!(" SETTINGS={:?}", s.trim()))
            .unwrap_or_default(),
        pods.len(),
        verdicts.iter().map(|v| &v["allowed"]).collect::<Vec<_>>()
    );
    Ok(f)
}

/// `make cluster-preview FILE=examples/kueue-queued.yaml SETTINGS=(queueCheck: refuse)
/// QUEUE_FLAVOR=tpu-v5p-slice:2x2x2`: the queue's only flavour fits no 4 hosts of 4 chips, and
/// the validating policy, granted what the queue check reads as
/// examples/queue-check/ grants it, refuses the JobSet
/// at CREATE with Q1, as the cluster would; no pod is made.
fn preview_queue_check_refuses() -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let scratch = std::env::temp_dir().join(format!(
        "cluster-preview-queue-check-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&scratch)?;
    let settings = scratch.join("settings.yaml");
    std::fs::write(&settings, "queueCheck: refuse\n")?;
    let out = std::process::Command::new("timeout")
        .args(["--kill-after=5", "400"])
        .arg(env!("CARGO_BIN_EXE_cluster-preview"))
        .arg(workspace_root().join("examples/kueue-queued.yaml"))
        .arg("--settings")
        .arg(&settings)
        .args(["--queue-flavor", "tpu-v5p-slice:2x2x2", "--wait", "60"])
        .stderr(std::process::Stdio::inherit())
        .output()?;
    let _ = std::fs::remove_dir_all(&scratch);
    f.check(out.status.success(), || {
        format!("cluster-preview exited {}", out.status)
    });
    let report: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| anyhow::anyhow!("cluster-preview printed no JSON report: {e}"))?;
    let object = &report["objects"][0];
    let q1 = "[Q1] metadata.labels[\"kueue.x-k8s.io/queue-name\"]: names queue \"team-a/tpu-v5p\" (ClusterQueue \"preview\"), where replicated job \"slice\" fits no flavour of google.com/tpu: \"tpu-v5p-slice-2x2x2\" (tpu-v5p-slice 2x2x2); it needs a slice of 4 hosts with 4 chips per pod: tpu-v4-podslice 2x2x4, tpu-v5-lite-podslice 4x4, tpu-v5p-slice 2x2x4, tpu-v6e-slice 4x4, tpu7 2x2x4, tpu7x 2x2x4, so Kueue would never admit it; submit it to a queue with a flavour of one of those shapes, or add such a flavour to the ClusterQueue; see docs/rules.md, Q1";
    f.eq(
        &object["allowed"],
        &json!(false),
        "queued-v5p: CREATE allowed",
    );
    let message = object["message"].as_str().unwrap_or_default();
    f.check(
        message.starts_with("admission webhook \"")
            && message.ends_with(&format!(" denied the request: {q1}")),
        || {
            format!(
                "queued-v5p: message {message:?}, want the validating policy's denial with {q1:?}"
            )
        },
    );
    f.eq(report["pods"].as_array().map(Vec::len), Some(0), "pods");
    eprintln!("kueue: cluster-preview SETTINGS=(queueCheck: refuse) QUEUE_FLAVOR=tpu-v5p-slice:2x2x2: allowed {}, {message}", object["allowed"]);
    Ok(f)
}

/// The preview runs: a flavour that fits examples/kueue-queued.yaml; one that does not, with
/// the narrowing turned off in SETTINGS (which must reach both policies of the pair: the
/// mutating one would narrow, and Kueue would then skip the flavour and send no UPDATE); and
/// a list of flavours whose first does not fit, Kueue's default queue taking the example
/// without its label.
pub fn cases(report: &mut Report) {
    if part("kueue") || part("preview-queue-check") {
        report.record(
            "make cluster-preview SETTINGS=(queueCheck: refuse) QUEUE_FLAVOR=tpu-v5p-slice:2x2x2 refuses the JobSet with Q1",
            preview_queue_check_refuses(),
        );
    }
    if !part("kueue") {
        return;
    }
    report.record(
        "make cluster-preview QUEUE_FLAVOR=tpu-v5p-slice:2x2x4 runs examples/kueue-queued.yaml through Kueue",
        preview_in_flavour(&Run {
            flavours: "tpu-v5p-slice:2x2x4",
            settings: None,
            queue_default: false,
            fits: true,
        }),
    );
    report.record(
        "make cluster-preview SETTINGS=(narrowQueuedJobSets: false) QUEUE_FLAVOR=tpu-v5p-slice:2x2x2 reports our refusal of Kueue's UPDATE",
        preview_in_flavour(&Run {
            flavours: "tpu-v5p-slice:2x2x2",
            settings: Some("narrowQueuedJobSets: false\n"),
            queue_default: false,
            fits: false,
        }),
    );
    report.record(
        "make cluster-preview QUEUE_FLAVOR=tpu-v5p-slice:2x2x2,tpu-v5p-slice:2x2x4 QUEUE_DEFAULT=1: Kueue's default queue takes the unlabelled JobSet, skips 2x2x2, and it runs in 2x2x4",
        preview_in_flavour(&Run {
            flavours: "tpu-v5p-slice:2x2x2,tpu-v5p-slice:2x2x4",
            settings: None,
            queue_default: true,
            fits: true,
        }),
    );
}
