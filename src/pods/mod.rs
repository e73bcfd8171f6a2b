//! Pod CREATE: the per-pod values of SPEC §4, from the labels the JobSet and Job controllers put on
//! the pod and the facts the policy stamped at JobSet (or Job) admission. A JobSet pod
//! ([`jobset_pod`]) or an opted-in Job's pod ([`job_pod`]) gets a [`pod_plan::PodPlan`], which
//! `mutate::pod_patch` applies. Each env family has its own module over the shared
//! [`place::PodPlace`]; [`env_families`] puts them together.
pub mod env_families;
pub mod env_merge;
pub mod group_metadata;
pub mod jax;
pub mod job_pod;
pub mod jobset_pod;
pub mod multislice;
pub mod place;
pub mod pod_plan;
pub mod tpu_host;
