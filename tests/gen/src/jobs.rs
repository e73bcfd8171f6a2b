//! A generator of opted-in plain Indexed Jobs (docs/contributing/spec.md §4.6), and the checks over one Job and
//! every pod the Job controller makes from it: nothing lost, only allowed paths, idempotent,
//! and each JAX process's env, computed here from the Job alone.
use crate::invariants::{admit_checked, Admitted};
use multislice_host::controller;
use multislice_host::env::{get, resolve};
use multislice_host::request::Kind;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The JAX env of docs/contributing/spec.md §4.6, the only family a plain Job's pods get.
const JAX: [&str; 3] = [
    "JAX_COORDINATOR_ADDRESS",
    "JAX_NUM_PROCESSES",
    "JAX_PROCESS_ID",
];

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
    /// The TPU containers ask for [`crate::OTHER_TPU_RESOURCE`], named by the setting
    /// `tpuResource` ([`JobShape::settings`]).
    pub other_resource: bool,
}

impl JobShape {
    /// The resource the Job's TPU containers ask for.
    pub fn tpu_resource(&self) -> &'static str {
        if self.other_resource {
            crate::OTHER_TPU_RESOURCE
        } else {
            crate::oracle::TPU_RESOURCE
        }
    }

    /// `base` with the setting `tpuResource` naming the Job's TPU resource, when that is not
    /// the default.
    pub fn settings(&self, base: &Value) -> Value {
        let mut settings = base.clone();
        if self.other_resource {
            settings["tpuResource"] = json!(crate::OTHER_TPU_RESOURCE);
        }
        settings
    }
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
        any::<bool>(),
    )
        .prop_map(
            |(
                completions,
                generate_name,
                tpu_containers,
                tpu_init,
                sidecar,
                user_env,
                other_resource,
            )| JobShape {
                completions,
                generate_name,
                tpu_containers,
                tpu_init,
                sidecar,
                user_env,
                other_resource,
            },
        )
}

fn container(name: &str, tpu: Option<&str>, user_env: UserEnv) -> Value {
    let mut c = json!({"name": name, "image": "python:3.12"});
    if let Some(resource) = tpu {
        c["resources"] = json!({"limits": {resource: "2"}});
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
            let tpu = (k < shape.tpu_containers).then(|| shape.tpu_resource());
            container(&format!("main-{k}"), tpu, shape.user_env)
        })
        .collect();
    if shape.sidecar {
        containers.push(container("sidecar", None, UserEnv::None));
    }
    let mut spec = json!({
        "subdomain": "svc",
        "restartPolicy": "Never",
        "containers": containers,
    });
    if shape.tpu_init {
        spec["initContainers"] = json!([container(
            "warm-up",
            Some(shape.tpu_resource()),
            shape.user_env
        )]);
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
    // The pod's JAX processes (the TPU containers of the resource the settings name, else its
    // first container), n of them: with n >= 2 each TPU container is one, else the pod is one
    // and every container gets its env.
    let resource = crate::oracle::Settings::from_json(settings).tpu_resource;
    let processes =
        crate::oracle::jax_process_containers(&job["spec"]["template"]["spec"], &resource);
    let n = u32::try_from(processes.len()).map_err(|e| e.to_string())?;
    let total = shape.completions * n;
    let mut ids = Vec::new();
    for pod in &pods {
        let final_pod = admit_checked(admit, Kind::Pod, &pod.object, settings)?;
        let index = u32::try_from(pod.completion_index).map_err(|e| e.to_string())?;
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
                let k = processes.iter().position(|p| c["name"] == json!(p));
                let process = if n >= 2 {
                    k.map(|k| index * n + k as u32)
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
                for var in JAX {
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
                // The whole env, exactly: the JAX env (but what the container sets itself),
                // then the user's own entries, and nothing else (docs/contributing/spec.md §4.6: no other family).
                let user_entries = crate::oracle::own_entries(original);
                let injected: BTreeMap<&str, String> = JAX
                    .iter()
                    .filter(|var| !user_entries.iter().any(|e| e["name"] == **var))
                    .filter_map(|&var| Some((var, want(var)?)))
                    .collect();
                let mut entries: Vec<Value> = injected
                    .iter()
                    .map(|(var, value)| json!({"name": var, "value": value}))
                    .collect();
                entries.extend(user_entries.iter().cloned());
                let expected: BTreeMap<String, String> =
                    resolve(&final_pod, &json!({"env": entries}))
                        .map_err(|e| e.to_string())?
                        .into_iter()
                        .collect();
                let got: BTreeMap<String, String> = env.iter().cloned().collect();
                let raw = c["env"].as_array().cloned().unwrap_or_default();
                if got != expected
                    || raw.len() != injected.len() + user_entries.len()
                    || raw[injected.len()..] != user_entries[..]
                {
                    return Err(format!(
                        "{} {}: env {raw:?} resolves to {got:?}, expected {expected:?} with the user's entries last",
                        pod.hostname, c["name"]
                    ));
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
                // One id per JAX process.
                if jax_on && k.is_some() {
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
