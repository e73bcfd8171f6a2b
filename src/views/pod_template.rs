//! A pod template, as a JobSet's replicated job and an opted-in plain Job both carry it: its
//! metadata, how its pods resolve names, and its containers with their env. One parse for both
//! kinds; each kind reads its own extras from the pod spec this returns beside the view.
use crate::error::InputError;
use crate::json::{self, join, map_str, Object};
use crate::paths::{SpecAt, TemplateAt};
use crate::views::pod_spec::{self, ContainerView};

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
    pub containers: Vec<ContainerView<'a>>,
}

impl<'a> PodTemplateView<'a> {
    /// Reads the pod template at `at`, under `job_spec["template"]`, and returns its pod spec too.
    pub fn parse(
        job_spec: &'a Object,
        at: TemplateAt,
        tpu_resource: &str,
    ) -> Result<(Self, &'a Object), InputError> {
        let path = at.path();
        let template = json::required(job_spec, "template", &at.job_spec())?;
        let metadata = json::opt_object(template, "metadata", &path)?;
        let annotations = match metadata {
            Some(m) => json::opt_string_map(m, "annotations", &join(&path, "metadata"))?,
            None => None,
        };
        let spec = json::required(template, "spec", &path)?;
        let spec_at = SpecAt::Template(at);
        let spec_path = spec_at.path();
        let view = PodTemplateView {
            at,
            annotations,
            labels: metadata.and_then(|m| json::field(m, "labels")?.as_object()),
            host_network: json::opt_bool(spec, "hostNetwork", &spec_path)?.unwrap_or(false),
            dns_policy: json::opt_str(spec, "dnsPolicy", &spec_path)?,
            containers: pod_spec::containers(spec, spec_at, tpu_resource)?,
        };
        Ok((view, spec))
    }

    pub fn spec_at(&self) -> SpecAt {
        SpecAt::Template(self.at)
    }

    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        map_str(self.annotations, key)
    }

    pub fn is_tpu(&self) -> bool {
        self.containers.iter().any(ContainerView::is_tpu)
    }
}
