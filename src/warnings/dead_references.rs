//! JobSet CREATE (and opted-in Job CREATE, §4.6): a warning for each env entry whose `fieldRef`
//! names a controller's label or annotation that no controller puts on the template's pods
//! (SPEC §4.2). Its value is empty in every pod, and the program reading it fails far from the
//! cause: an empty coordinator address (the manual block of kubernetes-sigs/jobset#787 without
//! `spec.coordinator`), or a typo such as `job-globalindex`.
//!
//! A warning must never be false: a key counts as set when any release sets it, in either map, or
//! when the template does. Only the controllers' prefixes are judged: anything else on a pod may
//! come from anywhere. Only env names and `fieldRef` paths are read, so that JobSet CREATE stays
//! cheap; a malformed env is the pods' problem, reported at pod admission.
use crate::json;
use crate::keys;
use crate::spelling;
use crate::views::container_env::metadata_key;
use crate::views::job_view::JobView;
use crate::views::jobset_view::JobSetView;
use crate::views::pod_template::PodTemplateView;
use std::cell::RefCell;
use std::collections::HashMap;

/// Why a key never resolves on a template's pods, and the hint that fixes it, if one does.
type Why = (&'static str, Option<String>);

/// The warnings for a JobSet about to be admitted, replicated job by replicated job.
pub fn jobset_warnings(view: &JobSetView) -> Vec<String> {
    let coordinator_set = view.coordinator.is_some();
    let judge = once_per_key(move |key: &str| -> Option<Why> {
        if !key.starts_with(keys::JOBSET_PREFIX) || keys::JOBSET_POD_KEYS.contains(&key) {
            return None;
        }
        if key == keys::JOBSET_COORDINATOR {
            let why = "which JobSet sets only with spec.coordinator";
            return (!coordinator_set).then(|| (why, Some("set spec.coordinator".into())));
        }
        let known = keys::JOBSET_POD_KEYS
            .iter()
            .copied()
            .chain(coordinator_set.then_some(keys::JOBSET_COORDINATOR));
        Some(("which no JobSet release sets", did_you_mean(key, known)))
    });
    view.replicated_jobs
        .iter()
        .flat_map(|r| scan(&r.template, &judge))
        .collect()
}

/// The warnings for an opted-in plain Job about to be admitted, which no JobSet owns.
pub fn job_warnings(view: &JobView) -> Vec<String> {
    let judge = |key: &str| -> Option<Why> {
        if key.starts_with(keys::JOBSET_PREFIX) {
            return Some(("which no controller sets on a plain Job's pods", None));
        }
        if !key.starts_with(keys::BATCH_PREFIX) || keys::JOB_POD_KEYS.contains(&key) {
            return None;
        }
        let near = did_you_mean(key, keys::JOB_POD_KEYS.iter().copied());
        Some(("which the Job controller does not set", near))
    };
    scan(&view.template, &once_per_key(judge))
}

/// "did you mean" the key of `known` nearest to `key`, if one is close.
fn did_you_mean(key: &str, known: impl Iterator<Item = &'static str>) -> Option<String> {
    spelling::nearest(key, known).map(|near| format!("did you mean {near}?"))
}

/// `judge`, asked once per distinct key of the request: a request may name one key many
/// times, and its "did you mean" is the costly part.
fn once_per_key<'k>(judge: impl Fn(&str) -> Option<Why> + 'k) -> impl Fn(&str) -> Option<Why> + 'k {
    let seen: RefCell<HashMap<String, Option<Why>>> = RefCell::new(HashMap::new());
    move |key: &str| {
        if let Some(why) = seen.borrow().get(key) {
            return why.clone();
        }
        let why = judge(key);
        seen.borrow_mut().insert(key.to_string(), why.clone());
        why
    }
}

/// Whether the template puts `key` on its pods itself, as label or annotation.
fn sets(template: &PodTemplateView, key: &str) -> bool {
    [template.labels, template.annotations]
        .iter()
        .any(|m| m.is_some_and(|m| m.contains_key(key)))
}

/// One warning per env entry, in container order (as the view lists them) and entry order,
/// whose `fieldRef` key `judge` finds missing and the template does not set.
fn scan(template: &PodTemplateView, judge: &dyn Fn(&str) -> Option<Why>) -> Vec<String> {
    let mut out = Vec::new();
    for c in &template.containers {
        let Ok(env) = &c.env else { continue };
        for (e, entry) in env.iter().enumerate() {
            let Some((map, key)) = entry.field_path.and_then(metadata_key) else {
                continue;
            };
            let Some((why, hint)) = judge(key).filter(|_| !sets(template, key)) else {
                continue;
            };
            let var = entry.name.unwrap_or("");
            let singular = map.trim_end_matches('s'); // label or annotation
            let path = json::index(&json::join(&c.path(), "env"), e);
            let hint = hint.map_or(String::new(), |h| format!("; {h}"));
            out.push(format!(
                "{path}: {var} reads the {singular} {key}, {why}, so it is empty in every pod{hint}"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use serde_json::Value;

    /// The warnings for a JobSet of one container with `env`, with or without a coordinator.
    fn warned(env: Value, coordinator: bool) -> Vec<String> {
        let mut js = json!({
            "metadata": {"name": "js"},
            "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {
                "metadata": {"labels": {"jobset.sigs.k8s.io/mine": "x"}},
                "spec": {"containers": [{"name": "c", "env": env}]}}}}}]}
        });
        if coordinator {
            js["spec"]["coordinator"] = json!({"replicatedJob": "w"});
        }
        jobset_warnings(&JobSetView::parse(&js, "google.com/tpu").unwrap())
    }

    fn reference(map: &str, key: &str) -> Value {
        json!({"name": "V", "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.{map}['{key}']")}}})
    }

    #[test]
    fn only_the_keys_nothing_sets_are_warned_about() {
        let env = json!([
            reference("labels", "jobset.sigs.k8s.io/job-index"),
            reference("annotations", "jobset.sigs.k8s.io/mine"),
            reference("labels", "jobset.sigs.k8s.io/coordinator"),
            reference("labels", "jobset.sigs.k8s.io/job-globalindex"),
            reference("labels", "example.com/anything"),
            {"name": "M", "valueFrom": {"fieldRef": "not an object"}},
            "not an entry"
        ]);
        let got = warned(env.clone(), false);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].starts_with("spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[2]: V reads the label jobset.sigs.k8s.io/coordinator, which JobSet sets only with spec.coordinator"));
        assert!(got[1].ends_with("; did you mean jobset.sigs.k8s.io/job-global-index?"));
        let got = warned(env, true);
        assert_eq!(got.len(), 1, "{got:?}");
    }

    #[test]
    fn a_coordinator_typo_is_suggested_only_where_it_would_resolve() {
        let env = json!([reference("annotations", "jobset.sigs.k8s.io/coordinater")]);
        assert!(!warned(env.clone(), false)[0].contains("did you mean"));
        assert!(warned(env, true)[0].ends_with("; did you mean jobset.sigs.k8s.io/coordinator?"));
    }
}
