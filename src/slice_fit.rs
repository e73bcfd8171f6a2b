//! Whether a slice shape of the accelerator table fits a replicated job's pods (rule T4), and which
//! shapes do (SPEC §4.7). One reading of the table for both: what T4 accepts is exactly what a
//! queued JobSet is narrowed to.
use crate::accelerators::{self, Accelerator, Overrides, CUBE_MAX_DIM};
use crate::topology::{Topology, TopologyError};

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
    /// The accelerator has no multi-host slices: one pod holds the whole slice.
    OneHost {
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
    if hosts > 1 {
        match acc.multi_host_chips() {
            None => return Some(Misfit::OneHost { chips }),
            Some(multi) if per_pod != multi => return Some(Misfit::MultiHost { chips }),
            Some(_) => {}
        }
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
    for t in acc.topologies.iter() {
        consider(t.to_string());
    }
    if acc.cube_rule.is_some() {
        // Cube shapes have dimensions that are multiples of 4 (at most CUBE_MAX_DIM); only those
        // whose chips are the job's can fit.
        let Some(chips) = per_pod.checked_mul(parallelism) else {
            return out;
        };
        for a in (4..=CUBE_MAX_DIM).step_by(4) {
            for b in (4..=CUBE_MAX_DIM).step_by(4) {
                let Some(ab) = a.checked_mul(b).filter(|ab| chips % ab == 0) else {
                    continue;
                };
                let c = chips / ab;
                if c % 4 == 0 && (4..=CUBE_MAX_DIM).contains(&c) {
                    consider(format!("{a}x{b}x{c}"));
                }
            }
        }
    }
    out
}

/// The hosts of each listed shape of `acc` that fits pods of `per_pod` chips, for a fix message.
pub fn listed_host_counts(acc: &Accelerator, per_pod: u32) -> Vec<u32> {
    acc.topologies
        .iter()
        .filter_map(|raw| {
            let chips = Topology::parse(raw, acc.dims).ok()?.chips()?;
            let hosts = chips.checked_div(per_pod)?;
            misfit(acc, raw, per_pod, hosts).is_none().then_some(hosts)
        })
        .collect()
}

/// How many topologies a hint shows of one accelerator.
const HINT_SHAPES: usize = 3;

/// `2 hosts with 4 chips per pod`, for messages.
fn job_size(per_pod: u32, parallelism: u32) -> String {
    let hosts = if parallelism == 1 { "host" } else { "hosts" };
    format!("{parallelism} {hosts} with {per_pod} chips per pod")
}

fn quoted(values: &[String]) -> String {
    values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The first few topologies of `acc` that fit, for a hint.
fn hint_shapes(acc: &Accelerator, per_pod: u32, parallelism: u32) -> Vec<String> {
    let mut fit = fitting_topologies(acc, per_pod, parallelism);
    fit.truncate(HINT_SHAPES);
    fit
}

/// The first few topologies of `acc` that fit, quoted for a message, if any does.
pub fn fitting_quoted(acc: &Accelerator, per_pod: u32, parallelism: u32) -> Option<String> {
    let fit = hint_shapes(acc, per_pod, parallelism);
    (!fit.is_empty()).then(|| quoted(&fit))
}

/// T3's hint for a missing topology: the topologies that fit a job of `parallelism` hosts with
/// `per_pod` chips each, of its accelerator when that is pinned and known, else per accelerator
/// of the table; where none fits, how to choose one.
pub fn topology_hint(
    overrides: &Overrides,
    accelerator: Option<&str>,
    per_pod: u32,
    parallelism: u32,
) -> String {
    let job = job_size(per_pod, parallelism);
    if let Some(acc) = accelerator.and_then(|name| accelerators::lookup(overrides, name)) {
        let fit = hint_shapes(acc, per_pod, parallelism);
        return if fit.is_empty() {
            format!(
                "a {} topology: none fits {job}, so choose one of {} and set parallelism and completions to its chips divided by the chips per pod",
                acc.name,
                acc.shapes()
            )
        } else {
            let what = if fit.len() == 1 {
                "topology that fits"
            } else {
                "topologies that fit"
            };
            format!("{} (the {} {what} {job})", quoted(&fit), acc.name)
        };
    }
    let per_accelerator: Vec<String> = accelerators::known_names(overrides)
        .into_iter()
        .filter_map(|name| accelerators::lookup(overrides, name))
        .filter_map(|acc| {
            let fit = fitting_quoted(acc, per_pod, parallelism)?;
            Some(format!("{fit} on {}", acc.name))
        })
        .collect();
    if per_accelerator.is_empty() {
        format!("a topology of your accelerator whose chips divided by the chips per pod equal parallelism (none in the accelerator table fits {job})")
    } else {
        format!(
            "the topology of your accelerator that fits {job}: {}",
            per_accelerator.join(", ")
        )
    }
}

/// T3's hint for a missing accelerator: the accelerators of the table with a slice that fits the
/// job (of its pinned topology, when it has one).
pub fn accelerator_hint(
    overrides: &Overrides,
    topology: Option<&str>,
    per_pod: u32,
    parallelism: u32,
) -> String {
    let names: Vec<String> = accelerators::known_names(overrides)
        .into_iter()
        .filter_map(|name| accelerators::lookup(overrides, name))
        .filter(|acc| match topology {
            Some(t) => misfit(acc, t, per_pod, parallelism).is_none(),
            None => !fitting_topologies(acc, per_pod, parallelism).is_empty(),
        })
        .map(|acc| acc.name.to_string())
        .collect();
    let slice = match topology {
        Some(t) => format!("a {t} slice of {}", job_size(per_pod, parallelism)),
        None => job_size(per_pod, parallelism),
    };
    if names.is_empty() {
        format!("the accelerator of your TPU nodes (none in the accelerator table fits {slice}: add yours to the accelerators setting)")
    } else {
        let verb = if names.len() == 1 { "fits" } else { "fit" };
        format!(
            "the accelerator of your TPU nodes ({} {verb} {slice})",
            quoted(&names)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accelerators::{lookup, Overrides};
    use rstest::rstest;

    fn fits(name: &str, per_pod: u32, parallelism: u32) -> Vec<String> {
        let overrides = Overrides::new();
        fitting_topologies(lookup(&overrides, name).unwrap(), per_pod, parallelism)
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
    #[case::v5e_device_one_host_of_eight("tpu-v5-lite-device", 8, 1, &["2x4"])]
    #[case::v5e_device_one_host_of_four("tpu-v5-lite-device", 4, 1, &["2x2"])]
    #[case::v5e_device_never_two_hosts("tpu-v5-lite-device", 4, 2, &[])]
    #[case::tpu7_sixteen_hosts("tpu7", 4, 16, &["4x4x4"])]
    #[case::tpu7_forty_eight_hosts("tpu7", 4, 48, &["4x4x12"])]
    fn lists_the_shapes_t4_accepts(
        #[case] name: &str,
        #[case] per_pod: u32,
        #[case] parallelism: u32,
        #[case] want: &[&str],
    ) {
        assert_eq!(fits(name, per_pod, parallelism), want);
    }

    const PINNED_FITS: &str =
        "\"2x4\" (the tpu-v5-lite-podslice topology that fits 2 hosts with 4 chips per pod)";
    const PINNED_NONE_FITS: &str = "a tpu-v6e-slice topology: none fits 3 hosts with 4 chips per pod, so choose one of 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16 and set parallelism and completions to its chips divided by the chips per pod";
    const PER_ACCELERATOR: &str = "the topology of your accelerator that fits 1 host with 8 chips per pod: \"2x4\" on tpu-v5-lite-device, \"2x4\" on tpu-v5-lite-podslice, \"2x4\" on tpu-v6e-slice";

    #[rstest]
    #[case::the_pinned_accelerators_topology_that_fits(
        Some("tpu-v5-lite-podslice"),
        4,
        2,
        PINNED_FITS
    )]
    #[case::how_to_choose_where_none_fits(Some("tpu-v6e-slice"), 4, 3, PINNED_NONE_FITS)]
    #[case::per_accelerator_when_not_pinned(None, 8, 1, PER_ACCELERATOR)]
    #[case::per_accelerator_when_not_in_the_table(Some("tpu-v9"), 8, 1, PER_ACCELERATOR)]
    fn t3s_topology_hint_names_what_fits_or_says_how_to_choose(
        #[case] accelerator: Option<&str>,
        #[case] per_pod: u32,
        #[case] parallelism: u32,
        #[case] want: &str,
    ) {
        let hint = topology_hint(&Overrides::new(), accelerator, per_pod, parallelism);
        assert_eq!(hint, want);
    }

    const FIT_THE_TOPOLOGY: &str = "the accelerator of your TPU nodes (\"tpu-v5-lite-podslice\" or \"tpu-v6e-slice\" fit a 2x4 slice of 2 hosts with 4 chips per pod)";
    const NONE_FITS: &str = "the accelerator of your TPU nodes (none in the accelerator table fits 3 hosts with 4 chips per pod: add yours to the accelerators setting)";

    #[rstest]
    #[case::the_accelerators_that_fit_a_pinned_topology(Some("2x4"), 4, 2, FIT_THE_TOPOLOGY)]
    #[case::no_accelerator_fits(None, 4, 3, NONE_FITS)]
    fn t3s_accelerator_hint_names_what_fits_or_says_how_to_choose(
        #[case] topology: Option<&str>,
        #[case] per_pod: u32,
        #[case] parallelism: u32,
        #[case] want: &str,
    ) {
        let hint = accelerator_hint(&Overrides::new(), topology, per_pod, parallelism);
        assert_eq!(hint, want);
    }

    /// Every listed shape is exactly one that `misfit` accepts, whatever the sizes.
    #[test]
    fn agrees_with_misfit_on_every_size() {
        let overrides = Overrides::new();
        for row in crate::accelerators::BUILT_IN {
            let acc = lookup(&overrides, &row.name).unwrap();
            for per_pod in [0, 1, 2, 4, 8] {
                for parallelism in [0, 1, 2, 4, 8, 16, 64, 4096, u32::MAX] {
                    for t in fitting_topologies(acc, per_pod, parallelism) {
                        assert_eq!(misfit(acc, &t, per_pod, parallelism), None, "{t}");
                    }
                }
            }
        }
    }
}
