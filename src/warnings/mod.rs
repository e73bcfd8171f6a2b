//! What the judging half says at CREATE of what a JobSet's or opted-in Job's pod templates ask
//! for themselves (SPEC §4.2): env values that contradict the computed ones, and references that
//! never resolve. Pure functions of the view and the plan.
pub mod dead_references;
pub mod template_env;
