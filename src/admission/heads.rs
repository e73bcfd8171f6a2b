//! The cheap reads: just enough of kwctl's payload to decide what to do, borrowed from the
//! bytes. The object stays raw: most pods are not JobSet pods and are never parsed into a tree.
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// The parts of kwctl's `{"request": …, "settings": …}` needed to decide what to do.
#[derive(Deserialize)]
pub(super) struct Envelope<'a> {
    #[serde(borrow)]
    pub(super) request: RequestHead<'a>,
    #[serde(borrow)]
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
    #[serde(borrow)]
    pub(super) object: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) old_object: Option<&'a RawValue>,
    /// Who asks: a MultiKueue manager's identity makes the copies it dispatches (SPEC §5).
    #[serde(borrow, default)]
    pub(super) user_info: UserInfo<'a>,
}

#[derive(Deserialize, Default)]
pub(super) struct UserInfo<'a> {
    #[serde(borrow, default)]
    pub(super) username: Cow<'a, str>,
}

#[derive(Deserialize)]
pub(super) struct Kind<'a> {
    #[serde(borrow, default)]
    pub(super) group: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) kind: Cow<'a, str>,
}

/// Just enough of a pod or a Job to see whether the policy serves it: the JobSet controller's
/// label, whose presence makes it a JobSet's, and the annotations `A` its kind is served by.
#[derive(Deserialize)]
pub(super) struct ObjectHead<A> {
    pub(super) metadata: Option<MetadataHead<A>>,
}

#[derive(Deserialize)]
pub(super) struct MetadataHead<A> {
    pub(super) labels: Option<LabelsHead>,
    pub(super) annotations: Option<A>,
}

#[derive(Deserialize)]
pub(super) struct LabelsHead {
    #[serde(rename = "jobset.sigs.k8s.io/jobset-name")]
    pub(super) jobset_name: Option<IgnoredAny>,
}
