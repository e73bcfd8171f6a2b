//! evaluate: sends payload files to the built policy's `validate` (or, with --settings, to
//! `validate_settings`) as they are, and prints each response on one line (for exploring bad
//! input by hand, and the harness twin of `kwctl run`).
//!
//! usage: evaluate [--wasm FILE] [--settings] [--allow-context-aware [--metadata FILE]]
//!                 [--replay-host-capabilities-interactions SESSION] PAYLOAD.json...
//!
//! The host capabilities flags are kwctl run's, with their meaning:
//! - `--allow-context-aware` grants the Kubernetes kinds of the policy metadata's
//!   `contextAwareResources` (`policy-metadata.yml` at the workspace root, or `--metadata`);
//!   without it every `get_resource` call is refused as kwctl refuses it.
//! - `--replay-host-capabilities-interactions` answers them from a session recorded by kwctl
//!   (`--record-host-capabilities-interactions`), strictly in order; the payloads share one
//!   session, one after the other. Leftover exchanges are reported on stderr, as kwctl warns.
//!
//! kwctl would read a real cluster under `--allow-context-aware` alone; this host reads none, so
//! that combination is refused.
use anyhow::{bail, Result};
use multislice_host::capabilities::{allowed_by_file, Capabilities};
use multislice_host::session::Session;
use multislice_host::{default_wasm_path, workspace_root, Policy};
use std::path::PathBuf;
use std::sync::Arc;

fn main() -> Result<()> {
    let mut wasm = default_wasm_path();
    let mut operation = "validate";
    let mut allow_context_aware = false;
    let mut metadata = workspace_root().join("policy-metadata.yml");
    let mut replay: Option<PathBuf> = None;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| match args.next() {
            Some(v) => Ok(PathBuf::from(v)),
            None => bail!("{flag} needs a value"),
        };
        match arg.as_str() {
            "--wasm" => wasm = value("--wasm")?,
            "--settings" => operation = "validate_settings",
            "--allow-context-aware" => allow_context_aware = true,
            "--metadata" => metadata = value("--metadata")?,
            "--replay-host-capabilities-interactions" => {
                replay = Some(value("--replay-host-capabilities-interactions")?)
            }
            flag if flag.starts_with("--") => bail!("unknown flag {flag}"),
            _ => files.push(arg),
        }
    }
    let allowed = if allow_context_aware {
        allowed_by_file(&metadata)?
    } else {
        Default::default()
    };
    let session = replay
        .map(|path| Session::load(&path))
        .transpose()?
        .map(Arc::new);
    let capabilities = match &session {
        Some(session) => Capabilities::kubernetes(session.clone(), allowed),
        None if allow_context_aware => bail!(
            "--allow-context-aware needs --replay-host-capabilities-interactions: \
             this host reads no cluster"
        ),
        None => Capabilities::none(),
    };
    let policy = Policy::load(&wasm)?.with_capabilities(capabilities);
    for file in files {
        let payload = std::fs::read(&file)?;
        match policy.call(operation, &payload) {
            Ok(out) => println!("{file}\t{}", String::from_utf8_lossy(&out)),
            Err(e) => println!("{file}\tHOST ERROR: {e:#}"),
        }
    }
    if let Some(left) = session.map(|s| s.remaining()).filter(|&n| n > 0) {
        eprintln!("evaluate: {left} of the recorded exchanges have not been replayed");
    }
    Ok(())
}
