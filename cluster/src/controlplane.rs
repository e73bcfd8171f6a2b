//! A real control plane on 127.0.0.1, one file per component, each started by one line of
//! [`ControlPlane::start`]: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
//! (kubernetes.rs), the JobSet controller with its webhooks (jobset.rs), our policies as URL
//! webhooks served by the host crate (webhook.rs), and Kueue when asked (kueue/install.rs). The
//! binaries and manifests come from their Go modules (modules.rs, `make cluster-deps`). Nothing
//! listens beyond loopback; every process has a hard lifetime; the logs stay when asked to.
use crate::modules::Binaries;
use crate::plane::ControlPlane;
use crate::policies::Deployment;
use crate::{jobset, kubernetes, kubewarden, kueue, webhook};
use anyhow::Result;
use serde_json::Value;
use std::time::Duration;

pub struct Options {
    /// Every policy's settings, each manifest's `role` kept (the manifests' own `spec.settings`
    /// when `None`).
    pub settings: Option<Value>,
    /// Every process is killed after this, whatever happens to the test.
    pub lifetime: Duration,
    /// Whether to install our policies at all; which ones, `CLUSTER_DEPLOYMENT` says
    /// (policies.rs).
    pub webhook: bool,
    /// Whether to start Kueue (built with `CLUSTER_KUEUE=1 make cluster-deps`).
    pub kueue: bool,
    /// kube-controller-manager's requests per second to the API server (its own default, 20,
    /// when `None`; a large cluster's is higher): `make cluster-bench` lifts it, so that the
    /// Job controller's own rate does not hide what admission costs.
    pub controller_qps: Option<u32>,
    /// The etcd to keep this API server's objects in: its own (started with it) when `None`,
    /// else the client URL of another control plane's, shared under `etcd_prefix` (two API
    /// servers on one etcd, as the MultiKueue cases run a manager and a worker).
    pub etcd: Option<String>,
    /// The API server's `--etcd-prefix` (its default, `/registry`, when `None`).
    pub etcd_prefix: Option<String>,
    /// Whether kube-controller-manager aggregates ClusterRoles: `view`, `edit` and `admin` are
    /// empty without it (the audit scanner is bound to `view`).
    pub role_aggregation: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            settings: None,
            lifetime: Duration::from_secs(40 * 60),
            webhook: true,
            kueue: false,
            controller_qps: None,
            etcd: None,
            etcd_prefix: None,
            role_aggregation: false,
        }
    }
}

impl ControlPlane {
    /// Starts every component, in order: the API server first, JobSet's CRDs before the
    /// controllers (the garbage collector then knows JobSets from its start), our policies,
    /// then Kueue (JobSet's CRD exists by then, so its JobSet integration starts at once).
    pub async fn start(binaries: &Binaries, options: Options) -> Result<ControlPlane> {
        let mut plane = ControlPlane::new(options.lifetime).await?;
        let storage = kubernetes::Storage {
            etcd: options.etcd.as_deref(),
            prefix: options.etcd_prefix.as_deref(),
        };
        kubernetes::start_api_server(&mut plane, binaries, storage).await?;
        jobset::start(&mut plane, binaries).await?;
        kubernetes::start_controllers(
            &mut plane,
            binaries,
            options.controller_qps,
            options.role_aggregation,
        )?;
        if options.webhook {
            kubewarden::install(&mut plane, binaries).await?;
            let deployment = Deployment::from_env()?;
            webhook::install_policies(&mut plane, binaries, options.settings, deployment).await?;
        }
        if options.kueue {
            kueue::start(&mut plane, binaries).await?;
        }
        Ok(plane)
    }
}
