//! Dispatch on kind and operation (SPEC §5), and the cheap path for pods outside a JobSet.
mod job;

use crate::error::InputError;
use crate::groups;
use crate::jobset::JobSetView;
use crate::mutate;
use crate::pods;
use crate::rules::{self, Findings, Moment};
use crate::settings::Settings;
use crate::violation::{self, Violation};
use kubewarden_policy_sdk::response::ValidationResponse;
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

const JOBSET_GROUP: &str = "jobset.x-k8s.io";
const BATCH_GROUP: &str = "batch";

/// The parts of kwctl's `{"request": …, "settings": …}` needed to decide what to do. The
/// object stays raw: most pods are not JobSet pods and are never parsed into a tree.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    request: RequestHead<'a>,
    #[serde(borrow, default)]
    settings: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestHead<'a> {
    #[serde(borrow)]
    kind: Kind<'a>,
    #[serde(borrow, default)]
    operation: Cow<'a, str>,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    old_object: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(borrow, default)]
    group: Cow<'a, str>,
    #[serde(borrow, default)]
    kind: Cow<'a, str>,
}

/// Just enough of a pod to see whether the policy serves it: a JobSet pod (the `jobset-name`
/// label) or an opted-in Job's pod (the policy's facts annotation, SPEC §4.6).
#[derive(Deserialize)]
struct PodHead {
    #[serde(default)]
    metadata: Option<MetadataHead>,
}

#[derive(Deserialize)]
struct MetadataHead {
    #[serde(default)]
    labels: Option<LabelsHead>,
    #[serde(default)]
    annotations: Option<FactsHead>,
}

#[derive(Deserialize)]
struct FactsHead {
    #[serde(rename = "multislice.kubewarden.io/facts", default)]
    facts: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct LabelsHead {
    #[serde(rename = "jobset.sigs.k8s.io/jobset-name", default)]
    jobset_name: Option<IgnoredAny>,
}

/// The decision for one request, before it is serialized for the host.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    pub accepted: bool,
    pub message: Option<String>,
    pub code: Option<u16>,
    pub mutated_object: Option<Value>,
    pub warnings: Vec<String>,
}

impl Verdict {
    pub fn accept() -> Self {
        Verdict {
            accepted: true,
            ..Verdict::default()
        }
    }

    fn reject(message: String, code: u16) -> Self {
        Verdict {
            accepted: false,
            message: Some(message),
            code: Some(code),
            ..Verdict::default()
        }
    }

    fn with(mutated_object: Option<Value>, warnings: Vec<String>) -> Self {
        Verdict {
            accepted: true,
            mutated_object,
            warnings,
            ..Verdict::default()
        }
    }

    pub fn to_response(self) -> ValidationResponse {
        ValidationResponse {
            accepted: self.accepted,
            message: self.message,
            code: self.code,
            mutated_object: self.mutated_object,
            audit_annotations: None,
            warnings: (!self.warnings.is_empty()).then_some(self.warnings),
        }
    }
}

impl From<InputError> for Verdict {
    fn from(e: InputError) -> Self {
        Verdict::reject(e.to_string(), 400)
    }
}

/// The `validate` entry point: the response bytes for a payload.
pub fn validate(payload: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    // A mutated object is about the size of the request: reserve it once rather than grow
    // by doubling, each growth a copy.
    let mut out = Vec::with_capacity(payload.len().saturating_add(256));
    serde_json::to_writer(&mut out, &evaluate(payload).to_response())?;
    Ok(out)
}

/// Evaluates one `validate` payload. Never panics on any input: every problem is a verdict.
pub fn evaluate(payload: &[u8]) -> Verdict {
    let envelope: Envelope = match serde_json::from_slice(payload) {
        Ok(e) => e,
        Err(e) if e.is_data() => return InputError::NotARequest(e.to_string()).into(),
        Err(e) => return InputError::Malformed(e.to_string()).into(),
    };
    let request = envelope.request;
    let is_pod = request.kind.group.is_empty() && request.kind.kind == "Pod";
    let is_jobset = request.kind.group == JOBSET_GROUP && request.kind.kind == "JobSet";
    let is_job = request.kind.group == BATCH_GROUP && request.kind.kind == "Job";
    let is_update = request.operation == "UPDATE";
    let is_jobset_update = is_jobset && is_update;
    let judged = match request.operation.as_ref() {
        "CREATE" => is_pod || is_jobset || is_job,
        "UPDATE" => is_jobset || is_job,
        _ => false,
    };
    if !judged {
        // DELETE and CONNECT, and kinds the policy was not bound to, pass untouched.
        return Verdict::accept();
    }
    let Some(raw_object) = request.object else {
        return InputError::Missing {
            path: "request.object".into(),
        }
        .into();
    };
    // A Job UPDATE is judged when either side opted in: dropping the annotation in the same
    // UPDATE as a resize leaves the stamped template, which new pods copy, just as stale.
    let served_job =
        || job::is_opted_in(raw_object) || request.old_object.is_some_and(job::is_opted_in);
    if is_pod && !is_served_pod(raw_object) || is_job && !served_job() {
        return Verdict::accept();
    }
    let settings = match parse_settings(envelope.settings) {
        Ok(s) => s,
        Err(errors) => {
            return Verdict::reject(
                format!("the policy settings are invalid: {}", errors.join("; ")),
                500,
            )
        }
    };
    let object: Value = match serde_json::from_str(raw_object.get()) {
        Ok(v) => v,
        Err(e) => return InputError::Malformed(e.to_string()).into(),
    };
    if is_update {
        // The old object is only a baseline; one that cannot be read has nothing to compare.
        let old: Option<Value> = request
            .old_object
            .and_then(|raw| serde_json::from_str(raw.get()).ok());
        return if is_jobset_update {
            admit_jobset_update(&object, old.as_ref(), &settings)
        } else {
            job::admit_update(&object, old.as_ref(), &settings)
        };
    }
    let result = if is_job {
        job::admit_create(object, &settings)
    } else if is_pod {
        pods::admit(object, &settings).map(|o| Verdict::with(o.mutated, o.warnings))
    } else {
        admit_jobset_create(object, &settings)
    };
    result.unwrap_or_else(Verdict::from)
}

fn is_served_pod(raw: &RawValue) -> bool {
    // A pod whose metadata cannot even be read this far is left to the full parse, which
    // names the problem.
    match serde_json::from_str::<PodHead>(raw.get()) {
        Ok(head) => head.metadata.is_some_and(|m| {
            m.labels.is_some_and(|l| l.jobset_name.is_some())
                || m.annotations.is_some_and(|a| a.facts.is_some())
        }),
        Err(_) => true,
    }
}

fn parse_settings(raw: Option<&RawValue>) -> Result<Settings, Vec<String>> {
    match raw {
        None => Ok(Settings::default()),
        Some(raw) => {
            let value: Value = serde_json::from_str(raw.get()).map_err(|e| vec![e.to_string()])?;
            Settings::from_json(&value)
        }
    }
}

fn rejection(violations: &[Violation], warnings: Vec<String>) -> Verdict {
    Verdict {
        warnings,
        ..Verdict::reject(violation::message(violations), 400)
    }
}

fn admit_jobset_create(mut object: Value, settings: &Settings) -> Result<Verdict, InputError> {
    let (changes, warnings) = {
        let view = JobSetView::parse(&object, &settings.tpu_resource)?;
        let findings = rules::judge(&view, settings, Moment::Create)?;
        // Every parsed JobSet, judged or not: an empty value is as empty on a CPU pod.
        let references = pods::references::jobset_warnings(&view);
        let mut warnings = findings.warnings;
        if !findings.violations.is_empty() {
            warnings.extend(references);
            return Ok(rejection(&findings.violations, warnings));
        }
        let facts = groups::plan(&view, settings)?;
        warnings.extend(pods::contradictions::warnings(
            &object, &view, &facts, settings,
        )?);
        warnings.extend(references);
        (mutate::jobset::changes(&view, &facts), warnings)
    };
    if changes.is_empty() {
        return Ok(Verdict::with(None, warnings));
    }
    mutate::jobset::apply(&mut object, changes);
    Ok(Verdict::with(Some(object), warnings))
}

fn findings_of(object: &Value, settings: &Settings) -> Result<Findings, InputError> {
    let view = JobSetView::parse(object, &settings.tpu_resource)?;
    rules::judge(&view, settings, Moment::Update)
}

/// ElasticJobSet resizes that would leave stamped values stale (SPEC §5). Objects that cannot
/// be read have no sizes to compare; their problem is reported by the findings.
fn stale_resizes(object: &Value, old: Option<&Value>, settings: &Settings) -> Vec<String> {
    let Some(old) = old else {
        return Vec::new();
    };
    match (
        JobSetView::parse(old, &settings.tpu_resource),
        JobSetView::parse(object, &settings.tpu_resource),
    ) {
        (Ok(old), Ok(new)) => rules::elastic::stale_resizes(&old, &new, settings),
        _ => Vec::new(),
    }
}

/// JobSet UPDATE never mutates (`replicatedJobs` are immutable), and judges only what the
/// update changed: a violation the old object already had is not the update's fault, and
/// blocking an update the user cannot fix helps nobody. Unsuspending is a change: T3 and T4
/// were deferred on the suspended old object, so their violations count as new.
fn admit_jobset_update(object: &Value, old: Option<&Value>, settings: &Settings) -> Verdict {
    let before = old.map(|o| findings_of(o, settings));
    let after = match findings_of(object, settings) {
        Ok(f) => f,
        Err(e) if matches!(&before, Some(Err(old_e)) if *old_e == e) => return Verdict::accept(),
        Err(e) => return e.into(),
    };
    let (old_violations, old_warnings) = match before {
        Some(Ok(f)) => (f.violations, f.warnings),
        _ => (Vec::new(), Vec::new()),
    };
    let new_violations: Vec<Violation> = after
        .violations
        .into_iter()
        .filter(|v| !old_violations.contains(v))
        .collect();
    let new_warnings: Vec<String> = after
        .warnings
        .into_iter()
        .filter(|w| !old_warnings.contains(w))
        .collect();
    let stale = stale_resizes(object, old, settings);
    if new_violations.is_empty() && stale.is_empty() {
        Verdict::with(None, new_warnings)
    } else {
        let lines = std::iter::once(violation::message(&new_violations))
            .filter(|m| !m.is_empty())
            .chain(stale);
        Verdict {
            warnings: new_warnings,
            ..Verdict::reject(lines.collect::<Vec<_>>().join("\n"), 400)
        }
    }
}

/// Evaluates one `validate_settings` payload.
pub fn evaluate_settings(payload: &[u8]) -> SettingsValidationResponse {
    let parsed = serde_json::from_slice::<Value>(payload)
        .map_err(|e| vec![format!("settings are not valid JSON: {e}")])
        .and_then(|v| Settings::from_json(&v));
    match parsed {
        Ok(_) => SettingsValidationResponse {
            valid: true,
            message: None,
        },
        Err(errors) => SettingsValidationResponse {
            valid: false,
            message: Some(errors.join("; ")),
        },
    }
}
