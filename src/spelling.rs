//! Typos: how far a name is from the one it likely meant, for the "did you mean" of an unknown
//! setting and of a controller key that no controller sets.

/// How far a typo may be from the name it meant, for every "did you mean".
pub const MAX_EDITS: usize = 2;

/// The name of `known` that `name` most likely meant: the nearest within [`MAX_EDITS`] (the
/// first of equals), else none; the bound ([`within`]) keeps the work linear in the name.
pub fn nearest<'k>(name: &str, known: impl IntoIterator<Item = &'k str>) -> Option<&'k str> {
    known
        .into_iter()
        .filter_map(|k| Some((within(name, k, MAX_EDITS)?, k)))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The edit distance of `a` and `b` when it is at most `max`, else `None`, in time linear in
/// their length: strings whose lengths differ by more than `max` are never within it, a
/// common prefix and suffix cost nothing, only the diagonal band of cells within `max` of it is
/// computed, and the computation stops at the first row whose every cell is past `max`. ASCII
/// text (every key a controller sets) is compared byte by byte, without a copy.
pub fn within(a: &str, b: &str, max: usize) -> Option<usize> {
    if a.is_ascii() && b.is_ascii() {
        banded(a.as_bytes(), b.as_bytes(), max)
    } else {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        banded(&a, &b, max)
    }
}

fn banded<T: PartialEq>(a: &[T], b: &[T], max: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[prefix..], &b[prefix..]);
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a, b) = (&a[..a.len() - suffix], &b[..b.len() - suffix]);
    // Every cell is capped at `far`: past `max`, its exact value does not matter.
    let far = max.saturating_add(1);
    let mut row: Vec<usize> = (0..=b.len()).map(|j| j.min(far)).collect();
    for (i, ca) in (1usize..).zip(a) {
        let from = i.saturating_sub(max).max(1);
        let to = i.saturating_add(max).min(b.len());
        let mut diagonal = row[from - 1];
        row[from - 1] = if from == 1 { i.min(far) } else { far };
        let mut best = row[from - 1];
        for j in from..=to {
            let substitution = diagonal.saturating_add(usize::from(*ca != b[j - 1]));
            diagonal = row[j];
            row[j] = substitution
                .min(row[j - 1].saturating_add(1))
                .min(row[j].saturating_add(1))
                .min(far);
            best = best.min(row[j]);
        }
        if best > max {
            return None;
        }
    }
    let d = row[b.len()];
    (d <= max).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Levenshtein distance, in characters.
    fn edit_distance(a: &str, b: &str) -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut diagonal = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let substitution = diagonal + usize::from(ca != *cb);
                diagonal = row[j + 1];
                row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
            }
        }
        row[b.len()]
    }

    #[test]
    fn within_agrees_with_the_full_distance_up_to_its_bound() {
        let words = [
            "",
            "a",
            "ab",
            "ba",
            "abc",
            "job-index",
            "job-indx",
            "jbo-index",
            "job-index-0",
            "job-global-index",
            "job-globalindex",
            "jobset-name",
            "jobset-nam",
            "émile",
            "emile",
            "kitten",
            "sitting",
            "group-name",
            "group-replicas",
        ];
        for a in words {
            for b in words {
                let d = edit_distance(a, b);
                for max in 0..4 {
                    assert_eq!(within(a, b, max), (d <= max).then_some(d), "{a} {b} {max}");
                }
            }
        }
    }

    #[test]
    fn counts_insertions_deletions_and_substitutions() {
        assert_eq!(within("job-globalindex", "job-global-index", 3), Some(1));
        assert_eq!(within("jaxEnv", "jaxenv", 3), Some(1));
        assert_eq!(within("", "abc", 3), Some(3));
        assert_eq!(within("kitten", "sitting", 3), Some(3));
        assert_eq!(within("kitten", "sitting", 2), None);
    }
}
