//! The TPU accelerator table (SPEC §7) as data.
use crate::topology::Topology;
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The `accelerators` setting: rows that add to, or override, the built-in table, by name. The
/// table takes this map rather than the whole `Settings`, so that settings can hold it
/// without the two modules reaching each other.
pub type Overrides = BTreeMap<String, Accelerator>;

/// The 3D shapes beyond the listed ones: AxBxC, each a multiple of 4 in 4..=256, with at most
/// `max_cubes` 4x4x4 cubes; `sorted` asks for A ≤ B ≤ C (v5p and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CubeRule {
    pub max_cubes: u32,
    #[serde(default)]
    pub sorted: bool,
}

/// One row of the table (SPEC §7): a built-in row, or a settings entry
/// `accelerators.<label value>` as it is written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Accelerator {
    /// The node label value; a settings entry's is its key, set when the entry is read.
    #[serde(skip)]
    pub name: Cow<'static, str>,
    pub dims: u8,
    /// Chips of each machine type (one pod per host, so the allowed chips per pod).
    pub chips_per_host: Cow<'static, [u32]>,
    /// Chips per host of the machine type that forms multi-host slices; the largest of
    /// `chipsPerHost` when not given (v5e and v6e: 4, although an 8-chip machine exists).
    #[serde(default)]
    pub multi_host_chips_per_host: Option<u32>,
    /// Every slice is one host, so one pod holds all its chips (GKE's `tpu-v5-lite-device`:
    /// the ct5l machine types offer no multi-host slice).
    #[serde(default)]
    pub single_host: bool,
    /// The listed topologies: node label values match exactly, so each matches as a string.
    #[serde(default)]
    pub topologies: Cow<'static, [Cow<'static, str>]>,
    #[serde(default)]
    pub cube_rule: Option<CubeRule>,
}

/// A listed topology of a built-in row.
const fn t(shape: &'static str) -> Cow<'static, str> {
    Cow::Borrowed(shape)
}

const fn cubes(max_cubes: u32, sorted: bool) -> Option<CubeRule> {
    Some(CubeRule { max_cubes, sorted })
}

const SMALL_3D: &[Cow<'static, str>] = &[t("2x2x1"), t("2x2x2"), t("2x2x4"), t("2x4x4")];
const LITE_2D: &[Cow<'static, str>] = &[
    t("1x1"),
    t("2x2"),
    t("2x4"),
    t("4x4"),
    t("4x8"),
    t("8x8"),
    t("8x16"),
    t("16x16"),
];

// ct5l-hightpu-1t/4t/8t: single-host machine types, one per slice.
const V5E_DEVICE: &[Cow<'static, str>] = &[t("1x1"), t("2x2"), t("2x4")];
const TPU7X: &[Cow<'static, str>] = &[t("1x1x1"), t("2x2x1"), t("2x2x2"), t("2x2x4"), t("2x4x4")];
// tpu7-standard-1t and -4t; the multi-host shapes xpk lists (up to 4 cubes), sorted.
const TPU7: &[Cow<'static, str>] = &[
    t("1x1x1"),
    t("2x2x1"),
    t("2x2x2"),
    t("2x2x4"),
    t("2x4x4"),
    t("4x4x4"),
    t("4x4x8"),
    t("4x4x12"),
    t("4x4x16"),
    t("4x8x8"),
];

/// A built-in row whose multi-host slices run 4 chips per host, as every built-in one does.
const fn multi_host(
    name: &'static str,
    dims: u8,
    chips_per_host: &'static [u32],
    topologies: &'static [Cow<'static, str>],
    cube_rule: Option<CubeRule>,
) -> Accelerator {
    Accelerator {
        name: Cow::Borrowed(name),
        dims,
        chips_per_host: Cow::Borrowed(chips_per_host),
        multi_host_chips_per_host: Some(4),
        single_host: false,
        topologies: Cow::Borrowed(topologies),
        cube_rule,
    }
}

/// SPEC §7, where the sources of each row are listed.
pub const BUILT_IN: &[Accelerator] = &[
    multi_host("tpu-v4-podslice", 3, &[4], SMALL_3D, cubes(64, false)),
    multi_host("tpu-v5p-slice", 3, &[4], SMALL_3D, cubes(140, true)),
    Accelerator {
        name: Cow::Borrowed("tpu-v5-lite-device"),
        dims: 2,
        chips_per_host: Cow::Borrowed(&[1, 4, 8]),
        multi_host_chips_per_host: None,
        single_host: true,
        topologies: Cow::Borrowed(V5E_DEVICE),
        cube_rule: None,
    },
    multi_host("tpu-v5-lite-podslice", 2, &[1, 4, 8], LITE_2D, None),
    multi_host("tpu-v6e-slice", 2, &[1, 4, 8], LITE_2D, None),
    multi_host("tpu7x", 3, &[1, 4], TPU7X, cubes(144, true)),
    multi_host("tpu7", 3, &[1, 4], TPU7, None),
];

/// The row named `name`: the `accelerators` setting overrides the built-in table.
pub fn lookup<'a>(overrides: &'a Overrides, name: &str) -> Option<&'a Accelerator> {
    overrides
        .get(name)
        .or_else(|| BUILT_IN.iter().find(|row| row.name == name))
}

/// Names of every accelerator the table knows, for messages.
pub fn known_names(overrides: &Overrides) -> Vec<&str> {
    let added = overrides
        .keys()
        .map(String::as_str)
        .filter(|name| BUILT_IN.iter().all(|row| row.name != *name));
    BUILT_IN
        .iter()
        .map(|row| row.name.as_ref())
        .chain(added)
        .collect()
}

/// Largest dimension the cube rule allows (SPEC §7: multiples of 4 in 4..256).
pub const CUBE_MAX_DIM: u32 = 256;

impl Accelerator {
    /// Chips per host of the multi-host slices; `None` where every slice is one host.
    pub fn multi_host_chips(&self) -> Option<u32> {
        let largest = self.chips_per_host.iter().copied().max().unwrap_or(1);
        (!self.single_host).then(|| self.multi_host_chips_per_host.unwrap_or(largest))
    }

    /// Whether the table allows this topology (the label value `raw`, parsed as `t`).
    pub fn allows(&self, raw: &str, t: &Topology) -> bool {
        t.rank == self.dims
            && (self.topologies.iter().any(|listed| listed == raw)
                || self.cube_rule.is_some_and(|rule| cube_rule_allows(rule, t)))
    }

    /// The allowed shapes, for a fix message.
    pub fn shapes(&self) -> String {
        let mut text = self.topologies.join(", ");
        if let Some(CubeRule { max_cubes, sorted }) = self.cube_rule {
            if !text.is_empty() {
                text.push_str(", or ");
            }
            text.push_str(&format!(
                "AxBxC with each a multiple of 4 up to {CUBE_MAX_DIM}{} and at most {max_cubes} 4x4x4 cubes",
                if sorted { ", A ≤ B ≤ C," } else { "" }
            ));
        }
        text
    }

    /// What is wrong with an entry, each prefixed by its field name.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !(2..=3).contains(&self.dims) {
            out.push(format!("dims: is {}, use 2 or 3", self.dims));
        }
        if self.chips_per_host.is_empty() || self.chips_per_host.contains(&0) {
            out.push("chipsPerHost: list one or more chip counts, each at least 1".into());
        }
        if let Some(m) = self.multi_host_chips_per_host {
            if self.single_host {
                out.push(format!(
                    "multiHostChipsPerHost: is {m}, but a singleHost accelerator has no multi-host slices"
                ));
            } else if !self.chips_per_host.contains(&m) {
                out.push(format!(
                    "multiHostChipsPerHost: {m} is not one of chipsPerHost"
                ));
            }
        }
        if self.topologies.is_empty() && self.cube_rule.is_none() {
            out.push("topologies: list the topologies, or give a cubeRule".into());
        }
        for (i, t) in self.topologies.iter().enumerate() {
            if let Err(e) = Topology::parse(t, self.dims) {
                out.push(format!("topologies[{i}]: {t:?} {e}"));
            }
        }
        if self.cube_rule.is_some() && self.dims != 3 {
            out.push("cubeRule: only 3D accelerators are built from cubes".into());
        }
        out
    }
}

fn cube_rule_allows(CubeRule { max_cubes, sorted }: CubeRule, t: &Topology) -> bool {
    if t.rank != 3 {
        return false;
    }
    let [a, b, c] = t.dims;
    let multiples = t
        .dims
        .iter()
        .all(|d| d % 4 == 0 && (4..=CUBE_MAX_DIM).contains(d));
    let cubes = (a / 4) * (b / 4) * (c / 4);
    multiples && cubes <= max_cubes && (!sorted || (a <= b && b <= c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    #[case::v4_listed("tpu-v4-podslice", "2x2x1", true)]
    #[case::v4_cube_unsorted("tpu-v4-podslice", "8x4x4", true)]
    #[case::v4_64_cubes("tpu-v4-podslice", "16x16x16", true)]
    #[case::v4_too_many_cubes("tpu-v4-podslice", "16x16x20", false)]
    #[case::v5p_unsorted("tpu-v5p-slice", "8x4x4", false)]
    #[case::v5p_sorted("tpu-v5p-slice", "4x4x8", true)]
    #[case::v5p_140_cubes("tpu-v5p-slice", "16x20x28", true)]
    #[case::v5p_not_multiple("tpu-v5p-slice", "4x4x6", false)]
    #[case::v5e_listed("tpu-v5-lite-podslice", "2x4", true)]
    #[case::v5e_unlisted("tpu-v5-lite-podslice", "4x2", false)]
    #[case::v6e_wrong_rank("tpu-v6e-slice", "2x2x1", false)]
    #[case::tpu7x_single("tpu7x", "1x1x1", true)]
    #[case::tpu7x_144_cubes("tpu7x", "12x12x16", true)]
    #[case::v5e_device_one_host_of_eight("tpu-v5-lite-device", "2x4", true)]
    #[case::v5e_device_no_multi_host("tpu-v5-lite-device", "4x4", false)]
    #[case::tpu7_four_cubes("tpu7", "4x8x8", true)]
    #[case::tpu7_no_cube_rule("tpu7", "8x8x8", false)]
    fn the_table_allows_what_section_7_lists(
        #[case] name: &str,
        #[case] topology: &str,
        #[case] allowed: bool,
    ) {
        let settings = Settings::default();
        let acc = lookup(&settings.accelerators, name).unwrap();
        let rank = topology.split('x').count() as u8;
        let t = Topology::parse(topology, rank).unwrap();
        assert_eq!(acc.allows(topology, &t), allowed);
    }

    #[test]
    fn settings_override_and_extend_the_table() {
        let entry = json!({"dims": 2, "chipsPerHost": [4], "topologies": ["32x32"]});
        let settings = Settings::from_json(&json!({"accelerators": {"tpu-v6e-slice": entry}}));
        let settings = settings.unwrap();
        let acc = lookup(&settings.accelerators, "tpu-v6e-slice").unwrap();
        assert_eq!(acc.topologies.join(", "), "32x32");
        assert_eq!(acc.multi_host_chips(), Some(4));
        assert!(lookup(&settings.accelerators, "tpu-v9").is_none());
    }

    #[test]
    fn built_in_rows_have_no_problems_and_their_topologies_parse() {
        for row in BUILT_IN {
            assert_eq!(row.problems(), Vec::<String>::new(), "{}", row.name);
        }
    }
}
