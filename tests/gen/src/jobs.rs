//! A generator of opted-in plain Indexed Jobs (SPEC §4.6), and the checks over one Job and
//! every pod the Job controller makes from it: nothing lost, only allowed paths, idempotent,
//! and each JAX process's env, computed here from the Job alone.
use crate::invariants::{admit_checked, Admitted};
use multislice_host::controller;
use multislice_host::env::{get, resolve};
use multislice_host::request::Kind;
use proptest::prelude::*;
use serde_json::{json, Value};

/// The user's own env in each container.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UserEnv {
    None,
    /// `RANK_TAG: rank-$(JAX_PROCESS_ID)`: expands only if the injected id comes first.
    Reference,
    /// `JAX_PROCESS_ID` by fieldRef to the completion index, as people write it by hand.
    FieldRefId,
    /// An unrelated variable and an `envFrom`.
    Unrelated,
}

#[derive(Debug, Clone)]
pub struct JobShape {
    pub completions: u32,
    pub generate_name: bool,
    /// TPU containers in `containers`, then whether an init container holds TPU chips too.
    pub tpu_containers: u8,
    pub tpu_init: bool,
    pub sidecar: bool,
    pub user_env: UserEnv,
}

pub fn job_shape() -> impl Strategy<Value = JobShape> {
    (
        1u32..=12,
        any::<bool>(),
        0u8..=3,
        any::<bool>(),
        any::<bool>(),
        prop_oneof![
            Just(UserEnv::None),
            Just(UserEnv::Reference),
            Just(UserEnv::FieldRefId),
            Just(UserEnv::Unrelated)
        ],
    )
        .prop_map(
            |(completions, generate_name, tpu_containers, tpu_init, sidecar, user_env)| JobShape {
                completions,
                generate_name,
                tpu_containers,
                tpu_init,
                sidecar,
                user_env,
            },
        )
}

fn container(name: &str, tpu: bool, user_env: UserEnv) -> Value {
    let mut c = json!({"name": name, "image": "python:3.12"});
    if tpu {
        c["resources"] = json!({"limits": {"google.com/tpu": "2"}});
    }
    match user_env {
        UserEnv::None => {}
        UserEnv::Reference => {
            c["env"] = json!([{"name": "RANK_TAG", "value": "rank-$(JAX_PROCESS_ID)"}]);
        }
        UserEnv::FieldRefId => {
            c["env"] = json!([{"name": "JAX_PROCESS_ID", "valueFrom": {"fieldRef": {
                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}]);
        }
        UserEnv::Unrelated => {
            c["env"] = json!([{"name": "FOO", "value": "bar"}]);
            c["envFrom"] = json!([{"configMapRef": {"name": "settings"}}]);
        }
    }
    c
}

pub fn build_job(shape: &JobShape) -> Value {
    let mut containers: Vec<Value> = (0..shape.tpu_containers.max(1))
        .map(|k| {
            let tpu = k < shape.tpu_containers;
            container(&format!("main-{k}"), tpu, shape.user_env)
        })
        .collect();
    if shape.sidecar {
        containers.push(container("sidecar", false, UserEnv::None));
    }
    let mut spec = json!({
        "subdomain": "svc",
        "restartPolicy": "Never",
        "containers": containers,
    });
    if shape.tpu_init {
        spec["initContainers"] = json!([container("warm-up", true, shape.user_env)]);
    }
    let name = if shape.generate_name {
        json!({"generateName": "gen-"})
    } else {
        json!({"name": "train"})
    };
    let mut metadata = name;
    metadata["namespace"] = json!("ml");
    metadata["annotations"] = json!({"multislice.kubewarden.io/jax-distributed": "true"});
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "completionMode": "Indexed",
            "completions": shape.completions,
            "parallelism": shape.completions,
            "template": {"spec": spec},
        }
    })
}

/// Admits the Job and its pods; checks every invariant and every JAX process's env.
pub fn check_job(
    admit: &dyn Fn(&Value, &Value) -> Admitted,
    shape: &JobShape,
    settings: &Value,
) -> Result<(), String> {
    let job = build_job(shape);
    let admitted = admit_checked(admit, Kind::Job, &job, settings)?;
    let pods = controller::indexed_job_pods(&admitted).map_err(|e| e.to_string())?;
    let jax_on = settings.get("jaxEnv") != Some(&json!("never"));
    let port = settings
        .get("jaxCoordinatorPort")
        .and_then(Value::as_u64)
        .unwrap_or(6666);
    let coordinator = format!("{}.svc:{port}", pods[0].hostname);
    // TPU containers in SPEC §3 order: containers, then init containers.
    let n = u32::from(shape.tpu_containers) + u32::from(shape.tpu_init);
    let per_pod = if n >= 2 { n } else { 1 };
    let total = shape.completions * per_pod;
    let mut ids = Vec::new();
    for pod in &pods {
        let final_pod = admit_checked(admit, Kind::Pod, &pod.object, settings)?;
        let index = u32::try_from(pod.completion_index).map_err(|e| e.to_string())?;
        let mut k = 0;
        let mut counted = false;
        for list in ["containers", "initContainers"] {
            let containers = final_pod["spec"][list]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let originals = pod.object["spec"][list]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for (c, original) in containers.iter().zip(&originals) {
                let env = resolve(&final_pod, c).map_err(|e| e.to_string())?;
                let tpu = c["resources"]["limits"]["google.com/tpu"].is_string();
                let process = if n >= 2 {
                    tpu.then(|| {
                        k += 1;
                        index * n + k - 1
                    })
                } else {
                    Some(index)
                };
                let want = |var: &str| -> Option<String> {
                    let id = process.filter(|_| jax_on)?;
                    Some(match var {
                        "JAX_COORDINATOR_ADDRESS" => coordinator.clone(),
                        "JAX_NUM_PROCESSES" => total.to_string(),
                        _ => id.to_string(),
                    })
                };
                for var in [
                    "JAX_COORDINATOR_ADDRESS",
                    "JAX_NUM_PROCESSES",
                    "JAX_PROCESS_ID",
                ] {
                    let user_set = original["env"]
                        .as_array()
                        .is_some_and(|e| e.iter().any(|x| x["name"] == json!(var)));
                    let expected = if user_set && var == "JAX_PROCESS_ID" {
                        // The user's fieldRef: the completion index, whatever n is.
                        Some(index.to_string())
                    } else {
                        want(var)
                    };
                    if get(&env, var).map(str::to_string) != expected {
                        return Err(format!(
                            "{} {}: {var} = {:?}, expected {expected:?}",
                            pod.hostname,
                            c["name"],
                            get(&env, var)
                        ));
                    }
                }
                if let Some(tag) = get(&env, "RANK_TAG") {
                    let expected = match want("JAX_PROCESS_ID") {
                        Some(id) => format!("rank-{id}"),
                        None => "rank-$(JAX_PROCESS_ID)".to_string(),
                    };
                    if tag != expected {
                        return Err(format!(
                            "{} {}: RANK_TAG = {tag:?}",
                            pod.hostname, c["name"]
                        ));
                    }
                }
                // One id per JAX process: each TPU container when n >= 2, else the pod's
                // first container.
                let counts = match process {
                    Some(_) if n >= 2 => true,
                    Some(_) => !counted,
                    None => false,
                };
                if jax_on && counts {
                    counted = true;
                    let id = get(&env, "JAX_PROCESS_ID").and_then(|v| v.parse::<u32>().ok());
                    ids.extend(id);
                }
            }
        }
    }
    if jax_on {
        let mut got = ids;
        got.sort_unstable();
        let all: Vec<u32> = (0..total).collect();
        // A user's fieldRef id on a pod with n >= 2 processes is the user's choice, not ours.
        let user_ids = shape.user_env == UserEnv::FieldRefId && n >= 2;
        if got != all && !user_ids {
            return Err(format!("process ids {got:?}, expected 0..{total}"));
        }
    }
    Ok(())
}
