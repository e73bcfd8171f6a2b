//! AdmissionRequests as the API server sends them to webhooks (and kwctl requires).
use serde_json::{json, Value};

/// The kinds the policy is bound to (docs/contributing/spec.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    JobSet,
    Pod,
    /// `batch/v1` Job (docs/contributing/spec.md §4.6).
    Job,
}

impl Kind {
    fn gvk(self) -> Value {
        match self {
            Kind::JobSet => {
                json!({"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"})
            }
            Kind::Pod => json!({"group": "", "version": "v1", "kind": "Pod"}),
            Kind::Job => json!({"group": "batch", "version": "v1", "kind": "Job"}),
        }
    }

    fn gvr(self) -> Value {
        match self {
            Kind::JobSet => {
                json!({"group": "jobset.x-k8s.io", "version": "v1alpha2", "resource": "jobsets"})
            }
            Kind::Pod => json!({"group": "", "version": "v1", "resource": "pods"}),
            Kind::Job => json!({"group": "batch", "version": "v1", "resource": "jobs"}),
        }
    }

    fn user(self) -> Value {
        match self {
            // JobSets and plain Jobs are created by people (or Kueue, xpk); pods by the Job
            // controller.
            Kind::JobSet | Kind::Job => {
                json!({"username": "alice@example.com", "groups": ["system:authenticated"]})
            }
            Kind::Pod => json!({
                "username": "system:serviceaccount:kube-system:job-controller",
                "uid": "0b0c3f8e-7d4f-4c41-9a53-2f4a6f0c9d11",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]
            }),
        }
    }
}

/// A stable uid per request, derived from its content, so fixtures are reproducible.
fn uid_for(seed: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let h2 = h.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15;
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        h2 >> 52,
        h2 & 0xffff_ffff_ffff
    )
}

/// An AdmissionRequest for `object`. `old_object` is given for UPDATE.
pub fn admission_request(
    kind: Kind,
    operation: &str,
    object: &Value,
    old_object: Option<&Value>,
) -> Value {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let seed = format!(
        "{operation}/{namespace}/{name}/{}",
        serde_json::to_string(object).unwrap_or_default().len()
    );
    let options = match operation {
        "CREATE" => json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}),
        "UPDATE" => json!({"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"}),
        _ => json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"}),
    };
    let mut request = json!({
        "uid": uid_for(&seed),
        "kind": kind.gvk(),
        "resource": kind.gvr(),
        "requestKind": kind.gvk(),
        "requestResource": kind.gvr(),
        "name": name,
        "namespace": namespace,
        "operation": operation,
        "userInfo": kind.user(),
        "object": object,
        "oldObject": old_object.cloned().unwrap_or(Value::Null),
        "dryRun": false,
        "options": options,
    });
    if operation == "DELETE" {
        request["object"] = Value::Null;
        request["oldObject"] = object.clone();
    }
    request
}
