//! Which files must run for real, and how: every example that states it is accepted, every
//! JobSet fixture, every opted-in Job fixture that the rules accept, and every rule fixture
//! that test_data/rules/expected.yaml marks accepted, with the policy settings it carries.
use multislice_host::fixtures::load_yaml;
use multislice_host::preview::yaml_documents;
use multislice_host::workspace_root;
use serde_json::{json, Value};

/// The one admitted rule fixture that cannot run: exclusive placement by
/// `kubernetes.io/hostname` of a 2-host slice. JobSet's pod webhook gives the follower pod the
/// nodeSelector `kubernetes.io/hostname: <the leader's node>`, and that node's 4 chips are the
/// leader's, so the follower is never bound ("1 Insufficient google.com/tpu, 1 node(s) didn't
/// match Pod's node affinity/selector"). The policy admits it with a warning (X1) that says
/// each pod gets a node of its own.
const UNRUNNABLE: &str = "x1-pass-hostname";

/// One file of objects to run: examples/*.yaml and the fixtures under test_data/.
pub(crate) struct Shape {
    pub(crate) label: String,
    pub(crate) namespace: String,
    pub(crate) objects: Vec<Value>,
    /// The policy settings the file is judged with (a rule fixture's, from expected.yaml):
    /// its namespace then has policies of its own with them (shapes.rs).
    pub(crate) settings: Option<Value>,
}

pub(crate) fn shape(label: &str, path: &std::path::Path, index: usize) -> anyhow::Result<Shape> {
    let text = std::fs::read_to_string(path)?;
    let namespace = format!("shape-{index}");
    let objects = yaml_documents(&text)?
        .into_iter()
        .filter(|d| d.is_object())
        .map(|mut d| {
            d["metadata"]["namespace"] = json!(namespace);
            d
        })
        .collect();
    Ok(Shape {
        label: label.to_string(),
        namespace,
        objects,
        settings: None,
    })
}

/// Every shape that must run: each example that states it is accepted, each JobSet fixture,
/// each opted-in Job fixture that the rules accept, and each rule fixture that expected.yaml
/// marks accepted (with its `settings`, where it has them).
pub(crate) fn shapes_that_must_run() -> anyhow::Result<Vec<Shape>> {
    let root = workspace_root();
    let verdicts = load_yaml(&root.join("test_data/rules/expected.yaml"))?;
    let mut shapes = Vec::new();
    let mut files: Vec<(String, std::path::PathBuf, Option<Value>)> = Vec::new();
    for dir in [
        "examples",
        "test_data/jobsets",
        "test_data/jobs",
        "test_data/rules",
    ] {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        entries.sort();
        for path in entries {
            let text = std::fs::read_to_string(&path)?;
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            let verdict = &verdicts[stem.as_str()];
            let runs = match dir {
                "examples" => text.contains("# Expected verdict: accepted"),
                // A JobSet's child is served through its JobSet; the -fail Jobs are refused.
                "test_data/jobs" => !stem.ends_with("-fail") && stem != "jobset-child",
                // expected.yaml itself has no verdict, so it never runs.
                "test_data/rules" => verdict["accepted"] == json!(true) && stem != UNRUNNABLE,
                _ => true,
            };
            if runs {
                let settings = match dir {
                    "test_data/rules" => Some(verdict["settings"].clone()).filter(|s| !s.is_null()),
                    _ => None,
                };
                files.push((format!("{dir}/{stem}"), path, settings));
            }
        }
    }
    for (i, (label, path, settings)) in files.into_iter().enumerate() {
        let mut s = shape(&label, &path, i)?;
        s.settings = settings;
        shapes.push(s);
    }
    Ok(shapes)
}
