//! A pod template, as a JobSet's replicated job and an opted-in plain Job both carry it: its
//! metadata, how its pods resolve names, and its containers with their env. One parse for both
//! kinds; each kind reads its own extras from the pod spec this returns beside the view.
use crate::error::InputError;
use crate::json::{self, join, map_str, Object};
use crate::paths::{Lazy, PathLike};
use crate::paths::{SpecAt, TemplateAt};
use crate::views::pod_spec::{self, ContainerView};
use serde_json::Value;

#[derive(Debug)]
pub struct PodTemplateView<'a> {
    /// Where the template is, for messages.
    pub at: TemplateAt,
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
    /// Reads the pod template at `at`, under `job_spec["template"]`; returns its pod spec too,
    /// for what only one kind reads.
    pub fn parse(
        job_spec: &'a Object,
        at: TemplateAt,
        tpu_resource: &str,
    ) -> Result<(Self, &'a Object), InputError> {
        Self::parse_found(json::field(job_spec, "template"), at, tpu_resource)
    }

    /// [`PodTemplateView::parse`] of the job spec's `template`, already found.
    pub fn parse_found(
        template: Option<&'a Value>,
        at: TemplateAt,
        tpu_resource: &str,
    ) -> Result<(Self, &'a Object), InputError> {
        let template = required_of(template, "template", Lazy(move || at.job_spec()))?;
        let [metadata, spec] = json::fields(template, ["metadata", "spec"]);
        let metadata = json::object_of(metadata, "metadata", at)?;
        let [annotations, labels] = match metadata {
            Some(m) => json::fields(m, ["annotations", "labels"]),
            None => [None, None],
        };
        let annotations = json::string_map_of(
            annotations,
            "annotations",
            Lazy(move || join(&at.render(), "metadata")),
        )?;
        let spec = required_of(spec, "spec", at)?;
        let spec_at = SpecAt::Template(at);
        let [host_network, dns_policy, init_containers, containers] = json::fields(
            spec,
            ["hostNetwork", "dnsPolicy", "initContainers", "containers"],
        );
        let view = PodTemplateView {
            at,
            annotations,
            labels: labels.and_then(Value::as_object),
            host_network: json::bool_of(host_network, "hostNetwork", spec_at)?.unwrap_or(false),
            dns_policy: json::str_of(dns_policy, "dnsPolicy", spec_at)?,
            containers: pod_spec::containers_found(
                [init_containers, containers],
                spec_at,
                tpu_resource,
            )?,
        };
        Ok((view, spec))
    }

    /// Where its pod spec is.
    pub fn spec_at(&self) -> SpecAt {
        SpecAt::Template(self.at)
    }

    /// The pod spec's path, for messages.
    pub fn spec_path(&self) -> String {
        self.at.spec()
    }

    /// An annotation of the template.
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        map_str(self.annotations, key)
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
    required_of(json::field(obj, key), key, path)
}

/// [`required`] of a field already found (by [`json::fields`]).
pub fn required_of<'a>(
    found: Option<&'a Value>,
    key: &str,
    path: impl PathLike,
) -> Result<&'a Object, InputError> {
    json::object_of(found, key, path)?.ok_or_else(|| InputError::Missing {
        path: join(&path.render(), key),
    })
}
