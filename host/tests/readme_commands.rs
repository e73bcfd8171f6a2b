//! The README's "From source" section gives a newcomer two commands, `make preview` and `make
//! test`. Each must be a target of the Makefile, and `make preview` is run here as the README
//! writes it (`make test` would run this test again): on a machine where it was never built, it
//! builds and prints the verdict and every pod's env, exactly what the preview prints in
//! process.
use multislice_host::controller::JobSetApi;
use multislice_host::preview::preview;
use multislice_host::{workspace_root, Native};
use serde_json::json;
use std::process::Command;

fn read(file: &str) -> String {
    std::fs::read_to_string(workspace_root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The commands of the first fenced block under the README heading "From source" (any level),
/// one a line, without `#` comments or blank lines.
fn from_source_commands() -> Vec<String> {
    let readme = read("README.md");
    let mut lines = readme.lines().skip_while(|l| {
        !(l.starts_with('#') && l.trim_start_matches('#').trim().starts_with("From source"))
    });
    let heading = lines
        .next()
        .expect("README.md has no \"From source\" heading");
    let level = heading.chars().take_while(|&c| c == '#').count();
    let section: Vec<&str> = lines
        .take_while(|l| {
            let hashes = l.chars().take_while(|&c| c == '#').count();
            !(hashes > 0 && hashes <= level && l[hashes..].starts_with(' '))
        })
        .collect();
    let block: Vec<String> = section
        .iter()
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        !block.is_empty(),
        "README.md's \"From source\" section has no fenced commands"
    );
    block
}

/// `make` for this workspace, apart from any make that started `cargo test`.
fn make() -> Command {
    let mut command = Command::new("make");
    command
        .current_dir(workspace_root())
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL");
    command
}

#[test]
fn the_readme_gives_make_preview_and_make_test_and_the_makefile_has_both() {
    assert_eq!(from_source_commands(), ["make preview", "make test"]);
    for command in from_source_commands() {
        let target = command.strip_prefix("make ").unwrap();
        let dry_run = make().args(["-n", target]).output().unwrap();
        assert!(
            dry_run.status.success(),
            "`make -n {target}`: {}",
            String::from_utf8_lossy(&dry_run.stderr)
        );
    }
}

#[test]
fn make_preview_prints_the_verdict_and_every_pods_env() {
    let example = read("Makefile")
        .lines()
        .find_map(|l| l.strip_prefix("EXAMPLE ?= "))
        .expect("the Makefile names no default EXAMPLE")
        .trim()
        .to_string();
    let out = make().args(["-s", "preview"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "make preview failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = preview(&Native::new(), &read(&example), &json!({}), JobSetApi::V09).unwrap();
    assert_eq!(stdout, want);
    let mut lines = stdout.lines();
    assert!(
        lines
            .next()
            .is_some_and(|l| l.starts_with("JobSet ") && l.ends_with(": accepted, mutated")),
        "no verdict first:\n{stdout}"
    );
    let header = stdout
        .lines()
        .find(|l| l.starts_with("POD "))
        .unwrap_or_else(|| panic!("no pod table:\n{stdout}"));
    assert!(header.contains("MEGASCALE_NUM_SLICES"), "{header}");
    let pods = stdout
        .lines()
        .skip_while(|l| !l.starts_with("POD "))
        .skip(1);
    assert!(pods.count() >= 2, "fewer than two pods:\n{stdout}");
}
