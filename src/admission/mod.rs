//! The edge: kwctl's payload in, a verdict out. Dispatch on kind and operation (SPEC §5), with the
//! cheap path that lets a pod outside any JobSet, or a Job that did not opt in, pass without being
//! parsed. One file per kind: [`jobset`], [`job`] and [`pod`].
mod heads;
mod job;
mod jobset;
mod pod;
pub mod queue_lookup;
mod verdict;

pub use verdict::Verdict;

use crate::error::InputError;
use crate::settings::{Role, Settings};
use heads::{Envelope, RequestHead};
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use queue_lookup::ClusterReader;
use serde_json::value::RawValue;
use serde_json::Value;

const JOBSET_GROUP: &str = "jobset.x-k8s.io";
const BATCH_GROUP: &str = "batch";

/// The requests the policy judges. DELETE and CONNECT, pod UPDATEs, and kinds the policy was
/// not bound to, are none of them and pass untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    PodCreate,
    JobSetCreate,
    JobSetUpdate,
    JobCreate,
    JobUpdate,
}

impl Route {
    fn of(request: &RequestHead) -> Option<Route> {
        let kind = &request.kind;
        match (
            kind.group.as_ref(),
            kind.kind.as_ref(),
            request.operation.as_ref(),
        ) {
            ("", "Pod", "CREATE") => Some(Route::PodCreate),
            (JOBSET_GROUP, "JobSet", "CREATE") => Some(Route::JobSetCreate),
            (JOBSET_GROUP, "JobSet", "UPDATE") => Some(Route::JobSetUpdate),
            (BATCH_GROUP, "Job", "CREATE") => Some(Route::JobCreate),
            (BATCH_GROUP, "Job", "UPDATE") => Some(Route::JobUpdate),
            _ => None,
        }
    }

    /// Whether the role does anything with these requests (SPEC §5): pods are only mutated, UPDATEs
    /// only judged.
    fn in_role(self, role: Role) -> bool {
        match self {
            Route::PodCreate => role.mutates(),
            Route::JobSetUpdate | Route::JobUpdate => role.validates(),
            Route::JobSetCreate | Route::JobCreate => true,
        }
    }

    /// Whether the object is the policy's, from the cheap reads alone. A Job UPDATE is judged
    /// when either side opted in: dropping the annotation in the same UPDATE as a resize
    /// leaves the stamped template, which new pods copy, just as stale.
    fn serves(self, object: &RawValue, old_object: Option<&RawValue>) -> bool {
        match self {
            Route::PodCreate => pod::is_served(object),
            Route::JobCreate | Route::JobUpdate => {
                job::is_opted_in(object) || old_object.is_some_and(job::is_opted_in)
            }
            Route::JobSetCreate | Route::JobSetUpdate => true,
        }
    }
}

/// The `validate` entry point: the response bytes for a payload.
pub fn validate(payload: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    // A mutated object is about the request's size: reserve it once, not grow it copy by copy.
    let mut out = Vec::with_capacity(payload.len().saturating_add(256));
    serde_json::to_writer(&mut out, &evaluate(payload).to_response())?;
    Ok(out)
}

/// Evaluates one `validate` payload, reading cluster objects through the host's capabilities.
/// Never panics on any input: every problem is a verdict.
pub fn evaluate(payload: &[u8]) -> Verdict {
    evaluate_with(payload, &queue_lookup::HostCapabilities)
}

/// [`evaluate`], reading cluster objects through `reader`.
pub fn evaluate_with(payload: &[u8], reader: &dyn ClusterReader) -> Verdict {
    let envelope: Envelope = match serde_json::from_slice(payload) {
        Ok(e) => e,
        Err(e) if e.is_data() => return InputError::NotARequest(e.to_string()).into(),
        Err(e) => return InputError::Malformed(e.to_string()).into(),
    };
    let request = envelope.request;
    let Some(route) = Route::of(&request) else {
        return Verdict::accept();
    };
    let Some(raw_object) = request.object else {
        return InputError::missing("request.object").into();
    };
    if !route.serves(raw_object, request.old_object) {
        return Verdict::accept();
    }
    let settings = match parse_settings(envelope.settings) {
        Ok(s) => s,
        Err(why) => return Verdict::reject(format!("the policy settings are invalid: {why}"), 500),
    };
    if !route.in_role(settings.role) {
        return Verdict::accept();
    }
    let object: Value = match serde_json::from_str(raw_object.get()) {
        Ok(v) => v,
        Err(e) => return InputError::Malformed(e.to_string()).into(),
    };
    // The old object is only a baseline; one that cannot be read has nothing to compare.
    let old = || -> Option<Value> {
        request
            .old_object
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
    };
    let result = match route {
        Route::PodCreate => pod::admit(object, &settings),
        Route::JobSetCreate => {
            let cluster = queue_lookup::Cluster {
                namespace: &request.namespace,
                reader,
                requester: &request.user_info.username,
            };
            jobset::admit_create(object, &settings, &cluster)
        }
        Route::JobSetUpdate => Ok(jobset::admit_update(&object, old().as_ref(), &settings)),
        Route::JobCreate => job::admit_create(object, &settings),
        Route::JobUpdate => Ok(job::admit_update(&object, old().as_ref(), &settings)),
    };
    result.unwrap_or_else(Verdict::from)
}

fn parse_settings(raw: Option<&RawValue>) -> Result<Settings, String> {
    let Some(raw) = raw else {
        return Ok(Settings::default());
    };
    let value: Value = serde_json::from_str(raw.get()).map_err(|e| e.to_string())?;
    Settings::from_json(&value).map_err(|errors| errors.join("; "))
}

/// Evaluates one `validate_settings` payload.
pub fn evaluate_settings(payload: &[u8]) -> SettingsValidationResponse {
    let parsed = serde_json::from_slice::<Value>(payload)
        .map_err(|e| vec![format!("settings are not valid JSON: {e}")])
        .and_then(|v| Settings::from_json(&v));
    let message = parsed.err().map(|errors| errors.join("; "));
    SettingsValidationResponse {
        valid: message.is_none(),
        message,
    }
}
