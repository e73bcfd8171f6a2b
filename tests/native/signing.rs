//! release.yml signs the module as tests/registry/publish.bats shows Kubewarden verifies it:
//! the format flags of its `cosign sign` lines are the test's `RELEASE_SIGNS`, line for line,
//! and the cosign it installs is the release that `cluster/deps.sh cosign` builds for the test.
use multislice_host::workspace_root;

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The value of the first line of `text` that starts (after its indent) with `prefix`.
fn value_after<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starts with {prefix}"))
        .trim()
}

/// The flags of each `cosign sign` line of release.yml (not `cosign sign-blob`), but `--yes`,
/// in order. Each line signs `"$ref"`, the digest that `kwctl push` printed.
fn release_yml_signs() -> Vec<String> {
    read(".github/workflows/release.yml")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cosign sign "))
        .map(|rest| {
            let words: Vec<&str> = rest.split_whitespace().collect();
            assert_eq!(words.last(), Some(&"\"$ref\""), "cosign sign {rest}");
            let flags = &words[..words.len() - 1];
            assert!(
                flags.iter().all(|w| w.starts_with("--")),
                "cosign sign {rest}: one flag per word, as --flag=value"
            );
            flags
                .iter()
                .filter(|w| **w != "--yes")
                .copied()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// The entries of a bash array assignment `NAME=("…" "…")` of publish.bats, on one line.
fn bats_array(name: &str) -> Vec<String> {
    let text = read("tests/registry/publish.bats");
    let list = value_after(&text, &format!("{name}=("));
    let list = list.strip_suffix(')').expect("the array ends on its line");
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn release_yml_signs_in_the_formats_the_registry_test_verifies() {
    let release = release_yml_signs();
    assert_eq!(release, bats_array("RELEASE_SIGNS"));
    // The first signature is the one Kubewarden reads: the tag sha256-<digest>.sig.
    assert_eq!(
        release.first().map(String::as_str),
        Some("--new-bundle-format=false --use-signing-config=false")
    );
}

#[test]
fn the_registry_test_signs_with_the_cosign_release_yml_installs() {
    let release = read(".github/workflows/release.yml");
    let installed = value_after(&release, "cosign-release:");
    let installed = installed.split_whitespace().next().unwrap();
    let deps = read("cluster/deps.sh");
    assert_eq!(installed, value_after(&deps, "COSIGN_VERSION="));
}
