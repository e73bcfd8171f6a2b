//! Read-only views over the raw JSON of each kind the policy admits: typed and checked, each
//! read naming its JSON path. Nothing reads the raw object again once its view is built.
pub mod container_env;
pub mod job_view;
pub mod jobset_view;
pub mod kueue_queue;
pub mod node_pins;
pub mod pod_spec;
pub mod pod_template;
pub mod pod_view;
