//! The TPU accelerator table (SPEC §7) as data.
pub use crate::topology::{Topology, TopologyError};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The `accelerators` setting: entries that add to, or override, the built-in table. The
/// table takes this map rather than the whole `Settings`, so that settings can hold it
/// without the two modules reaching each other.
pub type Overrides = BTreeMap<String, AcceleratorSetting>;

/// The 3D shapes beyond the listed ones: AxBxC, each a multiple of 4 in 4..=256, with at most
/// `max_cubes` 4x4x4 cubes; `sorted` asks for A ≤ B ≤ C (v5p and later).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CubeRule {
    pub max_cubes: u32,
    #[serde(default)]
    pub sorted: bool,
}

/// One row of the table, as a settings entry `accelerators.<label value>` writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcceleratorSetting {
    pub dims: u8,
    /// Chips of each machine type (one pod per host, so the allowed chips per pod).
    pub chips_per_host: Vec<u32>,
    /// Chips per host of the machine type that forms multi-host slices; the largest of
    /// `chipsPerHost` when not given (v5e and v6e: 4, although an 8-chip machine exists).
    #[serde(default)]
    pub multi_host_chips_per_host: Option<u32>,
    /// Every slice is one host, so one pod holds all its chips (GKE's `tpu-v5-lite-device`:
    /// the ct5l machine types offer no multi-host slice).
    #[serde(default)]
    pub single_host: bool,
    #[serde(default)]
    pub topologies: Vec<String>,
    #[serde(default)]
    pub cube_rule: Option<CubeRule>,
}

impl AcceleratorSetting {
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

const SMALL_3D: &[&str] = &["2x2x1", "2x2x2", "2x2x4", "2x4x4"];
const LITE_2D: &[&str] = &["1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"];

/// SPEC §7, where the sources of each row are listed.
pub const BUILT_IN: &[Accelerator<'static>] = &[
    Accelerator {
        name: "tpu-v4-podslice",
        dims: 3,
        chips_per_host: &[4],
        multi_host_chips_per_host: Some(4),
        topologies: Shapes::BuiltIn(SMALL_3D),
        cube_rule: Some((64, false)),
    },
    Accelerator {
        name: "tpu-v5p-slice",
        dims: 3,
        chips_per_host: &[4],
        multi_host_chips_per_host: Some(4),
        topologies: Shapes::BuiltIn(SMALL_3D),
        cube_rule: Some((140, true)),
    },
    Accelerator {
        // ct5l-hightpu-1t/4t/8t: single-host machine types, one per slice.
        name: "tpu-v5-lite-device",
        dims: 2,
        chips_per_host: &[1, 4, 8],
        multi_host_chips_per_host: None,
        topologies: Shapes::BuiltIn(&["1x1", "2x2", "2x4"]),
        cube_rule: None,
    },
    Accelerator {
        name: "tpu-v5-lite-podslice",
        dims: 2,
        chips_per_host: &[1, 4, 8],
        multi_host_chips_per_host: Some(4),
        topologies: Shapes::BuiltIn(LITE_2D),
        cube_rule: None,
    },
    Accelerator {
        name: "tpu-v6e-slice",
        dims: 2,
        chips_per_host: &[1, 4, 8],
        multi_host_chips_per_host: Some(4),
        topologies: Shapes::BuiltIn(LITE_2D),
        cube_rule: None,
    },
    Accelerator {
        name: "tpu7x",
        dims: 3,
        chips_per_host: &[1, 4],
        multi_host_chips_per_host: Some(4),
        topologies: Shapes::BuiltIn(&["1x1x1", "2x2x1", "2x2x2", "2x2x4", "2x4x4"]),
        cube_rule: Some((144, true)),
    },
    Accelerator {
        // tpu7-standard-1t and -4t; the multi-host shapes xpk lists (up to 4 cubes), sorted.
        name: "tpu7",
        dims: 3,
        chips_per_host: &[1, 4],
        multi_host_chips_per_host: Some(4),
        topologies: Shapes::BuiltIn(&[
            "1x1x1", "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x4x12", "4x4x16",
            "4x8x8",
        ]),
        cube_rule: None,
    },
];

/// The listed topologies of a row, borrowed from the built-in table or from the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shapes<'a> {
    BuiltIn(&'a [&'static str]),
    Setting(&'a [String]),
}

impl Shapes<'_> {
    /// Node label values match exactly, so a listed topology matches as a string.
    pub fn contains(&self, topology: &str) -> bool {
        match self {
            Shapes::BuiltIn(list) => list.contains(&topology),
            Shapes::Setting(list) => list.iter().any(|t| t == topology),
        }
    }

    pub fn join(&self, sep: &str) -> String {
        match self {
            Shapes::BuiltIn(list) => list.join(sep),
            Shapes::Setting(list) => list.join(sep),
        }
    }
}

/// One row of the effective table: a settings entry, or else a built-in row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accelerator<'a> {
    pub name: &'a str,
    pub dims: u8,
    pub chips_per_host: &'a [u32],
    /// Chips per host of the multi-host slices; `None` where every slice is one host.
    pub multi_host_chips_per_host: Option<u32>,
    pub topologies: Shapes<'a>,
    pub cube_rule: Option<(u32, bool)>,
}

/// The accelerator named `name`: the `accelerators` setting overrides the built-in table.
pub fn lookup<'a>(overrides: &'a Overrides, name: &'a str) -> Option<Accelerator<'a>> {
    if let Some(entry) = overrides.get(name) {
        let largest = entry.chips_per_host.iter().copied().max().unwrap_or(1);
        return Some(Accelerator {
            name,
            dims: entry.dims,
            chips_per_host: &entry.chips_per_host,
            multi_host_chips_per_host: (!entry.single_host)
                .then(|| entry.multi_host_chips_per_host.unwrap_or(largest)),
            topologies: Shapes::Setting(&entry.topologies),
            cube_rule: entry.cube_rule.as_ref().map(|c| (c.max_cubes, c.sorted)),
        });
    }
    BUILT_IN.iter().find(|row| row.name == name).cloned()
}

/// Names of every accelerator the table knows, for messages.
pub fn known_names(overrides: &Overrides) -> Vec<&str> {
    let added = overrides
        .keys()
        .map(String::as_str)
        .filter(|name| BUILT_IN.iter().all(|row| row.name != *name));
    BUILT_IN.iter().map(|row| row.name).chain(added).collect()
}

/// Largest dimension the cube rule allows (SPEC §7: multiples of 4 in 4..256).
const CUBE_MAX_DIM: u32 = 256;

impl Accelerator<'_> {
    /// Whether the table allows this topology (the label value `raw`, parsed as `t`).
    pub fn allows(&self, raw: &str, t: &Topology) -> bool {
        t.rank == self.dims
            && (self.topologies.contains(raw)
                || self.cube_rule.is_some_and(|rule| cube_rule_allows(rule, t)))
    }

    /// The allowed shapes, for a fix message.
    pub fn shapes(&self) -> String {
        let mut text = self.topologies.join(", ");
        if let Some((max_cubes, sorted)) = self.cube_rule {
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
}

fn cube_rule_allows((max_cubes, sorted): (u32, bool), t: &Topology) -> bool {
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

    #[rstest]
    #[case::two_d("4x4", 2, Ok([4, 4, 1]))]
    #[case::three_d("2x2x4", 3, Ok([2, 2, 4]))]
    #[case::trailing_x("4x", 2, Err(TopologyError::Malformed))]
    #[case::zero("0x4", 2, Err(TopologyError::Zero))]
    #[case::four_dims("4x4x4x4", 3, Err(TopologyError::WrongRank { expected: 3, found: 4 }))]
    #[case::huge("99999999999x2", 2, Err(TopologyError::TooLarge))]
    #[case::over_max_dim("2048x2", 2, Err(TopologyError::TooLarge))]
    #[case::letters("axb", 2, Err(TopologyError::Malformed))]
    #[case::empty("", 2, Err(TopologyError::Malformed))]
    fn parses_topologies(
        #[case] s: &str,
        #[case] rank: u8,
        #[case] expected: Result<[u32; 3], TopologyError>,
    ) {
        assert_eq!(Topology::parse(s, rank).map(|t| t.dims), expected);
    }

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
        let mut settings = Settings::default();
        settings.accelerators.insert(
            "tpu-v6e-slice".into(),
            AcceleratorSetting {
                dims: 2,
                chips_per_host: vec![4],
                multi_host_chips_per_host: None,
                single_host: false,
                topologies: vec!["32x32".into()],
                cube_rule: None,
            },
        );
        let acc = lookup(&settings.accelerators, "tpu-v6e-slice").unwrap();
        assert!(acc.topologies.contains("32x32") && !acc.topologies.contains("4x4"));
        assert_eq!(acc.multi_host_chips_per_host, Some(4));
        assert!(lookup(&settings.accelerators, "tpu-v9").is_none());
    }

    #[test]
    fn built_in_topologies_parse() {
        for row in BUILT_IN {
            let Shapes::BuiltIn(topologies) = row.topologies else {
                panic!("{} lists no built-in topologies", row.name);
            };
            for t in topologies {
                assert!(Topology::parse(t, row.dims).is_ok(), "{} {t}", row.name);
            }
        }
    }
}
