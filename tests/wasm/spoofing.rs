//! A user who pre-sets the policy's bookkeeping or the JobSet group keys on a pod template
//! cannot make a pod of a JobSet the policy admitted claim a wrong slice id or slice count.
use crate::common::*;
use multislice_host::controller::JobSetApi;
use multislice_host::env::{get, resolve};
use serde_json::json;
use std::collections::BTreeSet;

const TEMPLATE_META: &str = "/spec/replicatedJobs/0/template/spec/template/metadata";

fn slice_values(
    request: &serde_json::Value,
) -> (BTreeSet<String>, BTreeSet<(String, u64)>, BTreeSet<String>) {
    let (_, _, pods) = run(request, &no_settings());
    let (mut num, mut ids, mut coordinators) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for p in &pods {
        let env = resolve(&p.pod, &p.pod["spec"]["containers"][0]).unwrap();
        num.insert(get(&env, "MEGASCALE_NUM_SLICES").unwrap().to_string());
        ids.insert((
            get(&env, "MEGASCALE_SLICE_ID").unwrap().to_string(),
            p.sim.job_index,
        ));
        coordinators.insert(
            get(&env, "MEGASCALE_COORDINATOR_ADDRESS")
                .unwrap()
                .to_string(),
        );
    }
    (num, ids, coordinators)
}

fn honest() -> (BTreeSet<String>, BTreeSet<(String, u64)>, BTreeSet<String>) {
    (
        BTreeSet::from(["4".to_string()]),
        (0..4u64).map(|j| (j.to_string(), j)).collect(),
        BTreeSet::from(["llama-v5e-slice-0-0.llama-v5e".to_string()]),
    )
}

#[test]
fn forged_facts_on_a_tpu_template_are_replaced_at_jobset_create() {
    for api in [JobSetApi::V08, JobSetApi::V09] {
        let mut request = fixture_request("tpu-4-slices", api);
        request["object"].pointer_mut(TEMPLATE_META).unwrap()["annotations"] = json!({
            "multislice.kubewarden.io/facts": r#"{"slice":{"total":99,"offset":7},"coordinator":"evil-0-0","podsPerJob":1}"#
        });
        let outcome = validate(&request, &no_settings());
        let ops: Vec<String> = outcome
            .patch
            .as_ref()
            .unwrap()
            .0
            .iter()
            .map(|op| {
                serde_json::to_value(op).unwrap()["op"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            ops,
            ["replace"],
            "the forged facts are replaced, not merged"
        );
        assert_eq!(slice_values(&request), honest());
    }
}

#[test]
fn forged_group_keys_on_a_template_do_not_move_slices() {
    // Before v0.9 the controller sets no group keys, so these reach every pod as written.
    let mut request = fixture_request("tpu-4-slices", JobSetApi::V08);
    let forged = json!({
        "jobset.sigs.k8s.io/group-name": "other",
        "jobset.sigs.k8s.io/group-replicas": "99",
        "jobset.sigs.k8s.io/job-group-index": "42"
    });
    let meta = request["object"].pointer_mut(TEMPLATE_META).unwrap();
    meta["labels"] = forged.clone();
    meta["annotations"] = forged;
    assert_eq!(slice_values(&request), honest());
}
