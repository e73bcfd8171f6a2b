//! A real control plane on loopback for the policy's tests and `make cluster-preview`: etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler, the JobSet controller and (when
//! asked) Kueue, built from their Go modules, with the policy served as a URL webhook by the
//! host crate. Fake nodes and a small node agent stand in for kubelets; everything else is the
//! real component.
//!
//! One file per component, each started by one line of `ControlPlane::start`
//! (controlplane.rs): kubernetes.rs, jobset.rs, webhook.rs (our policies, served by the host of
//! host.rs, a process of its own: src/bin/policy-host.rs), kueue/install.rs.
//! Each takes the control plane's state (plane.rs) as an argument; none imports
//! controlplane.rs, and plane.rs imports none of them.
pub mod agent;
pub mod context_aware;
pub mod controlplane;
pub mod fleet;
pub mod host;
pub mod jobset;
pub mod kube_api;
pub mod kube_proxy;
pub mod kubernetes;
pub mod kubewarden;
pub mod kueue;
pub mod modules;
pub mod pki;
pub mod plane;
pub mod policies;
pub mod procs;
pub mod run;
pub mod webhook;

pub use controlplane::Options;
pub use kube_api::{Cluster, Created};
pub use modules::Binaries;
pub use plane::ControlPlane;
