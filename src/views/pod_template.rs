//! A pod template, as a JobSet's replicated job and an opted-in plain Job both carry it: its
//! metadata, how its pods resolve names, and its containers with their env. One parse for both
//! kinds; each kind reads its own extras from the pod spec this returns beside the view.
use crate::error::InputError;
use crate::json::{self, join, map_str, Lazy, Object, PathLike};
use crate::views::pod_spec::{self, ContainerView};

#[derive(Debug)]
pub struct PodTemplateView<'a> {
    /// The template, for messages.
    pub path: String,
    /// Its pod spec, `<template>.spec`, for messages.
    pub spec_path: String,
    /// `metadata.annotations`: the policy's facts and mark, and what the pods copy.
    pub annotations: Option<&'a Object>,
    /// `metadata.labels`, read only for the keys present.
    pub labels: Option<&'a Object>,
    /// `hostNetwork` and `dnsPolicy` of the pod spec: how its pods resolve names (N2).
    pub host_network: bool,
    pub dns_policy: Option<&'a str>,
    /// The pod spec's containers, each with its own env.
    pub containers: Vec<ContainerView<'a>>,
}

impl<'a> PodTemplateView<'a> {
    /// Reads the pod template under `parent[key]`, where `parent` is at `parent_path`; returns
    /// its pod spec too, for what only one kind reads.
    pub fn parse(
        parent: &'a Object,
        key: &str,
        parent_path: &str,
        tpu_resource: &str,
    ) -> Result<(Self, &'a Object), InputError> {
        let t_path = join(parent_path, key);
        let template = required(parent, key, parent_path)?;
        let metadata = json::opt_object(template, "metadata", t_path.as_str())?;
        let annotations = match metadata {
            Some(m) => json::opt_string_map(m, "annotations", Lazy(|| join(&t_path, "metadata")))?,
            None => None,
        };
        let spec = required(template, "spec", t_path.as_str())?;
        let spec_path = join(&t_path, "spec");
        let view = PodTemplateView {
            annotations,
            labels: metadata.and_then(|m| json::field(m, "labels")?.as_object()),
            host_network: json::opt_bool(spec, "hostNetwork", spec_path.as_str())?.unwrap_or(false),
            dns_policy: json::opt_str(spec, "dnsPolicy", spec_path.as_str())?,
            containers: pod_spec::containers(spec, &spec_path, tpu_resource)?,
            spec_path,
            path: t_path,
        };
        Ok((view, spec))
    }

    /// An annotation of the template.
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        map_str(self.annotations, key)
    }

    /// `<template>.metadata.annotations[key]`, for messages.
    pub fn annotation_path(&self, key: &str) -> String {
        format!("{}.metadata.annotations[{key:?}]", self.path)
    }

    /// `<spec>.<list>[<index>]` of one of its containers, for messages.
    pub fn container_path(&self, c: &ContainerView) -> String {
        c.path(&self.spec_path)
    }

    pub fn is_tpu(&self) -> bool {
        self.containers.iter().any(ContainerView::is_tpu)
    }
}

/// `obj[key]`, an object that must be there.
pub fn required<'a>(
    obj: &'a Object,
    key: &str,
    path: impl PathLike,
) -> Result<&'a Object, InputError> {
    json::opt_object(obj, key, path)?.ok_or_else(|| InputError::Missing {
        path: join(&path.render(), key),
    })
}
