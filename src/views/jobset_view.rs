//! A read-only view over the raw JobSet JSON: what the policy needs, typed and checked, each
//! read naming its JSON path. Nothing reads the raw JobSet again once the view is built.
use crate::affinity_mark::AffinityMark;
use crate::error::InputError;
use crate::json::{self, join, map_str, Lazy, Object, PathLike};
use crate::keys;
use crate::views::node_pins::{self, OwnTerm, Pin};
use crate::views::pod_spec::{self, ContainerView};
use serde_json::Value;

#[derive(Debug)]
pub struct JobSetView<'a> {
    /// Empty when the JobSet is created with `generateName`: the name is not known yet.
    pub name: &'a str,
    pub annotations: Option<&'a Object>,
    /// `spec.network.subdomain`, when set and not empty.
    pub subdomain: Option<&'a str>,
    pub enable_dns_hostnames: Option<bool>,
    pub suspend: bool,
    /// Carries Kueue's queue name (label, or annotation on older Kueue): Kueue's webhook,
    /// which runs after this policy, suspends it (SPEC §2 "Admission order").
    pub queued: bool,
    pub coordinator: Option<CoordinatorRef<'a>>,
    pub replicated_jobs: Vec<ReplicatedJob<'a>>,
}

/// `spec.coordinator`: the pod the controller names in `jobset.sigs.k8s.io/coordinator`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorRef<'a> {
    pub replicated_job: &'a str,
    pub job_index: u32,
    pub pod_index: u32,
}

#[derive(Debug)]
pub struct ReplicatedJob<'a> {
    /// Its place in `spec.replicatedJobs`.
    pub index: usize,
    /// `spec.replicatedJobs[i]`, for messages.
    pub path: String,
    pub name: &'a str,
    pub replicas: u32,
    /// `groupName`; the API server prunes it on JobSet CRDs before v0.9.
    pub group_field: Option<&'a str>,
    /// `jobset.sigs.k8s.io/group-name` on `template.metadata.annotations`.
    pub group_annotation: Option<&'a str>,
    /// `template.metadata.annotations`: where rjob-level exclusive placement lives.
    pub job_annotations: Option<&'a Object>,
    /// Pods per Job (Job default 1).
    pub parallelism: u32,
    pub completions: Option<u32>,
    pub completion_mode: Option<&'a str>,
    pub pod_annotations: Option<&'a Object>,
    /// `template.spec.template.metadata.labels`, read only for the keys present.
    pub pod_labels: Option<&'a Object>,
    /// `hostNetwork` and `dnsPolicy` of the pod spec: how its pods resolve names (N2).
    pub host_network: bool,
    pub dns_policy: Option<&'a str>,
    /// Node labels the pod template's author pins to one value (see `node_pins::selection`).
    pub pins: Vec<Pin<'a>>,
    /// The required node-selector terms, as stored.
    pub required_terms: &'a [Value],
    /// The author's required node-selector terms, without what the policy's narrowing added.
    pub own_terms: Vec<OwnTerm<'a>>,
    /// The policy's narrowing of the required node affinity (SPEC §4.7), when it made one.
    pub mark: Option<AffinityMark>,
    /// `template.spec.template.spec`, for messages.
    pub pod_spec_path: String,
    /// The pod spec's containers, each with its JSON object, where its own env is read.
    pub containers: Vec<ContainerView<'a>>,
    pub chips_per_pod: u32,
}

impl<'a> ReplicatedJob<'a> {
    pub fn is_tpu(&self) -> bool {
        self.containers.iter().any(ContainerView::is_tpu)
    }

    /// TPU containers per pod, containers and init containers alike (SPEC §3).
    pub fn tpu_containers(&self) -> usize {
        self.containers.iter().filter(|c| c.is_tpu()).count()
    }

    /// An annotation of the pod template.
    pub fn pod_annotation(&self, key: &str) -> Option<&'a str> {
        map_str(self.pod_annotations, key)
    }

    /// `template.spec.template.metadata.annotations[key]`, for messages.
    pub fn pod_annotation_path(&self, key: &str) -> String {
        format!(
            "{}.template.spec.template.metadata.annotations[{key:?}]",
            self.path
        )
    }

    /// The completions the Job controller runs: the field, else parallelism (the API server
    /// refuses an Indexed Job without it, which T2 reports).
    pub fn completions_or_parallelism(&self) -> u32 {
        self.completions.unwrap_or(self.parallelism)
    }
}

impl<'a> JobSetView<'a> {
    pub fn parse(object: &'a Value, tpu_resource: &str) -> Result<Self, InputError> {
        let root = json::as_object(object, "object")?;
        let metadata = json::opt_object(root, "metadata", "")?;
        let (name, annotations, labels) = match metadata {
            Some(m) => (
                json::opt_str(m, "name", "metadata")?.unwrap_or(""),
                json::opt_string_map(m, "annotations", "metadata")?,
                json::opt_string_map(m, "labels", "metadata")?,
            ),
            None => ("", None, None),
        };
        let queued = [labels, annotations]
            .iter()
            .any(|m| m.is_some_and(|m| m.contains_key(keys::KUEUE_QUEUE_NAME)));
        let spec = json::opt_object(root, "spec", "")?.ok_or(InputError::Missing {
            path: "spec".into(),
        })?;
        let network = json::opt_object(spec, "network", "spec")?;
        let (subdomain, enable_dns_hostnames) = match network {
            Some(n) => (
                json::opt_str(n, "subdomain", "spec.network")?.filter(|s| !s.is_empty()),
                json::opt_bool(n, "enableDNSHostnames", "spec.network")?,
            ),
            None => (None, None),
        };
        let suspend = json::opt_bool(spec, "suspend", "spec")?.unwrap_or(false);
        let coordinator = json::opt_object(spec, "coordinator", "spec")?
            .map(parse_coordinator)
            .transpose()?;
        let items =
            json::opt_array(spec, "replicatedJobs", "spec")?.ok_or(InputError::Missing {
                path: "spec.replicatedJobs".into(),
            })?;
        let replicated_jobs = items
            .iter()
            .enumerate()
            .map(|(i, item)| parse_replicated_job(item, i, tpu_resource))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(JobSetView {
            name,
            annotations,
            subdomain,
            enable_dns_hostnames,
            suspend,
            queued,
            coordinator,
            replicated_jobs,
        })
    }

    /// The TPU replicated jobs, with their index.
    pub fn tpu_jobs(&self) -> impl Iterator<Item = (usize, &ReplicatedJob<'a>)> {
        self.replicated_jobs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_tpu())
    }

    pub fn replicated_job(&self, name: &str) -> Option<&ReplicatedJob<'a>> {
        self.replicated_jobs.iter().find(|r| r.name == name)
    }

    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        map_str(self.annotations, key)
    }

    /// JobSet v0.9+ defaults `groupName` on every replicated job; older CRDs prune it.
    pub fn has_native_groups(&self) -> bool {
        !self.replicated_jobs.is_empty()
            && self.replicated_jobs.iter().all(|r| r.group_field.is_some())
    }

    /// The coordinator must be a pod that will exist, or every process waits on a ghost. Only
    /// asked of JobSets the policy judges (SPEC §6); JobSet's own webhook checks the others.
    /// `podIndex` is bounded by completions, as JobSet bounds it.
    pub fn check_coordinator(&self) -> Result<(), InputError> {
        let Some(c) = &self.coordinator else {
            return Ok(());
        };
        let Some(rjob) = self.replicated_job(c.replicated_job) else {
            return Err(InputError::Invalid {
                path: "spec.coordinator.replicatedJob".into(),
                reason: format!("no replicated job is named {:?}", c.replicated_job),
            });
        };
        if c.job_index >= rjob.replicas {
            return Err(InputError::Invalid {
                path: "spec.coordinator.jobIndex".into(),
                reason: format!(
                    "is {} but replicated job {:?} has {} replicas; use 0 to {}",
                    c.job_index,
                    rjob.name,
                    rjob.replicas,
                    rjob.replicas.saturating_sub(1)
                ),
            });
        }
        let pods = rjob.completions_or_parallelism();
        if c.pod_index >= pods {
            return Err(InputError::Invalid {
                path: "spec.coordinator.podIndex".into(),
                reason: format!(
                    "is {} but replicated job {:?} runs {pods} pods per job; use 0 to {}",
                    c.pod_index,
                    rjob.name,
                    pods.saturating_sub(1)
                ),
            });
        }
        Ok(())
    }
}

fn parse_coordinator(c: &Object) -> Result<CoordinatorRef<'_>, InputError> {
    let path = "spec.coordinator";
    Ok(CoordinatorRef {
        replicated_job: json::opt_str(c, "replicatedJob", path)?.ok_or(InputError::Missing {
            path: join(path, "replicatedJob"),
        })?,
        job_index: json::opt_count(c, "jobIndex", path)?.unwrap_or(0),
        pod_index: json::opt_count(c, "podIndex", path)?.unwrap_or(0),
    })
}

fn required_object<'a>(
    obj: &'a Object,
    key: &str,
    path: impl PathLike,
) -> Result<&'a Object, InputError> {
    json::opt_object(obj, key, path)?.ok_or_else(|| InputError::Missing {
        path: join(&path.render(), key),
    })
}

fn parse_replicated_job<'a>(
    item: &'a Value,
    i: usize,
    tpu_resource: &str,
) -> Result<ReplicatedJob<'a>, InputError> {
    let path = json::index("spec.replicatedJobs", i);
    let p = path.as_str();
    let r = json::as_object(item, p)?;
    let name = json::opt_str(r, "name", p)?
        .filter(|n| !n.is_empty())
        .ok_or_else(|| InputError::Missing {
            path: join(p, "name"),
        })?;
    let replicas = json::opt_count(r, "replicas", p)?.unwrap_or(1);
    let group_field = json::opt_str(r, "groupName", p)?;

    // Paths below are built only if a field is wrong.
    let t_path = Lazy(move || format!("{p}.template"));
    let template = required_object(r, "template", p)?;
    let job_annotations = match json::opt_object(template, "metadata", t_path)? {
        Some(m) => json::opt_string_map(
            m,
            "annotations",
            Lazy(move || format!("{p}.template.metadata")),
        )?,
        None => None,
    };
    let js_path = Lazy(move || format!("{p}.template.spec"));
    let job_spec = required_object(template, "spec", t_path)?;
    let parallelism = json::opt_count(job_spec, "parallelism", js_path)?.unwrap_or(1);
    let completions = json::opt_count(job_spec, "completions", js_path)?;
    let completion_mode = json::opt_str(job_spec, "completionMode", js_path)?;

    let pt_path = Lazy(move || format!("{p}.template.spec.template"));
    let pod_template = required_object(job_spec, "template", js_path)?;
    let pod_metadata = json::opt_object(pod_template, "metadata", pt_path)?;
    let pod_annotations = match pod_metadata {
        Some(m) => json::opt_string_map(
            m,
            "annotations",
            Lazy(move || format!("{p}.template.spec.template.metadata")),
        )?,
        None => None,
    };
    let ps_path = format!("{p}.template.spec.template.spec");
    let pod_spec = required_object(pod_template, "spec", pt_path)?;
    let host_network = json::opt_bool(pod_spec, "hostNetwork", ps_path.as_str())?.unwrap_or(false);
    let dns_policy = json::opt_str(pod_spec, "dnsPolicy", ps_path.as_str())?;
    let containers = pod_spec::containers(pod_spec, &ps_path, tpu_resource)?;
    let chips_per_pod = pod_spec::chips_per_pod(&containers, &ps_path)?;
    let mark =
        map_str(pod_annotations, keys::AFFINITY_MARK).and_then(AffinityMark::from_annotation);
    let selection = node_pins::selection(pod_spec, &ps_path, mark.as_ref())?;
    Ok(ReplicatedJob {
        index: i,
        name,
        replicas,
        group_field,
        group_annotation: map_str(job_annotations, keys::GROUP_NAME),
        job_annotations,
        parallelism,
        completions,
        completion_mode,
        pod_annotations,
        pod_labels: pod_metadata.and_then(|m| json::field(m, "labels")?.as_object()),
        host_network,
        dns_policy,
        pins: selection.pins,
        required_terms: selection.terms,
        own_terms: selection.own_terms,
        mark,
        pod_spec_path: ps_path,
        containers,
        chips_per_pod,
        path,
    })
}
