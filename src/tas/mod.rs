//! Kueue Topology Aware Scheduling of a TPU replicated job (SPEC §6, K1–K3): the domains its pod
//! template's annotations ask Kueue for, read against the slice's shape, and where Kueue then
//! leaves its pods. Kueue's pod set is the replicated job, replicas × parallelism pods, in runs by
//! job index, then completion index: a run of `parallelism` pods is one Job, one slice.
use crate::keys;
use crate::placement::pinned;
use crate::settings::{Role, Settings};
use crate::topology::Topology;
use crate::views::jobset_view::ReplicatedJob;

mod request;
pub use request::{request, Layer, Request, Size};

/// What one domain of a node label is, for this replicated job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// `kubernetes.io/hostname`: one host.
    Host,
    /// A domain of this many hosts: a node pool (of the topology the job selects), a GKE slice
    /// (`cloud.google.com/gke-tpu-slice`: the job's own) or sub-slice (`…-slice-<topology>-id`).
    Hosts(u32),
    /// A GKE cube (`…/gke-tpu-partition-<topology>-id`) of this many hosts: a super-slice spans
    /// whole cubes of one block.
    Cube(u32),
    /// Any other label, such as a block: many slices, of a size the policy cannot know.
    Many,
}

impl Domain {
    /// The hosts of one domain, where the policy knows them.
    pub fn hosts(self) -> Option<u32> {
        match self {
            Domain::Host => Some(1),
            Domain::Hosts(hosts) | Domain::Cube(hosts) => Some(hosts),
            Domain::Many => None,
        }
    }
}

/// What a domain of `key` is, for `rjob` (which labels are slice-level: SPEC §6, K1–K3).
pub fn domain_of(key: &str, rjob: &ReplicatedJob, settings: &Settings) -> Domain {
    let p = rjob.parallelism;
    let sized = |(prefix, suffix): (&str, &str)| {
        let topology = key.strip_prefix(prefix)?.strip_suffix(suffix)?;
        Some(hosts_of(topology, rjob.chips_per_pod))
    };
    if key == keys::HOSTNAME {
        Domain::Host
    } else if key == keys::GKE_TPU_SLICE {
        Domain::Hosts(p)
    } else if let Some(hosts) = sized(keys::GKE_TPU_SUB_SLICE) {
        Domain::Hosts(hosts.unwrap_or(p))
    } else if let Some(hosts) = sized(keys::GKE_TPU_CUBE) {
        hosts.map_or(Domain::Many, Domain::Cube)
    } else if p > 1 && settings.exclusive_topology_keys.iter().any(|k| k == key) {
        // A multi-host node pool of the topology its pods select; one slice, unless the slice
        // is a sub-slice of it (or a super-slice across pools, where the pool is unknown).
        let pool = pinned(rjob, &settings.topology_label);
        match (pool, rjob.template.annotation(keys::SLICE_TOPOLOGY)) {
            (Some(pool), _) => Domain::Hosts(hosts_of(pool.value, rjob.chips_per_pod).unwrap_or(p)),
            (None, Some(_)) => Domain::Many,
            (None, None) => Domain::Hosts(p),
        }
    } else {
        Domain::Many
    }
}

/// The hosts of a slice of `topology` (such as `4x4x4`), `chips_per_pod` chips each.
fn hosts_of(topology: &str, chips_per_pod: u32) -> Option<u32> {
    let rank = u8::try_from(topology.split('x').count()).ok()?;
    let chips = Topology::parse(topology, rank).ok()?.chips()?;
    let hosts = chips.checked_div(chips_per_pod)?;
    (hosts > 0 && chips % chips_per_pod == 0).then_some(hosts)
}

/// The level and size at which Kueue keeps each of `rjob`'s slices whole, for a fix: the slice's
/// own sub-slice under GKE sub-slicing, whole 4x4x4 cubes of one block for a super-slice, else a
/// domain of one slice (the first key of `exclusiveTopologyKeys`, the node pool by default).
pub struct SliceLevel {
    pub key: String,
    pub size: u32,
    /// A level above it to require, where one is known: the sub-sliced pool, or the block.
    pub above: String,
    /// Whether `above` must be required: a super-slice's cubes in one block.
    pub in_one_block: bool,
    /// Whether `key` is the setting's, which a site's own slice-level label may join.
    pub from_settings: bool,
}

pub fn slice_level(rjob: &ReplicatedJob, settings: &Settings) -> SliceLevel {
    let p = rjob.parallelism;
    let id = |(prefix, suffix): (&str, &str), t: &str| format!("{prefix}{t}{suffix}");
    let block = keys::GCE_TOPOLOGY_BLOCK.to_string();
    let level = |key, size, above, in_one_block| SliceLevel {
        key,
        size,
        above,
        in_one_block,
        from_settings: false,
    };
    let pool = pinned(rjob, &settings.topology_label);
    match (rjob.template.annotation(keys::SLICE_TOPOLOGY), pool) {
        (Some(t), Some(pool)) => {
            let above = id(keys::GKE_TPU_SUB_SLICE, pool.value);
            level(id(keys::GKE_TPU_SUB_SLICE, t), p, above, false)
        }
        (Some(t), None) => match hosts_of(CUBE, rjob.chips_per_pod) {
            Some(cube) if cube < p && p.is_multiple_of(cube) => {
                level(id(keys::GKE_TPU_CUBE, CUBE), cube, block, true)
            }
            _ => level(id(keys::GKE_TPU_SUB_SLICE, t), p, block, false),
        },
        (None, _) => SliceLevel {
            from_settings: true,
            ..level(settings.exclusive_topology_keys[0].clone(), p, block, false)
        },
    }
}

/// The cube GKE stitches super-slices from (TPU v5p, Ironwood).
const CUBE: &str = "4x4x4";

/// How a domain keeps a slice of `parallelism` hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keeps {
    /// A domain is one slice: a run of `parallelism` pods keeps it whole.
    Slice,
    /// Cubes of this many hosts, fewer than a slice's: a super-slice spans whole cubes.
    Cubes(u32),
    /// Nothing keeps a slice's hosts in one piece.
    Nothing(Split),
}

/// Why nothing keeps a slice's hosts in one domain (K3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Each pod on a host of its own, the hosts anywhere.
    ByHost,
    /// Domains of many slices, such as blocks.
    ByMany,
    /// Domains of this many hosts: several slices, or part of one.
    ByOtherSize(u32),
    /// Cubes of this many hosts, which do not make up a slice.
    NotWholeCubes(u32),
    /// Whole cubes, but nothing keeps one slice's cubes in one block.
    CubesAcrossBlocks(u32),
    /// Only a preference, or no constraint.
    Unrequired,
}

fn keeps(domain: Domain, parallelism: u32) -> Keeps {
    let p = parallelism;
    match domain {
        _ if p <= 1 => Keeps::Slice, // a slice of one host is never split
        Domain::Hosts(h) | Domain::Cube(h) if h == p => Keeps::Slice,
        Domain::Cube(h) if h < p && p.is_multiple_of(h) => Keeps::Cubes(h),
        Domain::Cube(h) if h < p => Keeps::Nothing(Split::NotWholeCubes(h)),
        Domain::Hosts(h) | Domain::Cube(h) => Keeps::Nothing(Split::ByOtherSize(h)),
        Domain::Host => Keeps::Nothing(Split::ByHost),
        Domain::Many => Keeps::Nothing(Split::ByMany),
    }
}

/// The slice size the mutating roles write where the slice topology has none (SPEC §6, K2): a
/// slice's hosts, where a domain of the slice topology is one slice.
pub fn filled_size(rjob: &ReplicatedJob, request: &Request, settings: &Settings) -> Option<u32> {
    let [layer] = request.layers.as_slice() else {
        return None;
    };
    if request.layered || layer.size != Size::Missing || rjob.pods() <= 1 {
        return None;
    }
    let domain = domain_of(&layer.key, rjob, settings);
    (domain.hosts() == Some(rjob.parallelism)).then_some(rjob.parallelism)
}

/// Where Kueue leaves some of a replicated job's pods, or a slice split (K1–K3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misplacement {
    /// K1: `podset-required-topology` puts every pod in one domain of fewer hosts: pending.
    RequiredTooSmall { hosts: u32 },
    /// K2: the slice size of layer `layer`, and the size that keeps each slice whole there,
    /// where the layer's level can.
    Size {
        layer: usize,
        problem: SizeProblem,
        want: Option<u32>,
    },
    /// K2: the constraints list is no list of 1 to 3 `{"topology", "size"}`; Kueue refuses it.
    MalformedConstraints,
    /// K3: the annotation and its key that leave a slice free to split, and why.
    MaySplit {
        annotation: &'static str,
        key: Option<String>,
        why: Split,
    },
}

/// What a slice size makes Kueue do (the Kueue record, docs/kueue-gke-xpk.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeProblem {
    /// Kueue's webhook refuses the JobSet.
    Missing,
    Malformed(String),
    /// More than the pod set: Kueue's webhook refuses the JobSet.
    OverPods(u32),
    /// More than one Job's pods: Kueue's webhook refuses every child Job.
    OverJob(u32),
    /// Does not divide the pod set: admitted, and the pods stay gated (kueue#15277).
    Gates(u32),
    /// More pods than a domain has hosts: pending.
    OverDomain {
        size: u32,
        hosts: u32,
    },
    /// Runs that cut a slice (or a cube) in two: a slice may span two domains.
    CutsSlices(u32),
}

/// Where Kueue leaves `rjob`'s pods under `request`, when not every slice whole (K1–K3). The role
/// `both`, which judges the request before its own patch, reads a size it fills as given. K3
/// speaks only where no fix of K1 or K2 keeps each slice whole.
pub fn misplacements(
    rjob: &ReplicatedJob,
    request: &Request,
    settings: &Settings,
) -> Vec<Misplacement> {
    let (p, n) = (rjob.parallelism, rjob.pods());
    if n <= 1 || !request.is_any() {
        return Vec::new();
    }
    if request.malformed_constraints {
        return vec![Misplacement::MalformedConstraints];
    }
    let domain = |key: &str| domain_of(key, rjob, settings);
    let mut out = Vec::new();
    // Some level keeps each slice whole as written; a finding's fix would.
    let (mut whole, mut mended) = (false, false);
    if let Some(key) = request.required {
        let d = domain(key);
        match d.hosts() {
            Some(hosts) if n > u64::from(hosts) => {
                out.push(Misplacement::RequiredTooSmall { hosts });
                mended = true;
            }
            _ => whole = keeps(d, p) == Keeps::Slice,
        }
    }
    let filled = match settings.role {
        Role::Both => filled_size(rjob, request, settings),
        _ => None,
    };
    let mut split = None;
    for (i, layer) in request.layers.iter().enumerate() {
        let d = domain(&layer.key);
        let kept = keeps(d, p);
        let want = match kept {
            Keeps::Slice => Some(p),
            Keeps::Cubes(h) => Some(h),
            Keeps::Nothing(why) => {
                split = Some((i, why));
                None
            }
        };
        let problem = layer_size(layer.size, filled, want)
            .and_then(|size| size.map_or(Ok(()), |s| size_problem(i == 0, s, rjob, d, want)));
        match (problem, kept) {
            (Err(problem), _) => {
                mended |= want.is_some();
                out.push(Misplacement::Size {
                    layer: i,
                    problem,
                    want,
                });
            }
            (Ok(()), Keeps::Cubes(h)) if !cubes_in_one_block(request, i, p) => {
                split = Some((i, Split::CubesAcrossBlocks(h)));
            }
            (Ok(()), Keeps::Cubes(_) | Keeps::Slice) => whole = true,
            (Ok(()), Keeps::Nothing(_)) => {}
        }
    }
    if !(whole || mended || p <= 1) {
        out.push(may_split(request, split, |key| keeps(domain(key), p)));
    }
    out
}

/// A layer's size as Kueue reads it (one the role `both` adds counts as given), or what is wrong
/// with it; `Ok(None)` where it is missing at a level that keeps no slice, which K3 names.
fn layer_size(
    size: Size,
    filled: Option<u32>,
    want: Option<u32>,
) -> Result<Option<u32>, SizeProblem> {
    match (size, filled) {
        (Size::Given(size), _) | (Size::Missing, Some(size)) => Ok(Some(size)),
        (Size::Missing, None) if want.is_some() => Err(SizeProblem::Missing),
        (Size::Missing, None) => Ok(None),
        (Size::Malformed(raw), _) => Err(SizeProblem::Malformed(raw.to_string())),
    }
}

/// What Kueue's webhooks and scheduler make of a layer's size, in the order a user meets them;
/// `first` for the outermost layer, the one Kueue sizes against the pod set and each Job.
fn size_problem(
    first: bool,
    size: u32,
    rjob: &ReplicatedJob,
    domain: Domain,
    want: Option<u32>,
) -> Result<(), SizeProblem> {
    let (p, n, pods) = (rjob.parallelism, rjob.pods(), u64::from(size));
    let problem = match domain.hosts().filter(|h| size > *h) {
        _ if first && pods > n => SizeProblem::OverPods(size),
        Some(hosts) => SizeProblem::OverDomain { size, hosts },
        None if first && size > p => SizeProblem::OverJob(size),
        None if first && n % pods != 0 => SizeProblem::Gates(size),
        None if want.is_some_and(|w| w != size) && p > 1 => SizeProblem::CutsSlices(size),
        None => return Ok(()),
    };
    Err(problem)
}

/// Whether a super-slice's cubes of layer `i` stay in one block: every pod is required in one
/// domain, or an outer layer holds whole slices.
fn cubes_in_one_block(request: &Request, i: usize, parallelism: u32) -> bool {
    let outer = request.layers[..i]
        .iter()
        .any(|l| matches!(l.size, Size::Given(s) if s % parallelism == 0));
    request.required.is_some() || outer
}

/// K3: the annotation, and its key, that leaves a slice free to split, and why.
fn may_split(
    request: &Request,
    split: Option<(usize, Split)>,
    keeps_of: impl Fn(&str) -> Keeps,
) -> Misplacement {
    let (annotation, key, why) = match (split, request.required, request.preferred) {
        (Some((i, why)), _, _) => {
            let key = request.layers[i].key.to_string();
            (request.level_annotation(), Some(key), why)
        }
        (None, Some(key), _) => {
            let why = match keeps_of(key) {
                Keeps::Nothing(why) => why,
                _ => Split::ByMany,
            };
            (keys::KUEUE_REQUIRED_TOPOLOGY, Some(key.to_string()), why)
        }
        (None, None, Some(key)) => (
            keys::KUEUE_PREFERRED_TOPOLOGY,
            Some(key.to_string()),
            Split::Unrequired,
        ),
        (None, None, None) => (keys::KUEUE_UNCONSTRAINED_TOPOLOGY, None, Split::Unrequired),
    };
    Misplacement::MaySplit {
        annotation,
        key,
        why,
    }
}
