//! kwctl's recorded sessions of host capability calls (`kwctl run
//! --replay-host-capabilities-interactions FILE`; kwctl, `src/callback_handler/proxy.rs`), and
//! a [`Session`] backend that replays one as kwctl does: strictly in order, each request
//! compared field for field with the recorded one, each recorded answer given once. A file is
//! a YAML list of exchanges:
//!
//! ```yaml
//! - type: Exchange
//!   request: |
//!     !KubernetesGetResource
//!     api_version: kueue.x-k8s.io/v1beta1
//!     kind: LocalQueue
//!     name: team-a-queue
//!     namespace: team-a
//!     disable_cache: false
//!   response:
//!     type: Success
//!     payload: '{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue",...}'
//! - type: Exchange
//!   request: ...
//!   response:
//!     type: Error
//!     message: ...
//! ```
//!
//! `request` is itself a YAML document: policy-evaluator's `CallbackRequestType`, externally
//! tagged; only `!KubernetesGetResource` is read here. A cluster-scoped object has
//! `namespace: null`. [`Recorder`] writes the same format from another backend's answers.
use crate::capabilities::{allowed_by_file, Capabilities, GetResource, KubernetesBackend};
use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// kwctl's answer when the policy asks more than the session recorded.
pub const EXHAUSTED: &str = "the list of recorded responses is empty";

/// One exchange of a session file, as kwctl writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
struct Exchange {
    request: String,
    response: Response,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
enum Response {
    Success { payload: String },
    Error { message: String },
}

/// The recorded request's YAML document, of the kinds this host reads.
#[derive(Debug, Serialize, Deserialize)]
enum Recorded {
    KubernetesGetResource(GetResource),
}

/// A recorded session, replayed in order.
pub struct Session {
    exchanges: Vec<(GetResource, Result<Vec<u8>, String>)>,
    next: Mutex<usize>,
}

impl Session {
    pub fn load(path: &Path) -> Result<Session> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Session::from_yaml(&text).with_context(|| format!("in {}", path.display()))
    }

    pub fn from_yaml(text: &str) -> Result<Session> {
        let exchanges: Vec<Exchange> = serde_yaml::from_str(text)?;
        let exchanges = exchanges
            .into_iter()
            .enumerate()
            .map(|(i, exchange)| {
                let Recorded::KubernetesGetResource(request) =
                    serde_yaml::from_str(&exchange.request)
                        .map_err(|e| anyhow!("exchange {i}: request: {e}"))?;
                let answer = match exchange.response {
                    Response::Success { payload } => Ok(payload.into_bytes()),
                    Response::Error { message } => Err(message),
                };
                Ok((request, answer))
            })
            .collect::<Result<_>>()?;
        Ok(Session {
            exchanges,
            next: Mutex::new(0),
        })
    }

    /// The exchanges not replayed yet (kwctl warns of leftovers when it stops).
    pub fn remaining(&self) -> usize {
        self.exchanges.len() - *self.cursor()
    }

    /// Starts the session over (for the bench, which replays one session per evaluation).
    pub fn rewind(&self) {
        *self.cursor() = 0;
    }

    fn cursor(&self) -> std::sync::MutexGuard<'_, usize> {
        self.next.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl KubernetesBackend for Session {
    /// kwctl's `produce_recorded_response`: the next exchange is used up whether or not the
    /// request matches it.
    fn get_resource(&self, request: &GetResource) -> Result<Vec<u8>, String> {
        let mut next = self.cursor();
        let Some((expected, answer)) = self.exchanges.get(*next) else {
            return Err(EXHAUSTED.to_string());
        };
        *next += 1;
        if expected != request {
            return Err(format!(
                "Replay error: unexpected request. Was expecting {expected:?}, got {request:?} instead"
            ));
        }
        answer.clone()
    }
}

/// What `kwctl run --allow-context-aware --replay-host-capabilities-interactions SESSION`
/// gives a policy: the kinds of the metadata's `contextAwareResources` (`metadata`, such as
/// `policy-metadata.yml`), answered from the session; the session is returned too, to check
/// that every answer was read ([`Session::remaining`]).
pub fn replay_as_kwctl(session: &Path, metadata: &Path) -> Result<(Capabilities, Arc<Session>)> {
    let session = Arc::new(Session::load(session)?);
    let allowed = allowed_by_file(metadata)?;
    Ok((Capabilities::kubernetes(session.clone(), allowed), session))
}

/// Asks another backend and keeps each exchange, to write a session file as kwctl's
/// `--record-host-capabilities-interactions` does.
pub struct Recorder {
    inner: Arc<dyn KubernetesBackend>,
    exchanges: Mutex<Vec<Exchange>>,
}

impl Recorder {
    pub fn new(inner: Arc<dyn KubernetesBackend>) -> Recorder {
        Recorder {
            inner,
            exchanges: Mutex::new(Vec::new()),
        }
    }

    /// The session so far, in kwctl's format.
    pub fn to_yaml(&self) -> Result<String> {
        let exchanges = self.exchanges.lock().unwrap_or_else(|e| e.into_inner());
        Ok(serde_yaml::to_string(&*exchanges)?)
    }
}

impl KubernetesBackend for Recorder {
    fn get_resource(&self, request: &GetResource) -> Result<Vec<u8>, String> {
        let answer = self.inner.get_resource(request);
        let response = match &answer {
            Ok(payload) => Response::Success {
                payload: String::from_utf8(payload.clone())
                    .map_err(|e| format!("cannot convert response payload to utf8: {e}"))?,
            },
            Err(message) => Response::Error {
                message: message.clone(),
            },
        };
        let request = serde_yaml::to_string(&Recorded::KubernetesGetResource(request.clone()))
            .map_err(|e| format!("cannot convert request to yaml: {e}"))?;
        self.exchanges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Exchange { request, response });
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUEUE: &str = "kueue.x-k8s.io/v1beta1";

    /// As kwctl writes a session (`serde_yaml::to_writer` of the exchanges).
    const SESSION: &str = r#"- type: Exchange
  request: |
    !KubernetesGetResource
    api_version: kueue.x-k8s.io/v1beta1
    kind: LocalQueue
    name: team-a-queue
    namespace: team-a
    disable_cache: false
  response:
    type: Success
    payload: '{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"team-a-queue","namespace":"team-a"},"spec":{"clusterQueue":"cq"}}'
- type: Exchange
  request: |
    !KubernetesGetResource
    api_version: kueue.x-k8s.io/v1beta1
    kind: ClusterQueue
    name: cq
    namespace: null
    disable_cache: false
    field_masks: null
  response:
    type: Error
    message: 'clusterqueues.kueue.x-k8s.io "cq" is forbidden'
"#;

    fn local_queue() -> GetResource {
        GetResource::new(KUEUE, "LocalQueue", "team-a-queue", Some("team-a"))
    }

    fn cluster_queue() -> GetResource {
        GetResource::new(KUEUE, "ClusterQueue", "cq", None)
    }

    #[test]
    fn a_session_answers_in_order_then_is_exhausted() {
        let session = Session::from_yaml(SESSION).unwrap();
        assert_eq!(session.remaining(), 2);
        assert_eq!(
            session.get_resource(&local_queue()),
            Ok(br#"{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"team-a-queue","namespace":"team-a"},"spec":{"clusterQueue":"cq"}}"#.to_vec())
        );
        assert_eq!(
            session.get_resource(&cluster_queue()),
            Err(r#"clusterqueues.kueue.x-k8s.io "cq" is forbidden"#.to_string())
        );
        assert_eq!(session.remaining(), 0);
        assert_eq!(
            session.get_resource(&local_queue()),
            Err("the list of recorded responses is empty".to_string())
        );
        session.rewind();
        assert_eq!(session.remaining(), 2);
    }

    #[test]
    fn a_request_out_of_order_is_refused_and_uses_up_its_exchange() {
        let session = Session::from_yaml(SESSION).unwrap();
        assert_eq!(
            session.get_resource(&cluster_queue()),
            Err(r#"Replay error: unexpected request. Was expecting KubernetesGetResource { api_version: "kueue.x-k8s.io/v1beta1", kind: "LocalQueue", name: "team-a-queue", namespace: Some("team-a"), disable_cache: false, field_masks: None }, got KubernetesGetResource { api_version: "kueue.x-k8s.io/v1beta1", kind: "ClusterQueue", name: "cq", namespace: None, disable_cache: false, field_masks: None } instead"#.to_string())
        );
        assert_eq!(
            session.get_resource(&cluster_queue()),
            Err(r#"clusterqueues.kueue.x-k8s.io "cq" is forbidden"#.to_string())
        );
    }

    #[test]
    fn every_field_is_compared() {
        let mut variants = vec![local_queue(); 6];
        variants[0].api_version = "kueue.x-k8s.io/v1beta2".to_string();
        variants[1].kind = "ClusterQueue".to_string();
        variants[2].name = "other".to_string();
        variants[3].namespace = None;
        variants[4].disable_cache = true;
        variants[5].field_masks = Some(["spec".to_string()].into());
        for variant in variants {
            let session = Session::from_yaml(SESSION).unwrap();
            let answer = session.get_resource(&variant);
            assert!(
                answer
                    .as_ref()
                    .is_err_and(|e| e.starts_with("Replay error: unexpected request.")),
                "{variant:?}: {answer:?}"
            );
        }
    }

    #[test]
    fn a_recorder_writes_what_a_session_replays() {
        let recorder = Recorder::new(Arc::new(Session::from_yaml(SESSION).unwrap()));
        recorder.get_resource(&local_queue()).unwrap();
        recorder.get_resource(&cluster_queue()).unwrap_err();
        recorder.get_resource(&local_queue()).unwrap_err();
        let yaml = recorder.to_yaml().unwrap();
        let replayed = Session::from_yaml(&yaml).unwrap();
        assert_eq!(replayed.remaining(), 3);
        let original = Session::from_yaml(SESSION).unwrap();
        for request in [local_queue(), cluster_queue()] {
            assert_eq!(
                replayed.get_resource(&request),
                original.get_resource(&request)
            );
        }
        assert_eq!(
            replayed.get_resource(&local_queue()),
            Err(EXHAUSTED.to_string())
        );
        assert!(
            yaml.starts_with("- type: Exchange\n  request: |\n    !KubernetesGetResource\n    api_version: kueue.x-k8s.io/v1beta1\n"),
            "{yaml}"
        );
    }

    #[test]
    fn kwctl_replay_grants_the_metadata_kinds_from_the_session() {
        let dir = std::env::temp_dir().join(format!("session-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (session_file, metadata) = (dir.join("session.yml"), dir.join("metadata.yml"));
        std::fs::write(&session_file, SESSION).unwrap();
        std::fs::write(
            &metadata,
            "rules: []\ncontextAwareResources:\n- apiVersion: kueue.x-k8s.io/v1beta1\n  kind: LocalQueue\n",
        )
        .unwrap();
        let (capabilities, session) = replay_as_kwctl(&session_file, &metadata).unwrap();
        let call = |request: &GetResource| {
            let payload = serde_json::to_vec(request).unwrap();
            capabilities.host_call("kubewarden", "kubernetes", "get_resource", &payload)
        };
        assert!(call(&local_queue()).is_ok());
        assert_eq!(
            call(&cluster_queue()),
            Err(crate::capabilities::not_granted(KUEUE, "ClusterQueue"))
        );
        assert_eq!(
            session.remaining(),
            1,
            "a refused call never reaches the session"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_session_with_other_calls_is_not_read() {
        let yaml = "- type: Exchange\n  request: |\n    !DNSLookupHost\n    host: example.com\n  response:\n    type: Success\n    payload: '[]'\n";
        let e = Session::from_yaml(yaml).err().unwrap();
        assert!(
            format!("{e}").starts_with("exchange 0: request: unknown variant `DNSLookupHost`"),
            "{e}"
        );
    }
}
