//! Paths from a text's root, as the splice and the lean read name the values they find.
use std::cmp::Ordering;

/// One step of a path from a text's root: a member, or a list's element. Typed, so that a
/// JobSet of thousands of replicated jobs is stamped without a string per step.
#[derive(Debug, Clone, Copy)]
pub enum PathStep<'k> {
    Key(&'k str),
    Index(usize),
}

/// Keys first, in the order of their bytes, then indices. Most keys compared are the same
/// literal (`spec`, `template`) from both sides: the same address and length is equal, without
/// a comparison of the bytes (the splice sorts and searches a JobSet's pod templates by path).
impl Ord for PathStep<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        use PathStep::{Index, Key};
        match (self, other) {
            (Key(a), Key(b)) if std::ptr::eq(*a, *b) => Ordering::Equal,
            (Key(a), Key(b)) => a.cmp(b),
            (Key(_), Index(_)) => Ordering::Less,
            (Index(_), Key(_)) => Ordering::Greater,
            (Index(a), Index(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for PathStep<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathStep<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathStep<'_> {}

/// The steps from a text's root to a value.
pub type Path<'k> = Vec<PathStep<'k>>;
