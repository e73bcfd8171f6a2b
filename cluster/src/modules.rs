//! What the Go modules give the control plane: the binaries `cluster/deps.sh` builds, and the
//! manifests under each module's `config/` (CRDs, webhook configurations), pointed at loopback.
use anyhow::{anyhow, bail, Context, Result};
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The Go-built components, as `cluster/deps.sh` reports them.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub paths: BTreeMap<String, PathBuf>,
}

impl Binaries {
    /// Runs `cluster/deps.sh` (it builds only what its cache lacks) and reads its report.
    pub fn build() -> Result<Binaries> {
        let script = workspace_root().join("cluster/deps.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("cannot run cluster/deps.sh")?;
        if !out.status.success() {
            bail!("cluster/deps.sh failed");
        }
        let paths = String::from_utf8(out.stdout)?
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), PathBuf::from(v)))
            .collect();
        Ok(Binaries { paths })
    }

    pub fn get(&self, name: &str) -> Result<&Path> {
        self.paths
            .get(name)
            .map(PathBuf::as_path)
            .ok_or_else(|| anyhow!("{name} was not built by cluster/deps.sh"))
    }
}

/// Where a Go module of ours (`cluster/deps/<component>`) finds `module` in the module cache,
/// for its CRDs and manifests.
pub fn module_dir(component: &str, module: &str) -> Result<PathBuf> {
    let out = std::process::Command::new("go")
        .args(["list", "-m", "-f", "{{.Dir}}", module])
        .current_dir(workspace_root().join("cluster/deps").join(component))
        .output()
        .context("cannot run go")?;
    if !out.status.success() {
        bail!(
            "go list -m {module}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

/// The YAML files of a directory (a module's CRD bases), sorted.
pub(crate) fn crd_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    Ok(files)
}

/// A webhook configuration from a project's `config/`, under its released name (kustomize's
/// `namePrefix`), each webhook's Service reference replaced by the same path on loopback, where
/// the serving certificate our CA signed for 127.0.0.1 answers (JobSet's, its certificate
/// management off; Kueue's are reached by Service, kueue/install.rs).
pub(crate) fn released_by_url(configuration: &mut Value, prefix: &str, port: u16, ca: &str) {
    let name = configuration["metadata"]["name"]
        .as_str()
        .unwrap_or_default();
    configuration["metadata"]["name"] = json!(format!("{prefix}{name}"));
    for webhook in configuration["webhooks"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let path = webhook["clientConfig"]["service"]["path"]
            .as_str()
            .unwrap_or("/")
            .to_string();
        webhook["clientConfig"] =
            json!({"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": ca});
    }
}

pub(crate) fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}
