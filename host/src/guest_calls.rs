//! The runner's host calls end to end, through a waPC guest of a few lines (text format) that
//! forwards each call's payload to `kubewarden/kubernetes/get_resource` and answers with the
//! host's response, or fails with the host's error: what the policy reads, byte for byte.
use crate::capabilities::{Capabilities, ContextAwareResource};
use crate::session::Session;
use crate::Policy;
use serde_json::json;
use std::sync::Arc;

const GUEST: &str = r#"
(module
  (import "wapc" "__guest_request" (func $guest_request (param i32 i32)))
  (import "wapc" "__guest_response" (func $guest_response (param i32 i32)))
  (import "wapc" "__guest_error" (func $guest_error (param i32 i32)))
  (import "wapc" "__host_call"
    (func $host_call (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "wapc" "__host_response_len" (func $host_response_len (result i32)))
  (import "wapc" "__host_response" (func $host_response (param i32)))
  (import "wapc" "__host_error_len" (func $host_error_len (result i32)))
  (import "wapc" "__host_error" (func $host_error (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "kubewardenkubernetesget_resource")
  (func (export "__guest_call") (param $op_len i32) (param $msg_len i32) (result i32)
    (local $len i32)
    ;; operation at 1024, payload at 2048, answers at 8192
    (call $guest_request (i32.const 1024) (i32.const 2048))
    (if (result i32)
      (call $host_call (i32.const 0) (i32.const 10) (i32.const 10) (i32.const 10)
                       (i32.const 20) (i32.const 12) (i32.const 2048) (local.get $msg_len))
      (then
        (local.set $len (call $host_response_len))
        (call $host_response (i32.const 8192))
        (call $guest_response (i32.const 8192) (local.get $len))
        (i32.const 1))
      (else
        (local.set $len (call $host_error_len))
        (call $host_error (i32.const 8192))
        (call $guest_error (i32.const 8192) (local.get $len))
        (i32.const 0)))))
"#;

const KUEUE: &str = "kueue.x-k8s.io/v1beta1";

const SESSION: &str = r#"- type: Exchange
  request: |
    !KubernetesGetResource
    api_version: kueue.x-k8s.io/v1beta1
    kind: ResourceFlavor
    name: v5p
    namespace: null
    disable_cache: false
  response:
    type: Success
    payload: '{"kind":"ResourceFlavor","metadata":{"name":"v5p"}}'
"#;

fn guest() -> Policy {
    Policy::from_bytes(&wat::parse_str(GUEST).unwrap()).unwrap()
}

fn get(name: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "api_version": KUEUE, "kind": "ResourceFlavor", "name": name, "namespace": null,
        "disable_cache": false, "field_masks": null,
    }))
    .unwrap()
}

fn granted(session: Arc<Session>) -> Capabilities {
    Capabilities::kubernetes(
        session,
        [ContextAwareResource::new(KUEUE, "ResourceFlavor")],
    )
}

#[test]
fn the_guest_reads_the_session_answer_then_kwctl_refusal_text() {
    let session = Arc::new(Session::from_yaml(SESSION).unwrap());
    let policy = guest().with_capabilities(granted(session.clone()));
    let instance = policy.instance().unwrap();
    assert_eq!(
        instance.call("lookup", &get("v5p")).unwrap(),
        br#"{"kind":"ResourceFlavor","metadata":{"name":"v5p"}}"#
    );
    assert_eq!(session.remaining(), 0);
    assert_eq!(
        format!("{:#}", instance.call("lookup", &get("v5p")).unwrap_err()),
        "the policy failed in lookup: Guest call failure: Callback evaluation failure: the list of recorded responses is empty"
    );
}

#[test]
fn each_served_copy_keeps_its_own_capabilities() {
    let module = guest();
    let session = Arc::new(Session::from_yaml(SESSION).unwrap());
    let with = module.with_capabilities(granted(session.clone()));
    assert_eq!(
        format!("{:#}", module.call("lookup", &get("v5p")).unwrap_err()),
        "the policy failed in lookup: Guest call failure: Policy has not been granted access to Kubernetes kueue.x-k8s.io/v1beta1/ResourceFlavor resources. The violation has been reported."
    );
    assert_eq!(session.remaining(), 1, "the module alone never reached it");
    assert_eq!(
        format!("{:#}", with.call("lookup", &get("other")).unwrap_err()),
        "the policy failed in lookup: Guest call failure: Callback evaluation failure: Replay error: unexpected request. Was expecting KubernetesGetResource { api_version: \"kueue.x-k8s.io/v1beta1\", kind: \"ResourceFlavor\", name: \"v5p\", namespace: None, disable_cache: false, field_masks: None }, got KubernetesGetResource { api_version: \"kueue.x-k8s.io/v1beta1\", kind: \"ResourceFlavor\", name: \"other\", namespace: None, disable_cache: false, field_masks: None } instead"
    );
}
