//! The module's own `memcmp` on wasm: every map lookup in a tree compares keys with it, and so
//! does every `==` of two strings. wasi-libc's compares one byte per turn of a loop, and took
//! 8% of a 64-rjob JobSet CREATE's time (BENCHMARKS.md, issue 30), much of it on keys of the
//! same length that share a long prefix (`cloud.google.com/gke-tpu-…`). This one compares
//! eight bytes per turn while they are equal, and the bytes of the first word that differs
//! one by one. Defined here, it is linked in place of wasi-libc's; natively it is an
//! ordinary function, and the platform's own `memcmp` stays.

use std::ptr::read_unaligned;

/// C's `memcmp`: the sign of the first byte of `a` that differs from `b`'s, as unsigned bytes
/// (0 when the first `n` bytes are equal).
///
/// # Safety
///
/// `a` and `b` are readable for `n` bytes, as C asks of `memcmp`.
#[cfg_attr(target_arch = "wasm32", no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    if n == 0 {
        return 0;
    }
    // Most keys compared in a map lookup differ at their first byte.
    // SAFETY: `n > 0`.
    let (x, y) = unsafe { (*a, *b) };
    if x != y {
        return i32::from(x) - i32::from(y);
    }
    let mut i = 0;
    // Unaligned loads cost nothing more in wasm; only equality is asked of a word.
    while n - i >= 8 {
        // SAFETY: `i + 8 <= n`, so the eight bytes are within both.
        let equal = unsafe {
            read_unaligned(a.add(i).cast::<u64>()) == read_unaligned(b.add(i).cast::<u64>())
        };
        if !equal {
            break;
        }
        i += 8;
    }
    while i < n {
        // SAFETY: `i < n`.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
        i += 1;
    }
    0
}

/// C's `bcmp`: 0 when the first `n` bytes are equal. LLVM may call it for an equality.
///
/// # Safety
///
/// As [`memcmp`].
#[cfg_attr(target_arch = "wasm32", no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the caller's promise is memcmp's.
    unsafe { memcmp(a, b, n) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    /// The order of the first byte that differs, found without `memcmp`, which on wasm is
    /// the function under test.
    fn expected(a: &[u8], b: &[u8]) -> Ordering {
        a.iter()
            .zip(b)
            .find(|(x, y)| x != y)
            .map_or(Ordering::Equal, |(x, y)| x.cmp(y))
    }

    fn compared(a: &[u8], b: &[u8]) -> Ordering {
        let n = a.len().min(b.len());
        // SAFETY: both hold at least `n` bytes.
        unsafe { memcmp(a.as_ptr(), b.as_ptr(), n).cmp(&0) }
    }

    /// Against the order of byte slices, on every length up to 40 and a difference at every
    /// place, below and above, including bytes over 127 (which C compares unsigned).
    #[test]
    fn it_orders_as_byte_slices_do() {
        let base: Vec<u8> = (0u8..40)
            .map(|i| i.wrapping_mul(37).wrapping_add(1))
            .collect();
        for n in 0..=base.len() {
            let a = &base[..n];
            assert_eq!(compared(a, a), Ordering::Equal, "n={n}");
            for at in 0..n {
                for byte in [0u8, 0x7f, 0x80, 0xff, a[at].wrapping_add(1)] {
                    let mut b = a.to_vec();
                    b[at] = byte;
                    // A later difference must not count: the first one decides.
                    if at + 1 < n {
                        b[n - 1] = b[n - 1].wrapping_add(3);
                    }
                    let case = format!("n={n} at={at} byte={byte}");
                    assert_eq!(compared(a, &b), expected(a, &b), "{case}");
                    assert_eq!(compared(&b, a), expected(&b, a), "{case}");
                    // SAFETY: both hold `n` bytes.
                    let bcmp = unsafe { bcmp(a.as_ptr(), b.as_ptr(), n) };
                    assert_eq!(bcmp == 0, expected(a, &b).is_eq(), "{case}");
                }
            }
        }
    }

    /// What the module's lookups compare: keys of one length sharing a prefix.
    #[test]
    fn keys_that_share_a_prefix_differ_where_they_do() {
        let (accelerator, topology) = (
            "cloud.google.com/gke-tpu-accelerator",
            "cloud.google.com/gke-tpu-acceleratos",
        );
        assert_eq!(
            compared(accelerator.as_bytes(), topology.as_bytes()),
            Ordering::Less
        );
        assert_eq!(
            compared(accelerator.as_bytes(), accelerator.as_bytes()),
            Ordering::Equal
        );
    }
}
