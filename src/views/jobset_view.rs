//! A read-only view over the raw JobSet JSON: what the policy needs, typed and checked.
use crate::affinity_mark::AffinityMark;
use crate::error::InputError;
use crate::json::{self, join, map_str, required, Object};
use crate::keys;
use crate::names;
use crate::paths::ReplicatedJobAt;
use crate::views::job_view::Launch;
use crate::views::node_pins::{self, OwnTerm, Pin};
use crate::views::pod_spec;
use crate::views::pod_template::PodTemplateView;
use serde_json::Value;
use std::collections::BTreeSet;

#[derive(Debug)]
pub struct JobSetView<'a> {
    /// Empty when the JobSet is created with `generateName`: the name is not known yet.
    pub name: &'a str,
    pub annotations: Option<&'a Object>,
    pub labels: Option<&'a Object>,
    /// `spec.managedBy`: the controller that runs the JobSet (JobSet's own when unset).
    pub managed_by: Option<&'a str>,
    pub subdomain: Option<&'a str>,
    pub enable_dns_hostnames: Option<bool>,
    pub suspend: bool,
    /// Kueue's queue name (label, else the annotation of older Kueue): Kueue's webhook, which runs
    /// after a mutating policy, suspends the JobSet (SPEC §5).
    pub queue: Option<QueueName<'a>>,
    pub coordinator: Option<CoordinatorRef<'a>>,
    pub replicated_jobs: Vec<ReplicatedJob<'a>>,
}

/// Kueue's queue name, and the map it was found in (`labels`, else `annotations`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueName<'a> {
    pub map: &'static str,
    pub name: &'a str,
}

impl QueueName<'_> {
    pub fn path(&self) -> String {
        format!("metadata.{}[{:?}]", self.map, keys::KUEUE_QUEUE_NAME)
    }
}

/// `spec.coordinator`: the pod the controller names in `jobset.sigs.k8s.io/coordinator`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorRef<'a> {
    pub replicated_job: &'a str,
    pub job_index: u32,
    pub pod_index: u32,
}

impl CoordinatorRef<'_> {
    pub fn pod(&self) -> String {
        names::rjob_pod(self.replicated_job, self.job_index, self.pod_index)
    }
}

#[derive(Debug)]
pub struct ReplicatedJob<'a> {
    /// Its place in `spec.replicatedJobs`, and that place's path for messages.
    pub index: usize,
    pub at: ReplicatedJobAt,
    pub name: &'a str,
    pub replicas: u32,
    /// `groupName`; the API server prunes it on JobSet CRDs before v0.9.
    pub group_field: Option<&'a str>,
    pub group_annotation: Option<&'a str>,
    /// `template.metadata.annotations`: where rjob-level exclusive placement lives.
    pub job_annotations: Option<&'a Object>,
    pub parallelism: u32,
    pub completions: Option<u32>,
    pub completion_mode: Option<&'a str>,
    pub template: PodTemplateView<'a>,
    /// Node labels the pod template's author pins to one value (see `node_pins::selection`).
    pub pins: Vec<Pin<'a>>,
    /// The required node-selector terms as stored, and the author's: without what the policy's
    /// narrowing added.
    pub required_terms: &'a [Value],
    pub own_terms: Vec<OwnTerm<'a>>,
    /// The policy's narrowing of the required node affinity (SPEC §4.7), when it made one.
    pub mark: Option<AffinityMark>,
    pub chips_per_pod: u32,
    pub waits_to_complete: Vec<&'a str>,
    /// Another replicated job waits for it to complete, so it runs, and ends, before them: an
    /// initializer is no process, slice or coordinator of the training job (SPEC §3).
    pub runs_first: bool,
}

impl<'a> ReplicatedJob<'a> {
    /// Its pods: replicas × parallelism, in a `u64`, where that product always fits.
    pub fn pods(&self) -> u64 {
        u64::from(self.replicas) * u64::from(self.parallelism)
    }

    pub fn is_tpu(&self) -> bool {
        self.template.is_tpu()
    }

    /// How its Jobs run their pods, with `coordinator` where it names one of them; JobSet defaults
    /// the mode to Indexed.
    pub fn launch(&self, coordinator: Option<&CoordinatorRef>) -> Launch {
        let indexed = self.completion_mode.is_none_or(|m| m == "Indexed");
        let pod = coordinator.and_then(|c| (c.replicated_job == self.name).then_some(c.pod_index));
        Launch::new(indexed, self.completions, self.parallelism, pod)
    }

    /// TPU containers per pod, containers and init containers alike (SPEC §3).
    pub fn tpu_containers(&self) -> usize {
        self.template
            .containers
            .iter()
            .filter(|c| c.is_tpu())
            .count()
    }
}

impl<'a> JobSetView<'a> {
    pub fn parse(object: &'a Value, tpu_resource: &str) -> Result<Self, InputError> {
        let root = json::as_object(object, "object")?;
        let (name, annotations, labels) = match json::opt_object(root, "metadata", "")? {
            Some(m) => (
                json::opt_str(m, "name", "metadata")?.unwrap_or(""),
                json::opt_string_map(m, "annotations", "metadata")?,
                json::opt_string_map(m, "labels", "metadata")?,
            ),
            None => ("", None, None),
        };
        let queue = [("labels", labels), ("annotations", annotations)]
            .into_iter()
            .find_map(|(map, m)| {
                map_str(m, keys::KUEUE_QUEUE_NAME).map(|name| QueueName { map, name })
            });
        let spec = required(root, "spec", "")?;
        let (subdomain, enable_dns_hostnames) = match json::opt_object(spec, "network", "spec")? {
            Some(n) => (
                json::opt_str(n, "subdomain", "spec.network")?.filter(|s| !s.is_empty()),
                json::opt_bool(n, "enableDNSHostnames", "spec.network")?,
            ),
            None => (None, None),
        };
        let mut view = JobSetView {
            name,
            annotations,
            labels,
            subdomain,
            enable_dns_hostnames,
            suspend: json::opt_bool(spec, "suspend", "spec")?.unwrap_or(false),
            managed_by: json::opt_str(spec, "managedBy", "spec")?,
            queue,
            coordinator: json::opt_object(spec, "coordinator", "spec")?
                .map(parse_coordinator)
                .transpose()?,
            replicated_jobs: json::opt_array(spec, "replicatedJobs", "spec")?
                .ok_or_else(|| InputError::missing("spec.replicatedJobs"))?
                .iter()
                .enumerate()
                .map(|(i, item)| parse_replicated_job(item, i, tpu_resource))
                .collect::<Result<_, _>>()?,
        };
        let waited_for: BTreeSet<&str> = view
            .replicated_jobs
            .iter()
            .flat_map(|r| r.waits_to_complete.iter().copied())
            .collect();
        for rjob in &mut view.replicated_jobs {
            rjob.runs_first = waited_for.contains(rjob.name);
        }
        Ok(view)
    }

    pub fn tpu_jobs(&self) -> impl Iterator<Item = (usize, &ReplicatedJob<'a>)> {
        self.replicated_jobs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_tpu())
    }

    pub fn queued(&self) -> bool {
        self.queue.is_some()
    }

    pub fn replicated_job(&self, name: &str) -> Option<&ReplicatedJob<'a>> {
        self.replicated_jobs.iter().find(|r| r.name == name)
    }

    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        map_str(self.annotations, key)
    }

    pub fn label(&self, key: &str) -> Option<&'a str> {
        map_str(self.labels, key)
    }

    /// JobSet v0.9+ defaults `groupName` on every replicated job; older CRDs prune it.
    pub fn has_native_groups(&self) -> bool {
        !self.replicated_jobs.is_empty()
            && self.replicated_jobs.iter().all(|r| r.group_field.is_some())
    }
}

fn parse_coordinator(c: &Object) -> Result<CoordinatorRef<'_>, InputError> {
    let path = "spec.coordinator";
    Ok(CoordinatorRef {
        replicated_job: json::opt_str(c, "replicatedJob", path)?
            .ok_or_else(|| InputError::missing(join(path, "replicatedJob")))?,
        job_index: json::opt_count(c, "jobIndex", path)?.unwrap_or(0),
        pod_index: json::opt_count(c, "podIndex", path)?.unwrap_or(0),
    })
}

fn parse_replicated_job<'a>(
    item: &'a Value,
    i: usize,
    tpu_resource: &str,
) -> Result<ReplicatedJob<'a>, InputError> {
    let at = ReplicatedJobAt(i);
    let path = at.path();
    let r = json::as_object(item, &path)?;
    let name = json::opt_str(r, "name", &path)?
        .filter(|n| !n.is_empty())
        .ok_or_else(|| InputError::missing(at.field("name")))?;
    let replicas = json::opt_count(r, "replicas", &path)?.unwrap_or(1);
    let group_field = json::opt_str(r, "groupName", &path)?;

    let t_path = at.field("template");
    let template = required(r, "template", &path)?;
    let job_annotations = match json::opt_object(template, "metadata", &t_path)? {
        Some(m) => json::opt_string_map(m, "annotations", &at.field("template.metadata"))?,
        None => None,
    };
    let pod_template = at.pod_template();
    let js_path = pod_template.job_spec();
    let job_spec = required(template, "spec", &t_path)?;
    let parallelism = json::opt_count(job_spec, "parallelism", &js_path)?.unwrap_or(1);
    let completions = json::opt_count(job_spec, "completions", &js_path)?;
    let completion_mode = json::opt_str(job_spec, "completionMode", &js_path)?;

    let (template, pod_spec) = PodTemplateView::parse(job_spec, pod_template, tpu_resource)?;
    let chips_per_pod = pod_spec::chips_per_pod(&template.containers, template.spec_at())?;
    let mark = template
        .annotation(keys::AFFINITY_MARK)
        .and_then(AffinityMark::from_annotation);
    let selection = node_pins::selection(pod_spec, template.spec_at(), mark.as_ref())?;
    let waits_to_complete = waits_to_complete(r, at)?;
    Ok(ReplicatedJob {
        index: i,
        at,
        name,
        replicas,
        group_field,
        group_annotation: map_str(job_annotations, keys::GROUP_NAME),
        job_annotations,
        parallelism,
        completions,
        completion_mode,
        template,
        pins: selection.pins,
        required_terms: selection.terms,
        own_terms: selection.own_terms,
        mark,
        chips_per_pod,
        waits_to_complete,
        runs_first: false,
    })
}

/// The names in `dependsOn` whose `status` is `Complete`. With `Ready` the two run together.
fn waits_to_complete(r: &Object, at: ReplicatedJobAt) -> Result<Vec<&str>, InputError> {
    let items = json::opt_array(r, "dependsOn", &at.path())?.map_or(&[][..], Vec::as_slice);
    let path = at.field("dependsOn");
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = json::index(&path, i);
        let dependency = json::as_object(item, &item_path)?;
        let name = json::opt_str(dependency, "name", &item_path)?;
        if json::opt_str(dependency, "status", &item_path)? == Some("Complete") {
            out.extend(name);
        }
    }
    Ok(out)
}
