//! The names Kubewarden's controller v1.31 gives what it makes for PolicyServer `default`, read by
//! the harness that installs Kubewarden (kubewarden.rs), plays its pods (host.rs) and waits until
//! a policy is served (webhook.rs).

/// The namespace of the controller and of every policy-server (`--deployments-namespace`), which
/// the controller keeps out of every ClusterAdmissionPolicy.
pub const NAMESPACE: &str = "kubewarden";
/// PolicyServer `default`, which kubewarden-defaults installs and every example policy names.
pub const POLICY_SERVER: &str = "default";
/// What the controller names the Deployment, Service, Secret and ConfigMap of PolicyServer
/// `default` (`PolicyServer.NameWithPrefix`).
pub const POLICY_SERVER_OBJECTS: &str = "policy-server-default";
/// The label the controller puts on every pod of a PolicyServer, and the one naming the
/// ConfigMap version a pod must serve.
pub const POLICY_SERVER_LABEL: &str = "kubewarden/policy-server";
pub const CONFIG_VERSION_LABEL: &str = "kubewarden/config-version";
