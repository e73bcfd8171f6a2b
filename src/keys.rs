//! Every label, annotation and env name the policy reads or writes, in one place.

// --- Set by the JobSet controller on each child Job and its pod template (label and annotation).
/// Name of the owning JobSet. Its presence is what makes a pod "a JobSet pod".
pub const JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";
/// Name of the replicated job the pod's Job was made from.
pub const REPLICATED_JOB_NAME: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// `replicas` of that replicated job.
pub const REPLICATED_JOB_REPLICAS: &str = "jobset.sigs.k8s.io/replicatedjob-replicas";
/// 0..replicas-1 within the replicated job.
pub const JOB_INDEX: &str = "jobset.sigs.k8s.io/job-index";
/// Running sum of earlier replicated jobs' replicas, plus the job index.
pub const JOB_GLOBAL_INDEX: &str = "jobset.sigs.k8s.io/job-global-index";
/// Sum of all replicated jobs' replicas.
pub const GLOBAL_REPLICAS: &str = "jobset.sigs.k8s.io/global-replicas";
/// The child Job's key, a hash of its namespaced name.
pub const JOB_KEY: &str = "jobset.sigs.k8s.io/job-key";
/// How many times the JobSet was restarted.
pub const RESTART_ATTEMPT: &str = "jobset.sigs.k8s.io/restart-attempt";
/// Also set on pods by current JobSet releases (SPEC §4.2): the JobSet's UID, per-Job and in-place
/// restart counts, and the JobSet's priority.
pub const JOBSET_UID: &str = "jobset.sigs.k8s.io/jobset-uid";
pub const JOB_RESTART_ATTEMPT: &str = "jobset.sigs.k8s.io/job-restart-attempt";
pub const IN_PLACE_RESTART_ATTEMPT: &str = "jobset.sigs.k8s.io/in-place-restart-attempt";
pub const PRIORITY: &str = "jobset.sigs.k8s.io/priority";
/// The JobSet controllers' prefix: a key under it that no release puts on a pod is a reference that
/// can never resolve (SPEC §4.2).
pub const JOBSET_PREFIX: &str = "jobset.sigs.k8s.io/";

// --- Set by JobSet v0.9+ natively; the policy adds them on older controllers (SPEC §4.1).
pub const GROUP_NAME: &str = "jobset.sigs.k8s.io/group-name";
pub const GROUP_REPLICAS: &str = "jobset.sigs.k8s.io/group-replicas";
pub const JOB_GROUP_INDEX: &str = "jobset.sigs.k8s.io/job-group-index";
/// The three group keys, in the order they are written.
pub const GROUP_KEYS: [&str; 3] = [GROUP_NAME, GROUP_REPLICAS, JOB_GROUP_INDEX];

/// Every `jobset.sigs.k8s.io/` key on every JobSet pod, as label or annotation (one counts for
/// both): the controller's and the group keys. `JOBSET_COORDINATOR` only with `spec.coordinator`.
pub const JOBSET_POD_KEYS: [&str; 15] = [
    JOBSET_NAME,
    REPLICATED_JOB_NAME,
    REPLICATED_JOB_REPLICAS,
    JOB_INDEX,
    JOB_GLOBAL_INDEX,
    GLOBAL_REPLICAS,
    JOB_KEY,
    RESTART_ATTEMPT,
    JOBSET_UID,
    JOB_RESTART_ATTEMPT,
    IN_PLACE_RESTART_ATTEMPT,
    PRIORITY,
    GROUP_NAME,
    GROUP_REPLICAS,
    JOB_GROUP_INDEX,
];

/// Set by the JobSet controller with `spec.coordinator`: `<jobset>-<rjob>-<j>-<p>.<subdomain>`.
pub const JOBSET_COORDINATOR: &str = "jobset.sigs.k8s.io/coordinator";

/// Set by the Job controller on each pod of an Indexed Job (annotation; also a label on current
/// Kubernetes).
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// Set by the Job controller on each pod: the Job's name (label), also under the legacy key.
pub const JOB_NAME: &str = "batch.kubernetes.io/job-name";
pub const LEGACY_JOB_NAME: &str = "job-name";
/// Set by the Job controller on each pod: the Job's UID (label; also the legacy
/// `controller-uid`, outside any prefix the policy judges).
pub const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
/// Set by the Job controller on the pods of an Indexed Job with `backoffLimitPerIndex`.
pub const JOB_INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
pub const JOB_INDEX_IGNORED_FAILURE_COUNT: &str =
    "batch.kubernetes.io/job-index-ignored-failure-count";
/// The Job controller's prefix: on an opted-in plain Job, a key under it that the controller never
/// sets is a reference that can never resolve (SPEC §4.2, §4.6).
pub const BATCH_PREFIX: &str = "batch.kubernetes.io/";
/// Every `batch.kubernetes.io/` key the Job controller puts on a pod.
pub const JOB_POD_KEYS: [&str; 5] = [
    JOB_NAME,
    COMPLETION_INDEX,
    CONTROLLER_UID,
    JOB_INDEX_FAILURE_COUNT,
    JOB_INDEX_IGNORED_FAILURE_COUNT,
];

/// JobSet exclusive placement: on the JobSet or on `replicatedJobs[].template.metadata`.
pub const EXCLUSIVE_TOPOLOGY: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
/// Switches exclusive placement to the node-selector strategy; only its presence counts.
pub const NODE_SELECTOR_STRATEGY: &str = "alpha.jobset.sigs.k8s.io/node-selector";

// --- Kueue and GKE dynamic slicing (SPEC §2, §5).
/// Kueue suspends every JobSet carrying it (label; older Kueue: annotation), after this policy ran.
pub const KUEUE_QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";
/// Kueue's partial admission of a `batch/v1` Job (annotations on the Job): Kueue may start it
/// with as few as this many pods, lowering `parallelism` at the unsuspend (J4)...
pub const KUEUE_JOB_MIN_PARALLELISM: &str = "kueue.x-k8s.io/job-min-parallelism";
/// ...and, with this `"true"`, `completions` with it.
pub const KUEUE_JOB_COMPLETIONS_EQUAL_PARALLELISM: &str =
    "kueue.x-k8s.io/job-completions-equal-parallelism";
/// Pod template annotation naming the slice's topology under GKE dynamic slicing (SPEC §3).
pub const SLICE_TOPOLOGY: &str = "cloud.google.com/gke-tpu-slice-topology";
/// Kueue Topology Aware Scheduling (pod template annotations): every pod of the pod set (replicas ×
/// parallelism) in one domain of this node label, or preferably so, or anywhere.
pub const KUEUE_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
pub const KUEUE_PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
pub const KUEUE_UNCONSTRAINED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-unconstrained-topology";
/// ...and each run of this many pods (by job index, then completion index) in one domain of that
/// label; Kueue refuses either without the other.
pub const KUEUE_SLICE_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-slice-required-topology";
pub const KUEUE_SLICE_SIZE: &str = "kueue.x-k8s.io/podset-slice-size";
/// The same, layer by layer, coarsest first: a JSON list of `{"topology", "size"}` (Kueue's
/// `TASMultiLayerTopology`, alpha in v0.17).
pub const KUEUE_SLICE_CONSTRAINTS: &str =
    "kueue.x-k8s.io/podset-slice-required-topology-constraints";
/// Every annotation by which Kueue TAS places a pod set: where one is set, K1–K3 judge whether
/// each slice is kept whole, and X1 leaves the replicated job to them.
pub const KUEUE_TOPOLOGY_REQUEST: [&str; 5] = [
    KUEUE_REQUIRED_TOPOLOGY,
    KUEUE_PREFERRED_TOPOLOGY,
    KUEUE_UNCONSTRAINED_TOPOLOGY,
    KUEUE_SLICE_REQUIRED_TOPOLOGY,
    KUEUE_SLICE_CONSTRAINTS,
];

// --- Node labels that name a domain of hosts (K1–K3, SPEC §6).
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// A GKE node pool: one slice's hosts, for a multi-host TPU slice.
pub const NODEPOOL: &str = "cloud.google.com/gke-nodepool";
/// GKE dynamic slicing: the slice a node belongs to...
pub const GKE_TPU_SLICE: &str = "cloud.google.com/gke-tpu-slice";
/// ...the sub-slice of a topology (`cloud.google.com/gke-tpu-slice-4x4-id`)...
pub const GKE_TPU_SUB_SLICE: (&str, &str) = ("cloud.google.com/gke-tpu-slice-", "-id");
/// ...and the cube (`cloud.google.com/gke-tpu-partition-4x4x4-id`): a super-slice spans whole
/// cubes of one block.
pub const GKE_TPU_CUBE: (&str, &str) = ("cloud.google.com/gke-tpu-partition-", "-id");
/// The block of a GCE topology: the level above cubes and node pools.
pub const GCE_TOPOLOGY_BLOCK: &str = "cloud.google.com/gce-topology-block";

/// The default group of JobSet v0.9+ (the CRD default of `groupName`).
pub const DEFAULT_GROUP: &str = "default";

// --- The policy's own keys (SPEC §9).
pub const PREFIX: &str = "multislice.kubewarden.io/";
/// The user's annotation that opts a JobSet (SPEC §4.4) or an Indexed Job (§4.6) into the JAX env.
pub const JAX_OPT_IN: &str = "multislice.kubewarden.io/jax-distributed";
/// The facts JobSet (or opted-in Job) admission stamps on each pod template for pod admission,
/// as JSON (`facts/`). On a pod outside a JobSet, it marks an opted-in Job's pod.
pub const FACTS: &str = "multislice.kubewarden.io/facts";
/// The version of the facts beside it (SPEC §9, "Facts across releases"); a key of its own, which
/// older releases ignore. Absent means 1, which this release writes by writing none.
pub const FACTS_VERSION: &str = "multislice.kubewarden.io/facts-version";
/// What the policy ANDed into a queued TPU replicated job's required node affinity (SPEC §4.7), on
/// its pod template, as JSON (`affinity_mark.rs`); T3 reads the rest as the author's.
pub const AFFINITY_MARK: &str = "multislice.kubewarden.io/narrowed";

// --- Env names (SPEC §4.2–§4.4).
pub const ENV_NUM_SLICES: &str = "MEGASCALE_NUM_SLICES";
pub const ENV_SLICE_ID: &str = "MEGASCALE_SLICE_ID";
pub const ENV_COORDINATOR: &str = "MEGASCALE_COORDINATOR_ADDRESS";
pub const ENV_TPU_WORKER_ID: &str = "TPU_WORKER_ID";
pub const ENV_MEGASCALE_PORT: &str = "MEGASCALE_PORT";
pub const ENV_TPU_WORKER_HOSTNAMES: &str = "TPU_WORKER_HOSTNAMES";
pub const ENV_TPU_PROCESS_PORT: &str = "TPU_PROCESS_PORT";
pub const ENV_TPU_PROCESS_ADDRESSES: &str = "TPU_PROCESS_ADDRESSES";
pub const ENV_TPU_NAME: &str = "TPU_NAME";
pub const ENV_JAX_COORDINATOR: &str = "JAX_COORDINATOR_ADDRESS";
pub const ENV_JAX_NUM_PROCESSES: &str = "JAX_NUM_PROCESSES";
pub const ENV_JAX_PROCESS_ID: &str = "JAX_PROCESS_ID";

/// Every variable the policy may inject, in the order the families write them; the test host's
/// copy (`multislice_host::judges::POLICY_ENV`) is held equal by a test.
pub const POLICY_ENV: [&str; 12] = [
    ENV_NUM_SLICES,
    ENV_SLICE_ID,
    ENV_COORDINATOR,
    ENV_MEGASCALE_PORT,
    ENV_TPU_WORKER_ID,
    ENV_TPU_WORKER_HOSTNAMES,
    ENV_TPU_PROCESS_PORT,
    ENV_TPU_PROCESS_ADDRESSES,
    ENV_TPU_NAME,
    ENV_JAX_COORDINATOR,
    ENV_JAX_NUM_PROCESSES,
    ENV_JAX_PROCESS_ID,
];

/// The variables whose value holds the JobSet's name, unknown at admission under `generateName`.
pub const ENV_NAMING_THE_JOBSET: [&str; 5] = [
    ENV_COORDINATOR,
    ENV_TPU_WORKER_HOSTNAMES,
    ENV_TPU_PROCESS_ADDRESSES,
    ENV_TPU_NAME,
    ENV_JAX_COORDINATOR,
];

// --- Set by Kueue's MultiKueue (SPEC §5, MultiKueue).
/// On the copy of a JobSet that a manager's Kueue creates in a worker cluster.
pub const MULTIKUEUE_ORIGIN: &str = "kueue.x-k8s.io/multikueue-origin";
/// On the same copy: the manager's Workload, which the worker's Kueue admitted first.
pub const PREBUILT_WORKLOAD: &str = "kueue.x-k8s.io/prebuilt-workload-name";
/// `spec.managedBy` of a JobSet that the manager's Kueue dispatches to a worker.
pub const MULTIKUEUE_MANAGER: &str = "kueue.x-k8s.io/multikueue";
/// `spec.controllerName` of a MultiKueue AdmissionCheck.
pub const MULTIKUEUE_CONTROLLER: &str = "kueue.x-k8s.io/multikueue";

#[cfg(test)]
mod tests {
    use super::*;

    /// SPEC §9 and §4.1: the policy's own keys use its prefix, never jobset.sigs.k8s.io.
    #[test]
    fn the_policys_own_keys_use_its_prefix() {
        for key in [JAX_OPT_IN, FACTS, FACTS_VERSION] {
            assert!(key.starts_with(PREFIX), "{key}");
        }
        for key in GROUP_KEYS {
            assert!(
                !key.starts_with(PREFIX),
                "{key} is JobSet's, not the policy's"
            );
        }
    }

    /// The keys that count as set are under the prefix whose other keys are warned about.
    #[test]
    fn the_pod_keys_lie_under_their_controllers_prefix() {
        for key in JOBSET_POD_KEYS.iter().chain([&JOBSET_COORDINATOR]) {
            assert!(key.starts_with(JOBSET_PREFIX), "{key}");
        }
        for key in JOB_POD_KEYS {
            assert!(key.starts_with(BATCH_PREFIX), "{key}");
        }
    }
}
