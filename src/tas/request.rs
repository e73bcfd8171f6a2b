//! What a TPU replicated job's pod template asks of Kueue's Topology Aware Scheduling, read from
//! its `kueue.x-k8s.io/podset-*` annotations as Kueue's webhook reads them.
use crate::keys;
use crate::views::jobset_view::ReplicatedJob;
use serde::Deserialize;
use std::borrow::Cow;

/// A slicing layer: runs of `size` pods, each in one domain of `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer<'a> {
    pub key: Cow<'a, str>,
    pub size: Size<'a>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size<'a> {
    Given(u32),
    /// No `podset-slice-size`, which Kueue refuses; the mutating roles fill it where they can.
    Missing,
    /// Not a whole number from 1 to 2147483647, as Kueue reads it.
    Malformed(&'a str),
}

/// What the annotations ask of Kueue, as written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request<'a> {
    pub required: Option<&'a str>,
    pub preferred: Option<&'a str>,
    pub unconstrained: bool,
    /// The slicing layers, coarsest first: the slice topology and size, or the constraints list.
    pub layers: Vec<Layer<'a>>,
    /// Whether the layers are the constraints list.
    pub layered: bool,
    /// The constraints list is set but is no list of 1 to 3 `{"topology", "size"}`.
    pub malformed_constraints: bool,
}

impl Request<'_> {
    /// Whether the pod template asks Kueue for topology-aware placement at all.
    pub fn is_any(&self) -> bool {
        self.required.is_some()
            || self.preferred.is_some()
            || self.unconstrained
            || !self.layers.is_empty()
            || self.malformed_constraints
    }

    /// The annotation that sets the layers' sizes, for messages.
    pub fn size_annotation(&self) -> &'static str {
        match self.layered {
            true => keys::KUEUE_SLICE_CONSTRAINTS,
            false => keys::KUEUE_SLICE_SIZE,
        }
    }

    /// The annotation that sets the layers' levels, for messages.
    pub fn level_annotation(&self) -> &'static str {
        match self.layered {
            true => keys::KUEUE_SLICE_CONSTRAINTS,
            false => keys::KUEUE_SLICE_REQUIRED_TOPOLOGY,
        }
    }

    /// Every level the request names, for the queue check: the required or preferred level,
    /// then each layer's.
    pub fn levels(&self) -> impl Iterator<Item = &str> {
        let top = self.required.or(self.preferred);
        top.into_iter()
            .chain(self.layers.iter().map(|l| l.key.as_ref()))
    }
}

#[derive(Deserialize)]
struct Constraint {
    topology: String,
    size: i64,
}

fn parse_size(raw: &str) -> Size<'_> {
    match raw.parse::<i32>() {
        Ok(size) if size >= 1 => Size::Given(size.unsigned_abs()),
        _ => Size::Malformed(raw),
    }
}

/// The request of `rjob`'s pod template annotations.
pub fn request<'a>(rjob: &ReplicatedJob<'a>) -> Request<'a> {
    let get = |key| rjob.template.annotation(key);
    let mut out = Request {
        required: get(keys::KUEUE_REQUIRED_TOPOLOGY),
        preferred: get(keys::KUEUE_PREFERRED_TOPOLOGY),
        unconstrained: get(keys::KUEUE_UNCONSTRAINED_TOPOLOGY).is_some(),
        ..Request::default()
    };
    if let Some(key) = get(keys::KUEUE_SLICE_REQUIRED_TOPOLOGY) {
        let size = get(keys::KUEUE_SLICE_SIZE).map_or(Size::Missing, parse_size);
        let key = Cow::Borrowed(key);
        out.layers.push(Layer { key, size });
    } else if let Some(raw) = get(keys::KUEUE_SLICE_CONSTRAINTS) {
        out.layered = true;
        // Kueue refuses a list of no layer or of more than 3, and a size below 1.
        let layer = |c: Constraint| {
            let size = u32::try_from(c.size)
                .ok()
                .filter(|s| (1..=MAX_SIZE).contains(s))?;
            let (key, size) = (Cow::Owned(c.topology), Size::Given(size));
            Some(Layer { key, size })
        };
        let layers = serde_json::from_str::<Vec<Constraint>>(raw)
            .ok()
            .filter(|list| (1..=3).contains(&list.len()))
            .and_then(|list| list.into_iter().map(layer).collect::<Option<Vec<_>>>());
        match layers {
            Some(layers) => out.layers = layers,
            None => out.malformed_constraints = true,
        }
    }
    out
}

/// Kueue reads sizes as 32-bit signed integers.
const MAX_SIZE: u32 = i32::MAX.unsigned_abs();
