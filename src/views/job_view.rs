//! A read-only view over a raw `batch/v1` Job that opted into the JAX env (SPEC §4.6), and how a
//! Job runs its pods (`Launch`), which a JobSet's replicated jobs are asked too.
use crate::error::InputError;
use crate::facts::{Facts, JobFacts};
use crate::json::{self, required, Object};
use crate::paths::TemplateAt;
use crate::views::pod_template::PodTemplateView;
use serde_json::Value;

#[derive(Debug)]
pub struct JobView<'a> {
    /// Empty when the Job is created with `generateName`: its pods carry the name instead.
    pub name: &'a str,
    /// `metadata.annotations`: the opt-in, and Kueue's partial admission (J4).
    pub annotations: Option<&'a Object>,
    pub parallelism: u32,
    pub completions: Option<u32>,
    pub completion_mode: Option<&'a str>,
    pub subdomain: Option<&'a str>,
    pub template: PodTemplateView<'a>,
}

/// How a Job runs its pods, by its mode and counts, and the coordinator where it names one: every
/// pod at once, each with a completion index (`all_at_once`), or what breaks that. T1/T2, P1–P3,
/// J2/J3, the batch jobs beside the JAX run and the coordinator's bounds ask it alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    /// Each pod has a completion index: Indexed, or no mode where the kind defaults to it.
    pub indexed: bool,
    pub counts: Counts,
    pub parallelism: u32,
    /// The completion indexes of each Job: `completions`, else `parallelism`; what fixes set.
    pub pods: u32,
    /// `spec.coordinator.podIndex` where it names a pod of this Job at or past `parallelism`: one
    /// that starts only once others have ended.
    pub late_coordinator: Option<u32>,
}

/// `completions` beside `parallelism`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counts {
    /// Equal: every pod at once.
    AtOnce,
    /// Unset on an Indexed Job, which the API server refuses.
    Unset,
    /// Unset on a NonIndexed Job: `parallelism` pods at once until one succeeds; its mode breaks.
    WorkQueue,
    /// Set and not `parallelism`: fewer pods run than it counts, or they run in waves.
    Differ(u32),
}

impl Launch {
    /// `pod`: the coordinator's pod index, where it names a pod of this Job.
    pub fn new(indexed: bool, completions: Option<u32>, p: u32, pod: Option<u32>) -> Self {
        let counts = match completions {
            Some(c) if c == p => Counts::AtOnce,
            Some(c) => Counts::Differ(c),
            None if indexed => Counts::Unset,
            None => Counts::WorkQueue,
        };
        Launch {
            indexed,
            counts,
            parallelism: p,
            pods: completions.unwrap_or(p),
            late_coordinator: pod.filter(|&i| i >= p),
        }
    }

    /// Every pod at once, each with a completion index, the coordinator among them.
    pub fn all_at_once(&self) -> bool {
        self.indexed && self.counts == Counts::AtOnce && self.late_coordinator.is_none()
    }

    /// The field whose count breaks "every pod at once", the fact, and the counts a fix sets (to
    /// `pods`): the words T2, P2 and J3 share.
    pub fn counts_fact(&self) -> Option<(&'static str, String, &'static str)> {
        let unset = "is not set, and the API server refuses an Indexed Job without it";
        let differ = |c| format!("is {} but completions is {c}", self.parallelism);
        Some(match self.counts {
            Counts::AtOnce | Counts::WorkQueue => return None,
            Counts::Unset => ("completions", unset.into(), "completions and parallelism"),
            Counts::Differ(c) => ("parallelism", differ(c), "both"),
        })
    }
}

/// What follows from `Counts::Unset`, where T2 and P2 say it.
pub const NO_CHILD_JOB: &str = "so no child Job would ever be created";

impl<'a> JobView<'a> {
    /// How it runs its pods: a Job without `completionMode` is NonIndexed.
    pub fn launch(&self) -> Launch {
        let indexed = self.completion_mode == Some("Indexed");
        Launch::new(indexed, self.completions, self.parallelism, None)
    }

    /// What Job CREATE stamped on the pod template (SPEC §4.6), if it did: only such a Job's pods
    /// got a JAX env that a resize could make stale. Facts the policy cannot read count as none.
    pub fn stamped(&self) -> Option<JobFacts> {
        Facts::read(self.template.annotations, &TemplateAt::Job.annotations())
            .ok()??
            .job
    }

    pub fn parse(object: &'a Value, tpu_resource: &str) -> Result<Self, InputError> {
        let root = json::as_object(object, "object")?;
        let (name, annotations) = match json::opt_object(root, "metadata", "")? {
            Some(m) => (
                json::opt_str(m, "name", "metadata")?.unwrap_or(""),
                json::opt_string_map(m, "annotations", "metadata")?,
            ),
            None => ("", None),
        };
        let spec = required(root, "spec", "")?;
        let (template, pod_spec) = PodTemplateView::parse(spec, TemplateAt::Job, tpu_resource)?;
        Ok(JobView {
            name,
            annotations,
            parallelism: json::opt_count(spec, "parallelism", "spec")?.unwrap_or(1),
            completions: json::opt_count(spec, "completions", "spec")?,
            completion_mode: json::opt_str(spec, "completionMode", "spec")?,
            subdomain: json::opt_str(pod_spec, "subdomain", &TemplateAt::Job.spec())?
                .filter(|s| !s.is_empty()),
            template,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[test]
    fn reads_what_the_rules_need_with_job_defaults() {
        let job = json!({
            "metadata": {"generateName": "train-"},
            "spec": {"completions": 4, "completionMode": "Indexed", "template": {
                "metadata": {"annotations": {"a": "b"}},
                "spec": {"subdomain": "", "containers": [{"name": "jax"}]}}}
        });
        let view = JobView::parse(&job, "google.com/tpu").unwrap();
        assert_eq!(view.name, "");
        assert_eq!(view.parallelism, 1);
        assert_eq!(view.completions, Some(4));
        assert_eq!(view.completion_mode, Some("Indexed"));
        assert_eq!(view.subdomain, None);
        assert_eq!(view.template.containers.len(), 1);
    }

    #[rstest]
    #[case::every_pod_at_once(true, Some(2), None, (Counts::AtOnce, 2, None))]
    #[case::coordinator_among_them(true, Some(2), Some(1), (Counts::AtOnce, 2, None))]
    #[case::coordinator_past_parallelism(true, Some(4), Some(2), (Counts::Differ(4), 4, Some(2)))]
    #[case::fewer_than_counted(true, Some(1), None, (Counts::Differ(1), 1, None))]
    #[case::unset_on_indexed(true, None, None, (Counts::Unset, 2, None))]
    #[case::unset_on_non_indexed(false, None, None, (Counts::WorkQueue, 2, None))]
    fn launch_reads_counts_pods_and_a_late_coordinator(
        #[case] indexed: bool,
        #[case] completions: Option<u32>,
        #[case] coordinator: Option<u32>,
        #[case] want: (Counts, u32, Option<u32>),
    ) {
        let l = Launch::new(indexed, completions, 2, coordinator);
        assert_eq!((l.indexed, l.parallelism), (indexed, 2));
        assert_eq!((l.counts, l.pods, l.late_coordinator), want);
    }

    /// Every pod at once exactly where no rule finds the mode, the counts or the coordinator
    /// broken: what makes a batch job beside the JAX run is what P1–P3 report.
    #[test]
    fn all_at_once_is_nothing_broken() {
        for indexed in [false, true] {
            for completions in [None, Some(0), Some(1), Some(2), Some(3)] {
                for p in 0..=3 {
                    for pod in [None, Some(0), Some(1), Some(2), Some(3)] {
                        let l = Launch::new(indexed, completions, p, pod);
                        let broken =
                            !l.indexed || l.counts_fact().is_some() || l.late_coordinator.is_some();
                        assert_eq!(l.all_at_once(), !broken, "{l:?}");
                    }
                }
            }
        }
    }

    #[rstest]
    #[case::no_template(json!({"spec": {"completions": 4}}), "spec.template: is required")]
    #[case::bad_parallelism(
        json!({"spec": {"parallelism": "two", "template": {"spec": {}}}}),
        "spec.parallelism: expected a whole number, found the string \"two\""
    )]
    fn wrong_shapes_name_their_field(#[case] job: Value, #[case] message: &str) {
        let got = JobView::parse(&job, "google.com/tpu").unwrap_err();
        assert_eq!(got.to_string(), message);
    }
}
