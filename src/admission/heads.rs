//! The cheap reads: just enough of kwctl's payload to decide what to do, borrowed from the
//! bytes. The object stays raw: most pods are not JobSet pods and are never parsed into a tree.
use crate::views::lean_tree::LeanRead;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

pub(super) const JOBSET_GROUP: &str = "jobset.x-k8s.io";
pub(super) const BATCH_GROUP: &str = "batch";

/// The parts of kwctl's `{"request": …, "settings": …}` needed to decide what to do.
#[derive(Deserialize)]
pub(super) struct Envelope<'a> {
    #[serde(borrow)]
    pub(super) request: RequestHead<'a>,
    #[serde(borrow, default)]
    pub(super) settings: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RequestHead<'a> {
    #[serde(borrow)]
    pub(super) kind: Kind<'a>,
    #[serde(borrow, default)]
    pub(super) operation: Cow<'a, str>,
    /// The object's namespace: where its Kueue LocalQueue is.
    #[serde(borrow, default)]
    pub(super) namespace: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(super) old_object: Option<&'a RawValue>,
}

#[derive(Deserialize)]
pub(super) struct Kind<'a> {
    #[serde(borrow, default)]
    pub(super) group: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) kind: Cow<'a, str>,
}

/// The JobSet controller's label, whose presence makes a pod (or a Job) a JobSet's.
#[derive(Deserialize)]
pub(super) struct LabelsHead {
    #[serde(rename = "jobset.sigs.k8s.io/jobset-name", default)]
    pub(super) jobset_name: Option<IgnoredAny>,
}

/// What the policy reads of a payload, by serde ([`Envelope`]) or by the cursor
/// (`envelope::read`): the texts of the object, the old object and the settings.
pub(super) struct Head<'a> {
    pub(super) group: Cow<'a, str>,
    pub(super) kind: Cow<'a, str>,
    pub(super) operation: Cow<'a, str>,
    pub(super) namespace: Cow<'a, str>,
    pub(super) object: Option<&'a str>,
    pub(super) old_object: Option<&'a str>,
    pub(super) settings: Option<&'a str>,
    /// A JobSet's object, lean read where the cursor met it (`envelope`).
    pub(super) object_read: Option<LeanRead>,
}

impl<'a> From<Envelope<'a>> for Head<'a> {
    fn from(envelope: Envelope<'a>) -> Self {
        let request = envelope.request;
        Head {
            group: request.kind.group,
            kind: request.kind.kind,
            operation: request.operation,
            namespace: request.namespace,
            object: request.object.map(RawValue::get),
            old_object: request.old_object.map(RawValue::get),
            settings: envelope.settings.map(RawValue::get),
            object_read: None,
        }
    }
}
