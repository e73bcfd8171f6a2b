//! evaluate: sends payload files to the built policy's `validate` (or, with --settings, to
//! `validate_settings`) as they are, and prints each response on one line (for exploring bad
//! input by hand).
//!
//! usage: evaluate [--wasm FILE] [--settings] PAYLOAD.json...
use anyhow::Result;
use multislice_host::{default_wasm_path, Policy};
use std::path::PathBuf;

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut wasm = default_wasm_path();
    if args.first().map(String::as_str) == Some("--wasm") && args.len() > 1 {
        wasm = PathBuf::from(args.remove(1));
        args.remove(0);
    }
    let mut operation = "validate";
    if args.first().map(String::as_str) == Some("--settings") {
        operation = "validate_settings";
        args.remove(0);
    }
    let policy = Policy::load(&wasm)?;
    for file in args {
        let payload = std::fs::read(&file)?;
        match policy.call(operation, &payload) {
            Ok(out) => println!("{file}\t{}", String::from_utf8_lossy(&out)),
            Err(e) => println!("{file}\tHOST ERROR: {e:#}"),
        }
    }
    Ok(())
}
