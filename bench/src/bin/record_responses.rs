//! make responses FROM=old.wasm: records what a host reads from that module's response to
//! every case of `multislice_bench::responses`, into test_data/responses/. Run it with the
//! module of the commit before a change that must not change any answer; the test
//! `bench/tests/responses.rs` then holds policy.wasm to it.
use anyhow::{Context, Result};
use multislice_bench::responses::{cases, recorded_dir, response};
use multislice_host::Policy;

fn main() -> Result<()> {
    let module = std::env::args()
        .nth(1)
        .context("usage: record-responses MODULE.wasm")?;
    let policy = Policy::load(module.as_ref())?;
    let dir = recorded_dir();
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let cases = cases()?;
    for case in &cases {
        let text = serde_json::to_string_pretty(&response(&policy, case)?)? + "\n";
        std::fs::write(dir.join(format!("{}.json", case.name)), text)?;
    }
    println!("{} responses of {module} in {}", cases.len(), dir.display());
    Ok(())
}
