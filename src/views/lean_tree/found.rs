//! Where the lean read finds the pod templates as it walks: the path to each and its span,
//! and whether a repeated key makes them unsafe to splice from.
use crate::json_text::{Path, PathStep, Span};

/// Pod templates found in a text: the path to each, and where it is.
pub type Templates = Vec<(Path<'static>, Span)>;

/// Where the values at one depth of the steps are, as the walk finds them.
pub(super) struct Found {
    /// How many steps down; `None` when nothing is looked for.
    pub(super) depth: Option<usize>,
    /// The path walked so far (only when something is looked for).
    pub(super) at: Path<'static>,
    pub(super) places: Templates,
    /// A step's key met twice in one object, or any key twice in a template: a splice from
    /// the places found would rewrite one occurrence only.
    pub(super) repeated: bool,
    /// Any key met twice in the root object (only when something is looked for).
    pub(super) root_repeats: bool,
}

impl Found {
    pub(super) fn nothing() -> Self {
        Found {
            depth: None,
            at: Path::new(),
            places: Templates::new(),
            repeated: false,
            root_repeats: false,
        }
    }

    /// Looking for the values `depth` steps down.
    pub(super) fn at_depth(depth: Option<usize>) -> Self {
        Found {
            depth,
            ..Found::nothing()
        }
    }

    /// The places found, none if a key was repeated on the way; and whether the root may
    /// repeat a key.
    pub(super) fn finish(self) -> (Templates, bool) {
        let templates = match self.repeated {
            false => self.places,
            true => Templates::new(),
        };
        (templates, self.depth.is_none() || self.root_repeats)
    }

    /// `read` one step down, at `step`.
    pub(super) fn below<T>(
        &mut self,
        step: PathStep<'static>,
        read: impl FnOnce(&mut Self) -> T,
    ) -> T {
        if self.depth.is_none() {
            return read(self);
        }
        self.at.push(step);
        let value = read(self);
        self.at.pop();
        value
    }
}
