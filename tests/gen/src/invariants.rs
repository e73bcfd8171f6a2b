//! SPEC §4 and §4.5 checked over one generated JobSet and every pod the controllers make from
//! it, for any way of admitting (native or through the wasm module).
use crate::oracle;
use multislice_host::controller::{self, as_served, JobSetApi};
use multislice_host::env::{get, resolve};
use multislice_host::host::{apply, diff};
use multislice_host::invariants::{disallowed_ops, nothing_lost};
use multislice_host::request::{admission_request, Kind};
use serde_json::{json, Value};

/// What an admission returned: accepted, the mutated object, the response bytes.
pub struct Admitted {
    pub accepted: bool,
    pub message: Option<String>,
    pub mutated: Option<Value>,
    pub bytes: Vec<u8>,
}

const MEGASCALE: [&str; 3] = [
    "MEGASCALE_NUM_SLICES",
    "MEGASCALE_SLICE_ID",
    "MEGASCALE_COORDINATOR_ADDRESS",
];

/// Admits the CREATE of `object`, and checks that the response is deterministic, the patch
/// touches only what the policy may, loses nothing, and is not repeated on readmission.
pub fn admit_checked(
    admit: &dyn Fn(&Value, &Value) -> Admitted,
    kind: Kind,
    object: &Value,
    settings: &Value,
) -> Result<Value, String> {
    let request = admission_request(kind, "CREATE", object, None);
    let first = admit(&request, settings);
    if !first.accepted {
        return Err(format!("{kind:?} rejected: {:?}", first.message));
    }
    let again = admit(&request, settings);
    if again.bytes != first.bytes {
        return Err(format!("{kind:?}: the same request gave different bytes"));
    }
    let Some(mutated) = first.mutated else {
        return Ok(object.clone());
    };
    let patch = diff(object, &mutated);
    let name = match kind {
        Kind::JobSet => "JobSet",
        Kind::Job => "Job",
        Kind::Pod => "Pod",
    };
    let bad = disallowed_ops(object, &patch, name);
    if !bad.is_empty() {
        return Err(format!("{name} patch touches what it may not: {bad:?}"));
    }
    let after = apply(object, &patch).map_err(|e| e.to_string())?;
    let lost = nothing_lost(object, &after);
    if !lost.is_empty() {
        return Err(format!("{name} lost: {lost:?}"));
    }
    let readmitted = admit(&admission_request(kind, "CREATE", &after, None), settings);
    if readmitted.mutated.is_some() {
        return Err(format!("{name} admission is not idempotent"));
    }
    Ok(after)
}

/// Admits the JobSet and all its pods; checks every invariant and every pod's env.
pub fn check(
    admit: &dyn Fn(&Value, &Value) -> Admitted,
    jobset: &Value,
    api: JobSetApi,
    settings: &Value,
) -> Result<(), String> {
    let served = as_served(jobset, api);
    let admitted = admit_checked(admit, Kind::JobSet, &served, settings)?;
    let name = controller::final_name(&served);
    let multislice_on = settings.get("multisliceEnv") != Some(&json!(false));
    for pod in controller::jobset_pods(&admitted).map_err(|e| e.to_string())? {
        let final_pod = admit_checked(admit, Kind::Pod, &pod.object, settings)?;
        let want = oracle::expected(&served, &name, &pod.replicated_job, pod.job_index);
        for map in ["labels", "annotations"] {
            let m = &final_pod["metadata"][map];
            let got = (
                m["jobset.sigs.k8s.io/group-name"].clone(),
                m["jobset.sigs.k8s.io/group-replicas"].clone(),
                m["jobset.sigs.k8s.io/job-group-index"].clone(),
            );
            let expected = (
                json!(want.group),
                json!(want.group_replicas.to_string()),
                json!(want.job_group_index.to_string()),
            );
            if got != expected {
                return Err(format!(
                    "{} {map}: group keys {got:?}, expected {expected:?}",
                    pod.hostname
                ));
            }
        }
        for list in ["initContainers", "containers"] {
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
                let user_set = |var: &str| {
                    original["env"]
                        .as_array()
                        .is_some_and(|e| e.iter().any(|x| x["name"] == json!(var)))
                };
                let tpu = oracle::is_tpu_container(c);
                for (i, var) in MEGASCALE.iter().enumerate() {
                    if user_set(var) {
                        continue;
                    }
                    let expected = match (&want.multislice, tpu && multislice_on) {
                        (Some((num, id, coordinator)), true) => {
                            Some([num.to_string(), id.to_string(), coordinator.clone()][i].clone())
                        }
                        _ => None,
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
                // The user's own entries are all still there, after the injected ones.
                let user_entries = original["env"].as_array().cloned().unwrap_or_default();
                let entries = c["env"].as_array().cloned().unwrap_or_default();
                if entries.len() < user_entries.len()
                    || entries[entries.len() - user_entries.len()..] != user_entries[..]
                {
                    return Err(format!(
                        "{} {}: the user's env is not kept at the end",
                        pod.hostname, c["name"]
                    ));
                }
            }
        }
    }
    Ok(())
}
