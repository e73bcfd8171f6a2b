//! The edge: kwctl's payload in, a verdict out. Dispatch on kind and operation (docs/spec.md §5),
//! with the cheap path that lets a pod outside any JobSet, or a Job that did not opt in, pass
//! without being parsed. One file per kind: `jobset`, `job` and `pod`.
mod contradictions;
mod envelope;
mod heads;
mod job;
mod jobset;
mod pod;
pub mod queue_lookup;
mod read;
mod references;
mod verdict;

pub use verdict::Verdict;

use crate::arena;
use crate::error::InputError;
use crate::settings::{Role, Settings};
use crate::views::lean_tree::{self, LeanRead, JOBSET_POD_SPECS, JOB_POD_SPEC, POD_SPEC};
use crate::views::pod_text::PodText;
use heads::{Envelope, Head, BATCH_GROUP, JOBSET_GROUP};
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use queue_lookup::ClusterReader;
use read::Read;
use serde_json::Value;

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
    fn of(request: &Head) -> Option<Route> {
        match (
            request.group.as_ref(),
            request.kind.as_ref(),
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

    /// Whether the role does anything with these requests (docs/spec.md §5): pods are only mutated,
    /// UPDATEs only judged.
    fn in_role(self, role: Role) -> bool {
        match self {
            Route::PodCreate => role.mutates(),
            Route::JobSetUpdate | Route::JobUpdate => role.judges(),
            Route::JobSetCreate | Route::JobCreate => true,
        }
    }

    /// Whether the object is the policy's, from the cheap reads alone. A Job UPDATE is judged
    /// when either side opted in: dropping the annotation in the same UPDATE as a resize
    /// leaves the stamped template, which new pods copy, just as stale.
    fn serves(self, object: &str, old_object: Option<&str>) -> bool {
        match self {
            Route::PodCreate => pod::is_served(object),
            // Read to the first `metadata` only: `job::admit_create` reads again when the Job's
            // root repeats a key.
            Route::JobCreate => job::opts_in_at_first_metadata(object),
            Route::JobUpdate => {
                job::is_opted_in(object) || old_object.is_some_and(job::is_opted_in)
            }
            Route::JobSetCreate | Route::JobSetUpdate => true,
        }
    }
}

/// The `validate` entry point: the response bytes for a payload.
pub fn validate(payload: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    // The answer reserves its own size (a mutated object is most of it) rather than grow by
    // doubling, each growth a copy.
    let mut out = Vec::with_capacity(256);
    evaluate(payload).write_response(&mut out)?;
    Ok(out)
}

/// Evaluates one `validate` payload, reading cluster objects through the host's capabilities.
/// Never panics on any input: every problem is a verdict.
pub fn evaluate(payload: &[u8]) -> Verdict {
    evaluate_with(payload, &queue_lookup::HostCapabilities)
}

/// [`evaluate`], reading cluster objects through `reader`.
pub fn evaluate_with(payload: &[u8], reader: &dyn ClusterReader) -> Verdict {
    // Checked as UTF-8 once, the payload is read as text, by the cursor where it can be and
    // else by serde, which then checks no string and no captured object again. A payload that
    // is not UTF-8 is serde's to refuse, in its words.
    let envelope = match std::str::from_utf8(payload) {
        Ok(text) => match fused(text, reader) {
            Some(verdict) => return verdict,
            None => serde_json::from_str::<Envelope>(text),
        },
        Err(_) => serde_json::from_slice(payload),
    };
    by_serde(envelope, reader)
}

/// The payload's envelope as serde read it.
fn by_serde(envelope: serde_json::Result<Envelope>, reader: &dyn ClusterReader) -> Verdict {
    match envelope {
        Ok(envelope) => admit(Head::from(envelope), None, reader),
        Err(e) if e.is_data() => InputError::NotARequest(e.to_string()).into(),
        Err(e) => InputError::Malformed(e.to_string()).into(),
    }
}

/// The payload read by the cursor ([`envelope`]), a JobSet's object lean read there, once;
/// `None` where serde must read the payload, and the answer is then serde's.
fn fused(text: &str, reader: &dyn ClusterReader) -> Option<Verdict> {
    let mut head = envelope::read(text)?;
    let read = head.object_read.take();
    let read = match Route::of(&head) {
        Some(Route::JobSetCreate) => read,
        Some(Route::JobSetUpdate) => read.map(|read| LeanRead::whole(read.tree)),
        _ => None,
    };
    Some(admit(head, read, reader))
}

/// The verdict on a payload read, `read` the object's lean read where it was read already.
fn admit(request: Head, read: Option<LeanRead>, reader: &dyn ClusterReader) -> Verdict {
    let Some(route) = Route::of(&request) else {
        return Verdict::accept();
    };
    let Some(text) = request.object else {
        return InputError::Missing {
            path: "request.object".into(),
        }
        .into();
    };
    // A pod is read from its text: whether it is served, and then only the parts its view
    // reads. A pod of a shape that reading does not expect is read whole, as any object.
    let pod_text = match route {
        Route::PodCreate => PodText::read(text),
        _ => None,
    };
    let served = match &pod_text {
        Some(pod) => pod.is_served(),
        None => route.serves(text, request.old_object),
    };
    if !served {
        return Verdict::accept();
    }
    let settings = match parse_settings(request.settings) {
        Ok(s) => s,
        // A Job CREATE was served on its first `metadata`: one that serde's whole read does not
        // serve passes, as it did before its settings were read.
        Err(_) if route == Route::JobCreate && !job::is_opted_in(text) => return Verdict::accept(),
        Err(errors) => {
            return Verdict::reject(
                format!("the policy settings are invalid: {}", errors.join("; ")),
                500,
            )
        }
    };
    if !route.in_role(settings.role) {
        return Verdict::accept();
    }
    let read_from_text = pod_text.as_ref().and_then(|pod| Some((pod, pod.maps()?)));
    let (object, pod_read) = match read_from_text {
        Some((pod, maps)) => (
            arena::building_tree(|| pod.tree()).map(LeanRead::whole),
            Some(pod::FromText {
                maps,
                roots: pod.roots(),
            }),
        ),
        None => (read.map_or_else(|| read_tree(route, text), Ok), None),
    };
    let mut object = match object {
        Ok(read) => Read::new(read, text),
        Err(e) => return InputError::Malformed(e.to_string()).into(),
    };
    let result = match route {
        Route::PodCreate => pod::admit(&mut object.tree, pod_read, text, &settings),
        Route::JobSetCreate => {
            let cluster = jobset::Cluster {
                namespace: &request.namespace,
                reader,
            };
            jobset::admit_create(object, &settings, &cluster)
        }
        Route::JobCreate => job::admit_create(object, &settings),
        Route::JobSetUpdate | Route::JobUpdate => {
            // The old object is only a baseline; one that cannot be read has nothing to
            // compare. A `Read`, so that its tree is abandoned too.
            let old = request
                .old_object
                .and_then(|text| Some(Read::new(read_tree(route, text).ok()?, text)));
            let old_tree = old.as_ref().map(|old| &old.tree);
            Ok(match route {
                Route::JobSetUpdate => jobset::admit_update(&object.tree, old_tree, &settings),
                _ => job::admit_update(&object.tree, old_tree, &settings),
            })
        }
    };
    result.unwrap_or_else(Verdict::from)
}

/// The object's tree, and where its pod templates are when it is created.
fn read_tree(route: Route, text: &str) -> Result<LeanRead, serde_json::Error> {
    arena::building_tree(|| match route {
        Route::JobSetCreate => lean_tree::read_with_templates(text, &JOBSET_POD_SPECS),
        Route::JobCreate => lean_tree::read_with_templates(text, &JOB_POD_SPEC),
        Route::JobSetUpdate => lean_tree::read(text, &JOBSET_POD_SPECS).map(LeanRead::whole),
        Route::JobUpdate => lean_tree::read(text, &JOB_POD_SPEC).map(LeanRead::whole),
        Route::PodCreate => lean_tree::read(text, &POD_SPEC).map(LeanRead::whole),
    })
}

fn parse_settings(raw: Option<&str>) -> Result<Settings, Vec<String>> {
    match raw {
        // What policy-server sends a policy deployed without settings, on every request: the
        // defaults, which are valid, without a parse and a check of every key.
        None => Ok(Settings::default()),
        Some("{}") => Ok(Settings::default()),
        Some(raw) => {
            let value: Value = serde_json::from_str(raw).map_err(|e| vec![e.to_string()])?;
            Settings::from_json(&value)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_text::PathStep;
    use crate::mutate::splice::Written;
    use crate::mutate::{object_at, path_to, pod_template_steps};
    use crate::views::lean_tree::Templates;
    use serde_json::json;

    /// A payload that is not UTF-8 is read as serde reads bytes: refused in its words where
    /// it reads the bad byte (in the object it captures), and let through where it skips it.
    #[test]
    fn a_payload_that_is_not_utf8_is_read_as_serde_reads_bytes() {
        let in_object = b"{\"request\": {\"kind\": {\"kind\": \"Pod\"}, \"operation\": \"CREATE\", \"object\": {\"a\": \"\xc3\"}}}";
        let serde = serde_json::from_slice::<Envelope>(in_object).err().unwrap();
        assert!(
            serde.to_string().contains("invalid unicode code point"),
            "{serde}"
        );
        let refused: Verdict = InputError::Malformed(serde.to_string()).into();
        assert_eq!(evaluate(in_object), refused);
        let in_uid = b"{\"request\": {\"uid\": \"\xff\", \"kind\": {\"kind\": \"Pod\"}, \"operation\": \"CREATE\", \"object\": {\"metadata\": {}}}}";
        assert_eq!(evaluate(in_uid), Verdict::accept());
    }

    /// Spliced from the pod templates found, or from the root: the same bytes, whether the
    /// policy adds to a template's metadata, creates it, or writes deep in its spec.
    #[test]
    fn a_splice_from_the_pod_templates_is_the_splice_from_the_root() {
        let text = r#"{"kind":"JobSet","metadata":{"name":"js"},
          "spec": {"replicatedJobs": [
            {"name":"a","template":{"spec":{"template":
              {"metadata": {"annotations": {"k": "v"}}, "spec": {"containers": [{"name": "c"}]}}}}},
            {"name":"b","template":{"spec":{"parallelism":2,"template":
              {"spec":{"affinity":null,"containers":[{"name":"c","env":[{"name":"A","value":"\u0031"}]}]}}}}}
          ]}}"#;
        let LeanRead {
            mut tree,
            templates,
            ..
        } = read_tree(Route::JobSetCreate, text).unwrap();
        assert_eq!(templates.len(), 2);
        let [a, b] = [pod_template_steps(0), pod_template_steps(1)];
        let mut written = Written::new();
        for (template, labels) in [(&a, json!({"g": "a"})), (&b, json!({"g": "b"}))] {
            let metadata = object_at(&mut tree, &path_to(template, &["metadata"])).unwrap();
            metadata.insert("labels".into(), labels);
            written.push(path_to(template, &["metadata", "labels"]));
        }
        let env =
            tree.pointer_mut("/spec/replicatedJobs/1/template/spec/template/spec/containers/0/env");
        let env = env.and_then(Value::as_array_mut).unwrap();
        env.insert(0, json!({"name": "B", "value": "2"}));
        let mut to_env = path_to(&b, &["spec", "containers"]);
        to_env.extend([PathStep::Index(0), PathStep::Key("env")]);
        written.push(to_env);
        let spec = object_at(&mut tree, &path_to(&b, &["spec"])).unwrap();
        spec.insert("affinity".into(), json!({"nodeAffinity": {}}));
        written.push(path_to(&b, &["spec", "affinity"]));

        let spliced = |templates| {
            let read = Read {
                tree: tree.clone(),
                text,
                templates,
                root_may_repeat_a_key: false,
            };
            let verdict = read.mutated(&written, Vec::new()).unwrap();
            String::from_utf8(verdict.mutated_json.unwrap()).unwrap()
        };
        let from_templates = spliced(templates);
        assert_eq!(from_templates, spliced(Templates::new()));
        let mut expected: Value = serde_json::from_str(text).unwrap();
        let at = |i: usize| format!("/spec/replicatedJobs/{i}/template/spec/template");
        let a_template = expected.pointer_mut(&at(0)).unwrap();
        a_template["metadata"]["labels"] = json!({"g": "a"});
        let b_template = expected.pointer_mut(&at(1)).unwrap();
        b_template["metadata"] = json!({"labels": {"g": "b"}});
        b_template["spec"]["affinity"] = json!({"nodeAffinity": {}});
        let b_env = b_template["spec"]["containers"][0]["env"]
            .as_array_mut()
            .unwrap();
        b_env.insert(0, json!({"name": "B", "value": "2"}));
        assert_eq!(
            serde_json::from_str::<Value>(&from_templates).unwrap(),
            expected
        );
        // Of the text, only what was written changed.
        assert!(from_templates.contains(r#"{"name":"A","value":"\u0031"}"#));
    }
}
