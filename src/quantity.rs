//! Kubernetes resource quantities (`4`, `1e3`, `4k`, `8Gi`), parsed the way the API server
//! reads them, for counting TPU chips. Extended resources must be whole numbers.
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityError {
    NotAQuantity,
    Negative,
    Fractional,
    TooLarge,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantityError::NotAQuantity => "is not a Kubernetes quantity",
            QuantityError::Negative => "is negative",
            QuantityError::Fractional => "is not a whole number of chips",
            QuantityError::TooLarge => "is larger than any TPU slice",
        })
    }
}

/// Longest input considered: real quantities are a few characters; this bounds the work.
const MAX_LEN: usize = 64;

pub fn parse_whole(input: &str) -> Result<u32, QuantityError> {
    if input.is_empty() || input.len() > MAX_LEN {
        return Err(QuantityError::NotAQuantity);
    }
    let (negative, rest) = match input.as_bytes()[0] {
        b'-' => (true, &input[1..]),
        b'+' => (false, &input[1..]),
        _ => (false, input),
    };
    let number_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    let (number, suffix) = rest.split_at(number_len);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return Err(QuantityError::NotAQuantity);
    }
    let (pow2, mut pow10) = suffix_powers(suffix)?;
    pow10 -= i32::try_from(frac_part.len()).map_err(|_| QuantityError::NotAQuantity)?;

    let mut n: u128 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u128::from(b - b'0')))
            .ok_or(QuantityError::TooLarge)?;
    }
    if n == 0 {
        return Ok(0);
    }
    if negative {
        return Err(QuantityError::Negative);
    }
    n = n
        .checked_mul(1u128.checked_shl(pow2).ok_or(QuantityError::TooLarge)?)
        .ok_or(QuantityError::TooLarge)?;
    let scale = 10u128.checked_pow(pow10.unsigned_abs());
    if pow10 >= 0 {
        n = scale
            .and_then(|s| n.checked_mul(s))
            .ok_or(QuantityError::TooLarge)?;
    } else {
        // n < 2^128 < 10^39, so dividing by 10^39 or more leaves a fraction.
        match scale {
            Some(s) if n.is_multiple_of(s) => n /= s,
            _ => return Err(QuantityError::Fractional),
        }
    }
    u32::try_from(n).map_err(|_| QuantityError::TooLarge)
}

/// (power of two, power of ten) of a suffix.
fn suffix_powers(suffix: &str) -> Result<(u32, i32), QuantityError> {
    Ok(match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        s if s.starts_with(['e', 'E']) => (0, parse_exponent(&s[1..])?),
        _ => return Err(QuantityError::NotAQuantity),
    })
}

fn parse_exponent(s: &str) -> Result<i32, QuantityError> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(QuantityError::NotAQuantity);
    }
    s.parse().map_err(|_| QuantityError::NotAQuantity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::plain("4", Ok(4))]
    #[case::plus_sign("+8", Ok(8))]
    #[case::zero("0", Ok(0))]
    #[case::negative_zero("-0", Ok(0))]
    #[case::exponent("1e3", Ok(1000))]
    #[case::exponent_upper("4E0", Ok(4))]
    #[case::decimal_si("4k", Ok(4000))]
    #[case::binary_si("1Ki", Ok(1024))]
    #[case::whole_decimal("4.0", Ok(4))]
    #[case::milli_whole("4000m", Ok(4))]
    #[case::trailing_dot("4.", Ok(4))]
    #[case::negative("-4", Err(QuantityError::Negative))]
    #[case::fraction("0.5", Err(QuantityError::Fractional))]
    #[case::milli_fraction("1500m", Err(QuantityError::Fractional))]
    #[case::gibi_too_large("4Gi", Err(QuantityError::TooLarge))]
    #[case::exponent_huge("1e9999", Err(QuantityError::TooLarge))]
    #[case::exponent_tiny("1e-9999", Err(QuantityError::Fractional))]
    #[case::many_digits(
        "99999999999999999999999999999999999999999",
        Err(QuantityError::TooLarge)
    )]
    #[case::empty("", Err(QuantityError::NotAQuantity))]
    #[case::only_sign("-", Err(QuantityError::NotAQuantity))]
    #[case::only_dot(".", Err(QuantityError::NotAQuantity))]
    #[case::two_dots("1.2.3", Err(QuantityError::NotAQuantity))]
    #[case::unknown_suffix("4x", Err(QuantityError::NotAQuantity))]
    #[case::word("four", Err(QuantityError::NotAQuantity))]
    #[case::bare_exponent("1e", Err(QuantityError::NotAQuantity))]
    fn parses_like_kubernetes(#[case] input: &str, #[case] expected: Result<u32, QuantityError>) {
        assert_eq!(parse_whole(input), expected);
    }
}
