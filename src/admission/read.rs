//! The object of a request as the policy read it, and the answer written from it.
use super::verdict::Verdict;
use crate::arena;
use crate::error::InputError;
use crate::json_text::Root;
use crate::mutate::splice::Written;
use crate::views::lean_tree::{LeanRead, Templates};
use serde_json::Value;

/// The object as the policy read it: its tree, of its containers only what the views read
/// ([`lean_tree`](crate::views::lean_tree)); its text, which the answer is written from; and, for a CREATE, where its
/// pod templates are, which is where the policy writes.
pub(super) struct Read<'t> {
    pub tree: Value,
    pub text: &'t str,
    pub templates: Templates,
    /// Whether the root object may have a key twice ([`LeanRead`]).
    pub root_may_repeat_a_key: bool,
}

/// The tree is abandoned, not dropped: the next call takes its blocks back whole
/// ([`arena::abandon`]).
impl Drop for Read<'_> {
    fn drop(&mut self) {
        arena::abandon(std::mem::take(&mut self.tree));
    }
}

impl<'t> Read<'t> {
    pub fn new(read: LeanRead, text: &'t str) -> Self {
        Read {
            tree: read.tree,
            text,
            templates: read.templates,
            root_may_repeat_a_key: read.root_may_repeat_a_key,
        }
    }

    /// Accepted, with `written` (where the mutation edited `tree`) spliced into the text from
    /// the pod templates found.
    pub fn mutated(&self, written: &Written, warnings: Vec<String>) -> Result<Verdict, InputError> {
        let roots: Vec<Root> = self
            .templates
            .iter()
            .map(|(path, span)| (path.as_slice(), *span))
            .collect();
        Verdict::mutated(self.text, &roots, &self.tree, written, warnings)
    }
}
