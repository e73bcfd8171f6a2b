//! Where a field sits in the object the policy admits: typed places, the JSON paths they name
//! in messages, and the keys that lead to them for writing. The paths of a replicated job, of a
//! pod template and of its required node-selector terms are spelled here and nowhere else.

/// The keys from a pod spec down to its required node-selector terms.
pub const REQUIRED_TERMS: [&str; 4] = [
    "affinity",
    "nodeAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms",
];

/// `spec.replicatedJobs[i]` of a JobSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicatedJobAt(pub usize);

impl ReplicatedJobAt {
    pub fn path(self) -> String {
        format!("spec.replicatedJobs[{}]", self.0)
    }

    /// A field of the replicated job: `name`, `replicas`, `groupName`.
    pub fn field(self, name: &str) -> String {
        format!("{}.{name}", self.path())
    }

    /// `template.metadata.annotations` of its Job template: where the group name and the
    /// replicated job's own exclusive placement live.
    pub fn job_annotations(self) -> String {
        format!("{}.template.metadata.annotations", self.path())
    }

    pub fn job_annotation(self, key: &str) -> String {
        format!("{}[{key:?}]", self.job_annotations())
    }

    pub fn pod_template(self) -> TemplateAt {
        TemplateAt::ReplicatedJob(self.0)
    }
}

/// Where a pod template sits: in a JobSet's replicated job, or in a plain Job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateAt {
    ReplicatedJob(usize),
    Job,
}

impl TemplateAt {
    pub fn path(self) -> String {
        format!("{}.template", self.job_spec())
    }

    /// The Job spec that holds the template.
    pub fn job_spec(self) -> String {
        match self {
            TemplateAt::ReplicatedJob(i) => format!("spec.replicatedJobs[{i}].template.spec"),
            TemplateAt::Job => "spec".to_string(),
        }
    }

    /// A field of that Job spec: `parallelism`, `completions`, `completionMode`.
    pub fn job_spec_field(self, name: &str) -> String {
        format!("{}.{name}", self.job_spec())
    }

    pub fn spec(self) -> String {
        format!("{}.template.spec", self.job_spec())
    }

    /// A field of the pod spec: `containers`, `nodeSelector`, `dnsPolicy`, `affinity`.
    pub fn spec_field(self, name: &str) -> String {
        format!("{}.{name}", self.spec())
    }

    pub fn annotations(self) -> String {
        format!("{}.metadata.annotations", self.path())
    }

    pub fn annotation(self, key: &str) -> String {
        format!("{}[{key:?}]", self.annotations())
    }

    /// The keys from the object down to the template (its path, an index a key of its own), and
    /// on to `below`.
    pub fn keys(self, below: &[&str]) -> Vec<String> {
        let path = self.path().replace('[', ".").replace(']', "");
        path.split('.')
            .chain(below.iter().copied())
            .map(str::to_string)
            .collect()
    }
}

/// Where a pod spec sits: a pod's own `spec`, or a template's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecAt {
    Pod,
    Template(TemplateAt),
}

impl SpecAt {
    pub fn path(self) -> String {
        match self {
            SpecAt::Pod => "spec".to_string(),
            SpecAt::Template(t) => t.spec(),
        }
    }

    pub fn container(self, list: &str, index: usize) -> String {
        format!("{}.{list}[{index}]", self.path())
    }

    pub fn field(self, name: &str) -> String {
        format!("{}.{name}", self.path())
    }

    pub fn required_terms(self) -> String {
        self.field(&REQUIRED_TERMS.join("."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_paths_the_messages_name() {
        let r = ReplicatedJobAt(2);
        assert_eq!(r.path(), "spec.replicatedJobs[2]");
        assert_eq!(r.field("replicas"), "spec.replicatedJobs[2].replicas");
        assert_eq!(
            r.job_annotation("a/b"),
            "spec.replicatedJobs[2].template.metadata.annotations[\"a/b\"]"
        );
        let t = r.pod_template();
        assert_eq!(t.path(), "spec.replicatedJobs[2].template.spec.template");
        assert_eq!(
            t.job_spec_field("parallelism"),
            "spec.replicatedJobs[2].template.spec.parallelism"
        );
        assert_eq!(
            SpecAt::Template(t).container("initContainers", 1),
            "spec.replicatedJobs[2].template.spec.template.spec.initContainers[1]"
        );
        assert_eq!(
            TemplateAt::Job.annotation("k"),
            "spec.template.metadata.annotations[\"k\"]"
        );
        assert_eq!(SpecAt::Pod.container("containers", 0), "spec.containers[0]");
    }
}
