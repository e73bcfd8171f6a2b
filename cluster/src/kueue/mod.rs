//! Kueue on the control plane: starting it (`install`), the queues and reads the cases and
//! `cluster-preview` use (`queues`), and MultiKueue between a manager and a worker control
//! plane (`multikueue`).
mod install;
pub mod multikueue;
mod queues;

pub(crate) use install::start;
pub use install::{configuration, crds, webhook_configurations, KUEUE_NAMESPACE};
pub use queues::*;
