//! Kueue on the control plane: starting it (`install`), and the queues and reads the cases
//! and `cluster-preview` use (`queues`).
mod install;
mod queues;

pub(crate) use install::start;
pub use install::{
    configuration, crds, webhook_configurations, FixedFiles, KUEUE_NAMESPACE, METRICS_CERTS,
};
pub use queues::*;
