//! What every case file shares: the failures a case gathers, the report of the run, and which
//! parts run. It imports no case file; main.rs declares and runs the cases.

/// The failures of one case, gathered instead of panicking so every case runs.
#[derive(Default)]
pub(crate) struct Failures(pub(crate) Vec<String>);

impl Failures {
    pub(crate) fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }
    pub(crate) fn eq<T: PartialEq + std::fmt::Debug>(&mut self, got: T, want: T, what: &str) {
        if got != want {
            self.0.push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }
}

#[derive(Default)]
pub(crate) struct Report {
    pub(crate) passed: usize,
    pub(crate) failed: usize,
}

impl Report {
    pub(crate) fn record(&mut self, name: &str, result: anyhow::Result<Failures>) {
        match result {
            Ok(f) if f.0.is_empty() => {
                self.passed += 1;
                println!("ok: {name}");
            }
            Ok(f) => {
                self.failed += 1;
                println!("FAILED: {name}");
                for line in f.0.iter().take(40) {
                    println!("    {line}");
                }
                if f.0.len() > 40 {
                    println!("    … and {} more", f.0.len() - 40);
                }
            }
            Err(e) => {
                self.failed += 1;
                println!("FAILED: {name}: {e:#}");
            }
        }
    }
}

/// Which parts run: `CLUSTER_PARTS=shapes,rules,match-conditions,node-selector,unprotected,operations,kueue,queue-check,accelerators,tas,multikueue`
/// (all by default; `operations` runs docs/operations.md's commands; `kueue` includes
/// cluster-preview with Kueue and the TAS record; `queue-check` alone runs only the queue check's
/// cases on the Kueue control plane, `accelerators` only those of kueue/accelerators.rs, `tas`
/// only the TAS record of kueue/tas.rs, `multikueue` the manager and worker of multikueue.rs,
/// `audit` the audit scanner's cases of audit.rs where kwctl and policy-server are found), to
/// narrow a run when debugging.
pub(crate) fn part(name: &str) -> bool {
    std::env::var("CLUSTER_PARTS").map_or(true, |parts| parts.split(',').any(|p| p == name))
}

/// Whether `CLUSTER_PARTS` names this part: for parts that never run by default (`scale`,
/// `make cluster-bench`).
pub(crate) fn named(name: &str) -> bool {
    std::env::var("CLUSTER_PARTS").is_ok_and(|parts| parts.split(',').any(|p| p == name))
}
