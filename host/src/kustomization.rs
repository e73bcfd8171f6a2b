//! The policies of a kustomization of examples/, rendered as `kubectl kustomize` renders them,
//! for the tests that read the examples without a kubectl (`make test`, CI without the control
//! plane). Only the shapes examples/ uses are read, and anything else fails loudly: `resources`
//! (files, or folders with a kustomization), `components`, and `patches` by `path` or inline
//! `patch`, each a JSON patch (RFC 6902, a YAML list) or a merge patch of `spec` (RFC 7386,
//! what kustomize's strategic merge does on a kind it has no schema for), on the resources its
//! `target` selects (`group`, `kind`, and `name` as kustomize's anchored regular expression in
//! the one form used: literal text with at most one `(a|b|…)` group). As kustomize does, a
//! kustomization's own resources come first, then its components in order, then its own patches.
//! `make cluster-test` applies the same folders with real `kubectl apply -k`
//! (cluster/kustomize/), so the two renderings are held to the same outcome there.
use crate::fixtures::load_yaml;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use std::path::Path;

/// The objects the kustomization in `dir` renders, in order.
pub fn render(dir: &Path) -> Result<Vec<Value>> {
    build(dir, None)
}

fn build(dir: &Path, mut into: Option<Vec<Value>>) -> Result<Vec<Value>> {
    let file = dir.join("kustomization.yaml");
    let k = load_yaml(&file)?;
    let component = k["kind"] == "Component";
    for key in k.as_object().into_iter().flat_map(|o| o.keys()) {
        if !["apiVersion", "kind", "resources", "components", "patches"].contains(&key.as_str()) {
            bail!("{}: `{key}` is not read here", file.display());
        }
    }
    let mut docs = if component {
        into.take().unwrap_or_default()
    } else {
        Vec::new()
    };
    for resource in list(&k, "resources") {
        let path = dir.join(resource.as_str().context("a resource is a path")?);
        if path.is_dir() {
            docs.extend(build(&path, None)?);
        } else {
            docs.push(load_yaml(&path)?);
        }
    }
    for c in list(&k, "components") {
        let path = dir.join(c.as_str().context("a component is a path")?);
        docs = build(&path, Some(docs))?;
    }
    for patch in list(&k, "patches") {
        let body: Value = match (patch["path"].as_str(), patch["patch"].as_str()) {
            (Some(p), None) => load_yaml(&dir.join(p))?,
            (None, Some(inline)) => serde_yaml::from_str(inline)?,
            _ => bail!("{}: a patch has a path or a patch: {patch}", file.display()),
        };
        let mut hits = 0;
        for doc in &mut docs {
            if selects(&patch["target"], doc)? {
                apply(doc, &body).with_context(|| format!("{}: {patch}", file.display()))?;
                hits += 1;
            }
        }
        if hits == 0 {
            bail!("{}: {patch} selects nothing", file.display());
        }
    }
    Ok(docs)
}

fn list<'a>(k: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    k[key].as_array().into_iter().flatten()
}

fn selects(target: &Value, doc: &Value) -> Result<bool> {
    for key in target.as_object().into_iter().flat_map(|o| o.keys()) {
        if !["group", "kind", "name"].contains(&key.as_str()) {
            bail!("a target's `{key}` is not read here");
        }
    }
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    if target["group"].as_str().is_some_and(|g| g != group) {
        return Ok(false);
    }
    if target["kind"].as_str().is_some_and(|k| doc["kind"] != k) {
        return Ok(false);
    }
    let name = doc["metadata"]["name"].as_str().unwrap_or_default();
    Ok(match target["name"].as_str() {
        None => true,
        Some(pattern) => names(pattern)?.iter().any(|n| n == name),
    })
}

/// The names a target's `name` pattern matches: `a-(b|c)` is `a-b` and `a-c`.
pub fn names(pattern: &str) -> Result<Vec<String>> {
    if pattern.contains(['.', '*', '+', '?', '[', '^', '$', '\\']) {
        bail!("the name pattern {pattern:?} is more than a literal with one group");
    }
    Ok(match pattern.split_once('(') {
        None => vec![pattern.to_string()],
        Some((head, rest)) => {
            let (group, tail) = rest
                .split_once(')')
                .ok_or_else(|| anyhow!("an open group in {pattern:?}"))?;
            if tail.contains('(') {
                bail!("more than one group in {pattern:?}");
            }
            group
                .split('|')
                .map(|alt| format!("{head}{alt}{tail}"))
                .collect()
        }
    })
}

fn apply(doc: &mut Value, body: &Value) -> Result<()> {
    match body {
        Value::Array(_) => {
            let ops: json_patch::Patch = serde_json::from_value(body.clone())?;
            json_patch::patch(doc, &ops)?;
        }
        Value::Object(o) => {
            for key in o.keys() {
                if !["apiVersion", "kind", "metadata", "spec"].contains(&key.as_str()) {
                    bail!("a merge patch's `{key}` is not read here");
                }
            }
            json_patch::merge(&mut doc["spec"], &body["spec"]);
        }
        _ => bail!("a patch is a list or an object"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_pattern_is_a_literal_with_one_group() {
        assert_eq!(names("p-(a|b)").unwrap(), ["p-a", "p-b"]);
        assert_eq!(names("p").unwrap(), ["p"]);
        assert!(names("p-.*").is_err());
        assert!(names("(a|b)-(c|d)").is_err());
    }
}
