//! `preview`: a JobSet or Job file through the policy (either runner, [`Evaluator`]) and the
//! simulated controllers, printed as a verdict, a patch and a table of every pod's resolved
//! values.
use crate::controller::{self, JobSetApi, SimPod};
use crate::env;
use crate::outcome::{apply, Evaluator};
use crate::request::{admission_request, Kind};
use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::Value;
use std::fmt::Write;

/// The columns of the pod table, in order: each env variable the policy may set.
pub const ENV_COLUMNS: [&str; 12] = crate::judges::POLICY_ENV;

/// One row: a container of a pod, with its group and resolved env.
#[derive(Debug, Clone)]
pub struct PodRow {
    pub pod: String,
    pub container: String,
    pub group: String,
    pub env: Vec<(String, String)>,
    /// The container's `command` and `args`, as written: the kubelet expands `$(NAME)` in
    /// them from its env.
    pub command_args: Vec<String>,
}

/// Parses every document of a YAML stream.
pub fn yaml_documents(text: &str) -> Result<Vec<Value>> {
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(doc).context("not valid YAML")?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

fn abbreviate(value: &str) -> String {
    let hosts: Vec<&str> = value.split(',').collect();
    if hosts.len() > 2 {
        format!("{},… ({} in all)", hosts[0], hosts.len())
    } else {
        value.to_string()
    }
}

fn table(rows: &[PodRow]) -> String {
    let used: Vec<&str> = ENV_COLUMNS
        .iter()
        .copied()
        .filter(|c| rows.iter().any(|r| env::get(&r.env, c).is_some()))
        .collect();
    let mut header = vec!["POD", "CONTAINER", "GROUP"];
    header.extend(used.iter().copied());
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        let mut line = vec![r.pod.clone(), r.container.clone(), r.group.clone()];
        for c in &used {
            let v = env::get(&r.env, c).unwrap_or("-");
            line.push(
                if matches!(*c, "TPU_WORKER_HOSTNAMES" | "TPU_PROCESS_ADDRESSES") {
                    abbreviate(v)
                } else {
                    v.to_string()
                },
            );
        }
        lines.push(line);
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for l in lines {
        let cells: Vec<String> = l
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

/// `<group> <job-group-index>/<group-replicas>` of a JobSet pod; `-` for a plain Job's.
fn group_of(pod: &Value) -> String {
    let labels = pod.pointer("/metadata/labels");
    let label = |k: &str| {
        labels
            .and_then(|l| l.get(format!("jobset.sigs.k8s.io/{k}")))
            .and_then(Value::as_str)
    };
    if label("jobset-name").is_none() {
        return "-".to_string();
    }
    let or_unknown = |k: &str| label(k).unwrap_or("?");
    format!(
        "{} {}/{}",
        or_unknown("group-name"),
        or_unknown("job-group-index"),
        or_unknown("group-replicas")
    )
}

/// The JobSet or Job whose pods are previewed, and the title its verdict is written under.
struct Owner<'a> {
    kind: Kind,
    title: &'a str,
    object: &'a Value,
}

/// Admits the CREATE of the owner and writes its verdict, message, warnings and patch.
/// Returns the object as admitted, or `None` when it was rejected.
fn admit_owner(
    policy: &dyn Evaluator,
    owner: &Owner,
    settings: &Value,
    out: &mut String,
) -> Result<Option<Value>> {
    let Owner {
        kind,
        title,
        object,
    } = *owner;
    let request = admission_request(kind, "CREATE", object, None);
    let outcome = policy.validate(&request, settings)?;
    let verdict = if !outcome.accepted {
        "REJECTED"
    } else if outcome.patch.as_ref().is_some_and(|p| !p.0.is_empty()) {
        "accepted, mutated"
    } else {
        "accepted, unchanged"
    };
    let _ = writeln!(out, "{title}: {verdict}");
    if let Some(message) = &outcome.message {
        let _ = writeln!(out, "{message}");
    }
    for w in &outcome.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    if !outcome.accepted {
        return Ok(None);
    }
    Ok(Some(match &outcome.patch {
        Some(p) => {
            let _ = writeln!(
                out,
                "{} patch:\n{}",
                kind_name(kind),
                serde_yaml::to_string(p)?
            );
            apply(object, p)?
        }
        None => object.clone(),
    }))
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::JobSet => "JobSet",
        Kind::Job => "Job",
        Kind::Pod => "Pod",
    }
}

/// Admits every simulated pod, writes their rejections and warnings, and returns a row per
/// container with its resolved env.
fn admit_pods(
    policy: &dyn Evaluator,
    pods: Vec<SimPod>,
    settings: &Value,
    out: &mut String,
) -> Result<Vec<PodRow>> {
    let mut rows = Vec::new();
    let mut pod_warnings = Vec::new();
    for pod in pods {
        let request = admission_request(Kind::Pod, "CREATE", &pod.object, None);
        let outcome = policy.validate(&request, settings)?;
        if !outcome.accepted {
            let _ = writeln!(
                out,
                "pod {}: REJECTED: {}",
                pod.hostname,
                outcome.message.unwrap_or_default()
            );
            continue;
        }
        pod_warnings.extend(
            outcome
                .warnings
                .iter()
                .map(|w| format!("pod {}: {w}", pod.hostname)),
        );
        let final_pod = match &outcome.patch {
            Some(p) => apply(&pod.object, p)?,
            None => pod.object.clone(),
        };
        for list in ["initContainers", "containers"] {
            for c in final_pod
                .pointer(&format!("/spec/{list}"))
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                let cname = c.get("name").and_then(Value::as_str).unwrap_or("?");
                rows.push(PodRow {
                    pod: pod.hostname.clone(),
                    container: if list == "initContainers" {
                        format!("{cname} (init)")
                    } else {
                        cname.to_string()
                    },
                    group: group_of(&final_pod),
                    env: env::resolve(&final_pod, c)?,
                    command_args: ["command", "args"]
                        .iter()
                        .filter_map(|k| c.get(*k).and_then(Value::as_array))
                        .flatten()
                        .filter_map(|a| a.as_str().map(str::to_string))
                        .collect(),
                });
            }
        }
    }
    for w in pod_warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    let _ = write!(out, "{}", table(&rows));
    Ok(rows)
}

/// Admits a JobSet, then every pod the controllers would make from it. Returns the report
/// and the rows (for tests).
pub fn run_jobset(
    policy: &dyn Evaluator,
    jobset: &Value,
    settings: &Value,
    api: JobSetApi,
) -> Result<(String, Vec<PodRow>)> {
    let mut out = String::new();
    let served = controller::as_served(jobset, api);
    let title = format!("JobSet {}", controller::final_name(&served));
    let Some(admitted) = admit_owner(
        policy,
        &Owner {
            kind: Kind::JobSet,
            title: &title,
            object: &served,
        },
        settings,
        &mut out,
    )?
    else {
        return Ok((out, Vec::new()));
    };
    let rows = admit_pods(
        policy,
        controller::jobset_pods(&admitted)?,
        settings,
        &mut out,
    )?;
    Ok((out, rows))
}

/// Admits a plain Job (docs/contributing/spec.md §4.6), then every pod the Job controller would make from it.
pub fn run_job(
    policy: &dyn Evaluator,
    job: &Value,
    settings: &Value,
) -> Result<(String, Vec<PodRow>)> {
    let mut out = String::new();
    let title = format!("Job {}", controller::final_name(job));
    let Some(admitted) = admit_owner(
        policy,
        &Owner {
            kind: Kind::Job,
            title: &title,
            object: job,
        },
        settings,
        &mut out,
    )?
    else {
        return Ok((out, Vec::new()));
    };
    let rows = admit_pods(
        policy,
        controller::indexed_job_pods(&admitted)?,
        settings,
        &mut out,
    )?;
    Ok((out, rows))
}

/// The preview of every JobSet and Job in a YAML stream; other kinds are listed and skipped.
pub fn preview(
    policy: &dyn Evaluator,
    yaml: &str,
    settings: &Value,
    api: JobSetApi,
) -> Result<String> {
    let mut out = String::new();
    for doc in yaml_documents(yaml)? {
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        let (report, _) = match kind {
            "JobSet" => run_jobset(policy, &doc, settings, api)?,
            "Job" => run_job(policy, &doc, settings)?,
            _ => {
                let _ = writeln!(
                    out,
                    "skipped a {kind:?} document: only JobSets and Jobs are previewed\n"
                );
                continue;
            }
        };
        let _ = writeln!(out, "{report}");
    }
    Ok(out)
}
