//! Slice topologies such as `4x4` or `2x2x4`, parsed with checked bounds (SPEC §7).
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology {
    pub dims: [u32; 3],
    pub rank: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyError {
    Malformed,
    WrongRank { expected: u8, found: usize },
    Zero,
    TooLarge,
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::Malformed => f.write_str("is not a topology like 4x4 or 2x2x4"),
            TopologyError::WrongRank { expected, found } => {
                write!(f, "has {found} dimensions, the accelerator has {expected}")
            }
            TopologyError::Zero => f.write_str("has a dimension of 0"),
            TopologyError::TooLarge => f.write_str("is larger than any TPU slice"),
        }
    }
}

/// The largest dimension any TPU generation has; bounds the chip product well inside `u32`.
const MAX_DIM: u32 = 1024;

impl Topology {
    pub fn parse(s: &str, rank: u8) -> Result<Topology, TopologyError> {
        let parts: Vec<&str> = s.split('x').collect();
        let is_number = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        if parts.len() != usize::from(rank) {
            if parts.iter().all(is_number) {
                return Err(TopologyError::WrongRank {
                    expected: rank,
                    found: parts.len(),
                });
            }
            return Err(TopologyError::Malformed);
        }
        let mut dims = [1u32; 3];
        for (slot, part) in dims.iter_mut().zip(&parts) {
            if !is_number(part) {
                return Err(TopologyError::Malformed);
            }
            // All digits: more than 9 of them may not fit in `u32`, and are too large anyway.
            *slot = match part.parse::<u32>() {
                Ok(0) if part.len() <= 9 => return Err(TopologyError::Zero),
                Ok(n) if part.len() <= 9 && n <= MAX_DIM => n,
                _ => return Err(TopologyError::TooLarge),
            };
        }
        Ok(Topology { dims, rank })
    }

    /// Chips in the slice; at most 1024³, which fits in `u32` only up to 1625³, so checked.
    pub fn chips(&self) -> Option<u32> {
        self.dims[0]
            .checked_mul(self.dims[1])?
            .checked_mul(self.dims[2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::two_d("4x4", 2, Ok([4, 4, 1]))]
    #[case::three_d("2x2x4", 3, Ok([2, 2, 4]))]
    #[case::trailing_x("4x", 2, Err(TopologyError::Malformed))]
    #[case::zero("0x4", 2, Err(TopologyError::Zero))]
    #[case::four_dims("4x4x4x4", 3, Err(TopologyError::WrongRank { expected: 3, found: 4 }))]
    #[case::huge("99999999999x2", 2, Err(TopologyError::TooLarge))]
    #[case::ten_digits_of_zero("0000000000x2", 2, Err(TopologyError::TooLarge))]
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
}
