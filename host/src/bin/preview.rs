//! preview: run a JobSet YAML file through the policy and simulated controllers. The policy
//! is its library compiled natively ([`Native`]), which answers as the module does
//! (tests/wasm/native_agrees.rs), so the preview builds no wasmtime.
//!
//! usage: preview [--settings FILE | --settings-json JSON] [--jobset-api v0.8|v0.9] JOBSET.yaml
use anyhow::{bail, Context, Result};
use multislice_host::controller::JobSetApi;
use multislice_host::preview::{preview, yaml_documents};
use multislice_host::{Evaluator, Native};
use serde_json::Value;

const USAGE: &str =
    "usage: preview [--settings FILE | --settings-json JSON] [--jobset-api v0.8|v0.9] JOBSET.yaml";

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut settings = Value::Object(Default::default());
    let mut api = JobSetApi::V09;
    let mut file = None;
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--settings" => {
                let path = value()?;
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {path}"))?;
                settings = yaml_documents(&text)?
                    .into_iter()
                    .next()
                    .unwrap_or(Value::Null);
            }
            "--settings-json" => {
                settings = serde_json::from_str(&value()?).context("--settings-json is not JSON")?
            }
            "--jobset-api" => {
                api = match value()?.as_str() {
                    "v0.8" => JobSetApi::V08,
                    "v0.9" => JobSetApi::V09,
                    other => bail!("--jobset-api takes v0.8 or v0.9, not {other}"),
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ if file.is_none() && !arg.starts_with("--") => file = Some(arg),
            _ => bail!("unexpected argument {arg}\n{USAGE}"),
        }
    }
    let file = file.with_context(|| USAGE.to_string())?;
    let policy = Native::new();
    let check = policy.validate_settings(&settings)?;
    if !check.valid {
        bail!("invalid settings: {}", check.message.unwrap_or_default());
    }
    let yaml = std::fs::read_to_string(&file).with_context(|| format!("cannot read {file}"))?;
    print!("{}", preview(&policy, &yaml, &settings, api)?);
    Ok(())
}
