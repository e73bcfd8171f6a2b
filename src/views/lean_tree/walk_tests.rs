use super::*;
use crate::json_text::Span;
use serde_json::json;

/// What the views read of a replicated job, its Job spec, its pod spec and its
/// containers is built, the rest of them skipped; everything else is as serde reads it.
#[test]
fn only_what_the_views_read_is_built_on_the_way_and_the_rest_is_as_serde_reads_it() {
    let text = r#"{"kind": "JobSet", "metadata": {"name": "js", "labels": {"a": "1"}},
        "spec": {"replicatedJobs": [
            {"name": "r", "dependsOn": [{"name": "x"}], "replicas": 2, "groupName": "g",
             "template": {"metadata": {"labels": {"l": "1"}}, "spec": {"parallelism": 2,
              "backoffLimit": 0, "podFailurePolicy": {"rules": []}, "completions": 2,
              "completionMode": "Indexed", "template": {
                "metadata": {"annotations": {"k": "v"}},
                "spec": {"nodeSelector": {"n": "1"}, "volumes": [{"name": "v"}],
                         "restartPolicy": "Never", "hostNetwork": true,
                         "dnsPolicy": "ClusterFirstWithHostNet", "subdomain": "s",
                         "affinity": {"nodeAffinity": {}}, "tolerations": [{}],
                         "initContainers": [{"name": "i", "image": "x", "env": []}],
                         "containers": [{"name": "c", "command": ["sh", "-c", "a long script"],
                                         "resources": {"limits": {"google.com/tpu": 4}},
                                         "env": null, "env": [{"name": "A", "value": "1"}]},
                                        "not a container"]}}}}},
            "not a replicated job"]}}"#;
    assert_eq!(
        read(text, &JOBSET_POD_SPECS).unwrap(),
        json!({"kind": "JobSet", "metadata": {"name": "js", "labels": {"a": "1"}},
            "spec": {"replicatedJobs": [
                {"name": "r", "replicas": 2, "groupName": "g",
                 "template": {"metadata": {"labels": {"l": "1"}}, "spec": {"parallelism": 2,
                  "completions": 2, "completionMode": "Indexed", "template": {
                    "metadata": {"annotations": {"k": "v"}},
                    "spec": {"nodeSelector": {"n": "1"}, "hostNetwork": true,
                             "dnsPolicy": "ClusterFirstWithHostNet", "subdomain": "s",
                             "affinity": {"nodeAffinity": {}},
                             "initContainers": [{"name": "i", "env": []}],
                             "containers": [{"name": "c",
                                             "resources": {"limits": {"google.com/tpu": 4}},
                                             "env": [{"name": "A", "value": "1"}]},
                                            "not a container"]}}}}},
                "not a replicated job"]}})
    );
    let job = r#"{"spec": {"suspend": true, "parallelism": 1, "template": {"spec":
        {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}"#;
    assert_eq!(
        read(job, &JOB_POD_SPEC).unwrap(),
        json!({"spec": {"parallelism": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}})
    );
}

#[test]
fn a_repeated_step_is_the_last_as_serde_reads_it() {
    let text =
        r#"{"spec": {"template": 1, "template": {"spec": {"containers": [{"image": "x"}]}}}}"#;
    assert_eq!(
        read(text, &JOB_POD_SPEC).unwrap(),
        json!({"spec": {"template": {"spec": {"containers": [{}]}}}})
    );
}

#[test]
fn each_pod_template_is_found_with_its_path_and_span_and_none_when_a_step_repeats() {
    let template =
        |n| format!(r#"{{"metadata": {{}}, "spec": {{"containers": [{{"name": "c{n}"}}]}}}}"#);
    let (a, b) = (template(0), template(1));
    let text = format!(
        r#"{{"spec": {{"replicatedJobs": [{{"template": {{"spec": {{"template": {a}}}}}}},
            {{"name": "r", "template": {{"spec": {{"parallelism": 1, "template": {b} }}}}}}]}}}}"#
    );
    let read = read_with_templates(&text, &JOBSET_POD_SPECS).unwrap();
    assert_eq!(read.tree, serde_json::from_str::<Value>(&text).unwrap());
    assert!(!read.root_may_repeat_a_key);
    let expected = |i: usize, template: &str| {
        let start = text.find(template).unwrap();
        let at = [
            PathStep::Key("spec"),
            PathStep::Key("replicatedJobs"),
            PathStep::Index(i),
            PathStep::Key("template"),
            PathStep::Key("spec"),
            PathStep::Key("template"),
        ];
        let span = Span {
            start,
            end: start + template.len(),
        };
        (at.to_vec(), span)
    };
    assert_eq!(read.templates, vec![expected(0, &a), expected(1, &b)]);
    let job = r#"{"spec": {"template": {"spec": {}}}}"#;
    let templates = read_with_templates(job, &JOB_POD_SPEC).unwrap().templates;
    let span = Span { start: 22, end: 34 };
    assert_eq!(
        templates,
        vec![(vec![PathStep::Key("spec"), PathStep::Key("template")], span)]
    );
    // A splice from one of two `template`s would leave the other as it was, and one that
    // stops at a template's first `metadata` would leave its second.
    for repeated in [
        r#"{"spec": {"template": {}, "template": {"spec": {}}}}"#,
        r#"{"spec": {"template": {"spec": {}}}, "spec": {"template": {"spec": {}}}}"#,
        r#"{"spec": {"template": {"metadata": {}, "spec": {}, "metadata": {}}}}"#,
    ] {
        let read = read_with_templates(repeated, &JOB_POD_SPEC).unwrap();
        assert_eq!(read.tree, serde_json::from_str::<Value>(repeated).unwrap());
        assert_eq!(read.templates, Templates::new(), "{repeated}");
    }
    // Read whole by serde: nothing found.
    let read = read_with_templates("[1]", &JOB_POD_SPEC).unwrap();
    assert_eq!(read.templates, Templates::new());
}

/// Whether the root object has a key twice, any key, however deep the walk went below it.
#[test]
fn a_key_the_root_object_repeats_is_noted_and_one_below_it_is_not() {
    for (text, repeats) in [
        (
            r#"{"metadata": {}, "spec": {"template": {"spec": {}}}}"#,
            false,
        ),
        (
            r#"{"metadata": {}, "spec": {"template": {}}, "metadata": {}}"#,
            true,
        ),
        (r#"{"metad\u0061ta": 1, "metadata": 2}"#, true),
        (r#"{"spec": {"template": {}}, "spec": {}}"#, true),
        (
            r#"{"spec": {"a": 1, "a": 2, "template": {"spec": {}}}}"#,
            false,
        ),
        ("[1]", false),
    ] {
        let read = read_with_templates(text, &JOB_POD_SPEC).unwrap();
        assert_eq!(read.root_may_repeat_a_key, repeats, "{text}");
    }
}

#[test]
fn what_the_walk_does_not_expect_is_read_whole_in_serdes_words() {
    assert_eq!(read("[1]", &JOB_POD_SPEC).unwrap(), json!([1]));
    assert_eq!(container_list(r#"{"a": 1}"#).unwrap(), json!({"a": 1}));
    // Members skipped are checked as serde reads them: at a Job spec, and at a pod spec.
    for text in [
        "{",
        r#"{"spec": }"#,
        "[1,]",
        "{} x",
        r#"{"spec": {"suspend": [1,], "template": {}}}"#,
        r#"{"spec": {"template": {"spec": {"volumes": "\x"}}}}"#,
    ] {
        let serde = serde_json::from_str::<Value>(text).unwrap_err().to_string();
        assert_eq!(
            read(text, &JOB_POD_SPEC).unwrap_err().to_string(),
            serde,
            "{text}"
        );
    }
}

/// A member the views never read is checked as serde checks a field it ignores: its shape, as
/// a policy reading into typed structs would. A number beyond `f64` or a lone surrogate there
/// (which the API server, having decoded and encoded the object, never sends) is not refused,
/// where a tree built of it refused it; the same in a member that is read still is.
#[test]
fn a_member_never_read_is_checked_as_serde_checks_a_field_it_ignores() {
    let skipped = r#"{"spec": {"backoffLimit": 1e400, "template": {"spec":
        {"tolerations": [{"key": "\ud800"}], "containers": [{"name": "c"}]}}}}"#;
    assert!(serde_json::from_str::<Value>(skipped).is_err());
    assert_eq!(
        read(skipped, &JOB_POD_SPEC).unwrap(),
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}})
    );
    let read_ones = [
        r#"{"spec": {"parallelism": 1e400, "template": {"spec": {}}}}"#,
        r#"{"spec": {"template": {"spec": {"subdomain": "\ud800"}}}}"#,
    ];
    for text in read_ones {
        let serde = serde_json::from_str::<Value>(text).unwrap_err().to_string();
        assert_eq!(
            read(text, &JOB_POD_SPEC).unwrap_err().to_string(),
            serde,
            "{text}"
        );
    }
}

/// Every JobSet and Job of the request fixtures, new and old, gives the same view read lean as
/// read whole by serde: all that the views read is on the lists of what the walk builds. The
/// xpk, Pathways and GKE fixtures carry the pod spec members the walk skips. Native only: the
/// wasm test runner gives the module no files.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn every_fixture_has_the_same_view_read_lean_or_whole() {
    use crate::views::job_view::JobView;
    use crate::views::jobset_view::JobSetView;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/requests");
    let mut compared = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let request: Value =
            serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
        for object in ["object", "oldObject"].map(|k| &request[k]) {
            let text = serde_json::to_string(object).unwrap();
            let (lean, whole) = match object["kind"].as_str() {
                Some("JobSet") => {
                    let lean = read(&text, &JOBSET_POD_SPECS).unwrap();
                    (
                        format!("{:?}", JobSetView::parse(&lean, "google.com/tpu")),
                        format!("{:?}", JobSetView::parse(object, "google.com/tpu")),
                    )
                }
                Some("Job") => {
                    let lean = read(&text, &JOB_POD_SPEC).unwrap();
                    (
                        format!("{:?}", JobView::parse(&lean, "google.com/tpu")),
                        format!("{:?}", JobView::parse(object, "google.com/tpu")),
                    )
                }
                _ => continue,
            };
            assert_eq!(lean, whole, "{text}");
            compared += 1;
        }
    }
    assert!(compared >= 100, "{compared} objects compared");
}
