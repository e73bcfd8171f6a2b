//! Pod CREATE (SPEC §4): a JobSet pod ([`jobset_pod`]) or an opted-in Job's pod ([`job_pod`])
//! gets a [`pod_plan::PodPlan`] from its controllers' labels and the stamped facts. Each env
//! family has its own module over the shared [`place::PodPlace`]; [`env_families`] joins them.
pub mod env_families;
pub mod group_metadata;
pub mod jax;
pub mod job_pod;
pub mod jobset_pod;
pub mod multislice;
pub mod place;
pub mod pod_plan;
pub mod tpu_host;
