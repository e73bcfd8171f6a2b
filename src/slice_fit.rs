//! Whether a slice shape of the accelerator table fits a replicated job's pods (rule T4), and
//! which shapes do (docs/spec.md §4.7). One reading of the table for both: what T4 accepts is exactly
//! what a queued JobSet is narrowed to.
use crate::accelerators::{Accelerator, Shapes, Topology, TopologyError};

/// Why a topology does not fit pods of `per_pod` chips run `parallelism` at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misfit {
    Malformed(TopologyError),
    NotInTable,
    /// The chips per pod are not a machine size, or do not divide the slice into hosts.
    ChipsPerPod {
        chips: u32,
    },
    /// A multi-host slice runs the accelerator's multi-host machine size on every host.
    MultiHost {
        chips: u32,
    },
    Hosts {
        hosts: u32,
    },
}

/// Why the slice `raw` of `acc` does not fit, or `None` when it does.
pub fn misfit(acc: &Accelerator, raw: &str, per_pod: u32, parallelism: u32) -> Option<Misfit> {
    let t = match Topology::parse(raw, acc.dims) {
        Ok(t) => t,
        Err(e) => return Some(Misfit::Malformed(e)),
    };
    if !acc.allows(raw, &t) {
        return Some(Misfit::NotInTable);
    }
    let chips = t.chips()?;
    if per_pod == 0 || !acc.chips_per_host.contains(&per_pod) || chips % per_pod != 0 {
        return Some(Misfit::ChipsPerPod { chips });
    }
    let hosts = chips / per_pod;
    if hosts > 1 && per_pod != acc.multi_host_chips_per_host {
        return Some(Misfit::MultiHost { chips });
    }
    (hosts != parallelism).then_some(Misfit::Hosts { hosts })
}

/// Every topology of `acc` that fits, in the table's order: its listed shapes, then the shapes
/// its cube rule allows, smallest first dimension first.
pub fn fitting_topologies(acc: &Accelerator, per_pod: u32, parallelism: u32) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut consider = |raw: String| {
        if !out.contains(&raw) && misfit(acc, &raw, per_pod, parallelism).is_none() {
            out.push(raw);
        }
    };
    for t in listed(&acc.topologies) {
        consider(t.to_string());
    }
    if acc.cube_rule.is_some() {
        // Cube shapes have dimensions that are multiples of 4 (at most 256); only those whose
        // chips are the job's can fit.
        let Some(chips) = per_pod.checked_mul(parallelism) else {
            return out;
        };
        for a in (4..=256u32).step_by(4) {
            for b in (4..=256u32).step_by(4) {
                let Some(ab) = a.checked_mul(b).filter(|ab| chips % ab == 0) else {
                    continue;
                };
                let c = chips / ab;
                if c % 4 == 0 && (4..=256).contains(&c) {
                    consider(format!("{a}x{b}x{c}"));
                }
            }
        }
    }
    out
}

/// The shapes a row lists by name.
fn listed<'a>(shapes: &Shapes<'a>) -> Vec<&'a str> {
    match *shapes {
        Shapes::BuiltIn(list) => list.to_vec(),
        Shapes::Setting(list) => list.iter().map(String::as_str).collect(),
    }
}

/// The hosts of each listed shape of a row that fits pods of `per_pod` chips, for a fix
/// message.
pub fn listed_host_counts(acc: &Accelerator, per_pod: u32) -> Vec<u32> {
    listed(&acc.topologies)
        .into_iter()
        .filter_map(|raw| {
            let chips = Topology::parse(raw, acc.dims).ok()?.chips()?;
            let hosts = chips.checked_div(per_pod)?;
            misfit(acc, raw, per_pod, hosts).is_none().then_some(hosts)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accelerators::{lookup, Overrides};
    use rstest::rstest;

    fn fits(name: &str, per_pod: u32, parallelism: u32) -> Vec<String> {
        let overrides = Overrides::new();
        fitting_topologies(&lookup(&overrides, name).unwrap(), per_pod, parallelism)
    }

    #[rstest]
    #[case::v6e_four_hosts("tpu-v6e-slice", 4, 4, &["4x4"])]
    #[case::v6e_two_hosts("tpu-v6e-slice", 4, 2, &["2x4"])]
    #[case::v6e_one_host_of_eight("tpu-v6e-slice", 8, 1, &["2x4"])]
    #[case::v6e_three_hosts("tpu-v6e-slice", 4, 3, &[])]
    #[case::v5p_two_hosts("tpu-v5p-slice", 4, 2, &["2x2x2"])]
    #[case::v5p_sixteen_hosts("tpu-v5p-slice", 4, 16, &["4x4x4"])]
    #[case::v5p_thirty_two_hosts("tpu-v5p-slice", 4, 32, &["4x4x8"])]
    #[case::v4_unsorted("tpu-v4-podslice", 4, 32, &["4x4x8", "4x8x4", "8x4x4"])]
    #[case::tpu7x_one_chip("tpu7x", 1, 1, &["1x1x1"])]
    fn lists_the_shapes_t4_accepts(
        #[case] name: &str,
        #[case] per_pod: u32,
        #[case] parallelism: u32,
        #[case] want: &[&str],
    ) {
        assert_eq!(fits(name, per_pod, parallelism), want);
    }

    /// Every listed shape is exactly one that `misfit` accepts, whatever the sizes.
    #[test]
    fn agrees_with_misfit_on_every_size() {
        let overrides = Overrides::new();
        for row in crate::accelerators::BUILT_IN {
            let acc = lookup(&overrides, row.name).unwrap();
            for per_pod in [0, 1, 2, 4, 8] {
                for parallelism in [0, 1, 2, 4, 8, 16, 64, 4096, u32::MAX] {
                    for t in fitting_topologies(&acc, per_pod, parallelism) {
                        assert_eq!(misfit(&acc, &t, per_pod, parallelism), None, "{t}");
                    }
                }
            }
        }
    }
}
