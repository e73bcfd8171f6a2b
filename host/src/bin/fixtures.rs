//! fixtures: writes test_data/requests/*.json from the YAML sources in test_data/.
use anyhow::Result;

fn main() -> Result<()> {
    for (path, content) in multislice_host::fixtures::generate_all()? {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, content)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
