//! A violation is a value: rules return them, and only the edge turns them into a message.
use crate::views::jobset_view::ReplicatedJob;
use std::fmt;

/// Rule ids of SPEC §6, in the order a rejection lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    G1,
    G2,
    G3,
    G4,
    G5,
    T1,
    T2,
    T3,
    T4,
    X1,
    X2,
    X3,
    X4,
    /// Kueue Topology Aware Scheduling keeps each slice whole.
    K1,
    K2,
    K3,
    N1,
    N2,
    /// JAX processes of a JobSet (P1–P3), where J1–J4 are a plain Job's.
    P1,
    P2,
    P3,
    /// Resizes that would leave stamped values stale: E1 of a JobSet, E2 of an opted-in Job.
    E1,
    E2,
    J1,
    J2,
    J3,
    J4,
    /// The JobSet's Kueue queue has no flavour where it fits (setting `queueCheck: refuse`).
    Q1,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Violation {
    pub rule: Rule,
    /// JSON path of the field to change, e.g. `spec.replicatedJobs[1].template.spec.parallelism`.
    pub path: String,
    /// The replicated job the path is in, by name.
    pub job: Option<String>,
    pub problem: String,
    /// What would make it valid.
    pub fix: String,
}

impl Violation {
    /// A violation of a field outside any replicated job (the JobSet's own, or a Job's).
    pub fn new(
        rule: Rule,
        path: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Violation {
            rule,
            path: path.into(),
            job: None,
            problem: problem.into(),
            fix: fix.into(),
        }
    }

    /// A violation of a field of the replicated job `rjob`, where it is one of its fields.
    pub fn in_rjob<'r>(
        rjob: impl Into<Option<&'r ReplicatedJob<'r>>>,
        rule: Rule,
        path: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Violation {
            job: rjob.into().map(|r| r.name.to_string()),
            ..Violation::new(rule, path, problem, fix)
        }
    }
}

/// `[T2] spec.replicatedJobs[0].template.spec.parallelism (replicated job "slice"): is 2 but
/// completions is 4; <fix>; see docs/rules.md, T2`: the replicated job by its name as well as
/// its index, and where the rule is explained (docs/rules.md has one section per rule id).
impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.rule, self.path)?;
        if let Some(job) = &self.job {
            write!(f, " (replicated job {job:?})")?;
        }
        write!(
            f,
            ": {}; {}; see docs/rules.md, {}",
            self.problem, self.fix, self.rule
        )
    }
}

/// What validation found: the violations, which refuse, and the warnings (suspicious but valid),
/// each in the order a response lists them.
#[derive(Debug, Default, PartialEq)]
pub struct Findings {
    pub violations: Vec<Violation>,
    pub warnings: Vec<String>,
}

impl Findings {
    pub fn warnings(warnings: Vec<String>) -> Self {
        Findings {
            violations: Vec::new(),
            warnings,
        }
    }

    /// These findings, then `more`'s.
    pub fn extend(&mut self, more: Findings) {
        self.violations.extend(more.violations);
        self.warnings.extend(more.warnings);
    }

    /// The violations said as warnings, after the warnings, in `say`'s words: nothing refuses.
    pub fn as_warnings(self, say: impl Fn(&Violation) -> String) -> Findings {
        let mut warnings = self.warnings;
        warnings.extend(self.violations.iter().map(say));
        Findings::warnings(warnings)
    }
}

/// One rejection message: every violation on its own line, in a stable order.
pub fn message(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(Violation::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}
