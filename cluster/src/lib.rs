//! A real control plane on loopback for the policy's tests and `make cluster-preview`: etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler, the JobSet controller, (when asked)
//! Kueue, and Kubewarden's controller, built from their Go modules; the policies applied with
//! real `kubectl apply -k` and served through the controller's webhooks. Fake nodes and a small
//! node agent stand in for kubelets, and a shim for kube-proxy; everything else is the real
//! component.
//!
//! One file per component, each started by one line of `ControlPlane::start`
//! (controlplane.rs): kubernetes.rs, jobset.rs, kubewarden.rs, webhook.rs (our policies, served
//! by the processes of host.rs: policy-server, or src/bin/policy-host.rs), kueue/install.rs;
//! audit.rs runs Kubewarden's audit scanner against it.
//! Each takes the control plane's state (plane.rs) as an argument; none imports
//! controlplane.rs, and plane.rs imports none of them (it holds host.rs's host and
//! policies.rs's state of the installed policies).
pub mod agent;
pub mod audit;
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
pub mod policy_server;
pub mod procs;
pub mod run;
pub mod webhook;

pub use controlplane::Options;
pub use kube_api::{Cluster, Created};
pub use modules::Binaries;
pub use plane::ControlPlane;
