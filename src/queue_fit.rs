//! The queue check's verdict (SPEC §8 `queueCheck`): which flavours of the JobSet's Kueue queue
//! each TPU replicated job fits, read as Kueue's flavour assigner reads them. Kueue compares a pod
//! set's node selection with a flavour's node labels, on the label keys that the flavours of the
//! resource group carry. A replicated job fits a flavour when one of the slice shapes of §4.7 that
//! fit it has the flavour's accelerator and topology.
use crate::accelerators;
use crate::affinity_mark::Pairs;
use crate::groups::JobSetPlan;
use crate::narrowing::{self, Shapes};
use crate::tas::Request;
use crate::views::jobset_view::ReplicatedJob;
use crate::views::kueue_queue::Flavour;
use crate::violation::{Findings, Rule, Violation};

/// The queue as the lookup found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    pub namespace: String,
    pub local_queue: String,
    pub cluster_queue: String,
    /// The flavours of the resource group that covers the TPU resource, if one does.
    pub flavours: Option<Vec<Flavour>>,
    /// The MultiKueue AdmissionCheck of the ClusterQueue, when it dispatches to other clusters.
    pub multikueue_check: Option<String>,
}

/// Where the JobSet names its queue, for messages.
fn queue_path(plan: &JobSetPlan) -> String {
    plan.view.queue.map(|q| q.path()).unwrap_or_default()
}

/// `"v6e-2x4" (tpu-v6e-slice 2x4)`, with what the flavour leaves unlabelled.
fn describe_flavour(f: &Flavour, accelerator: &str, topology: &str) -> String {
    let get = |key: &str, what: &str| {
        f.labels
            .get(key)
            .cloned()
            .unwrap_or_else(|| format!("no {what} label"))
    };
    format!(
        "{:?} ({} {})",
        f.name,
        get(accelerator, "accelerator"),
        get(topology, "topology")
    )
}

/// Whether `rjob`, whose shapes are `pairs`, fits the flavour, on the keys the group carries.
fn fits(f: &Flavour, pairs: &Pairs, acc_key: &str, topo_key: &str, acc_carried: bool) -> bool {
    let Some(topology) = f.labels.get(topo_key) else {
        return false;
    };
    let accelerator = f.labels.get(acc_key);
    if acc_carried && accelerator.is_none() {
        return false;
    }
    pairs.iter().any(|(acc, topologies)| {
        topologies.contains(topology) && (!acc_carried || accelerator == Some(acc))
    })
}

/// The findings for a queued TPU JobSet and its queue.
pub fn judge_flavours(plan: &JobSetPlan, queue: &Queue) -> Findings {
    let settings = plan.settings;
    let mut out = Findings::default();
    let local_queue = format!("{}/{}", queue.namespace, queue.local_queue);
    let cluster_queue = &queue.cluster_queue;
    let named = format!("queue {local_queue:?} (ClusterQueue {cluster_queue:?})");
    if let Some(check) = &queue.multikueue_check {
        // The worker's Kueue picks the flavour; the manager's goes nowhere (kueue#16010).
        out.warnings.push(format!(
            "{}: {named} dispatches with MultiKueue (AdmissionCheck {check:?}); its flavours here \
             run nothing, so the fit is judged in the worker cluster",
            queue_path(plan)
        ));
        return out;
    }
    let Some(flavours) = &queue.flavours else {
        out.violations.push(Violation::new(
            Rule::Q1,
            queue_path(plan),
            format!(
                "names {named}, which has no resource group for {}, so Kueue would never admit it",
                settings.tpu_resource
            ),
            format!(
                "submit it to a queue whose ClusterQueue covers {}",
                settings.tpu_resource
            ),
        ));
        return out;
    };
    let topo_key = settings.topology_label.as_str();
    let carried = |key: &str| flavours.iter().any(|f| f.labels.contains_key(key));
    let shapes_judged = carried(topo_key);
    if !shapes_judged {
        out.warnings.push(format!(
            "{}: {named}: its {} flavours carry no {topo_key} label, so the policy could not check the slice shape; every flavour counts",
            queue_path(plan),
            settings.tpu_resource
        ));
    }
    for rjob in plan.view.replicated_jobs.iter().filter(|r| r.is_tpu()) {
        let found = judge_rjob(plan, rjob, flavours, &named);
        out.violations.extend(found.violations);
        out.warnings.extend(found.warnings);
    }
    out
}

/// The findings for one TPU replicated job: a refusal where no flavour fits its slices, or none
/// places it by topology; else a warning naming the flavours Kueue will skip for it.
fn judge_rjob(
    plan: &JobSetPlan,
    rjob: &ReplicatedJob,
    flavours: &[Flavour],
    named: &str,
) -> Findings {
    // The flavours' node label keys Kueue compares, and whether any flavour carries each.
    let acc_key = plan.settings.accelerator_label.as_str();
    let topo_key = plan.settings.topology_label.as_str();
    let carried = |key: &str| flavours.iter().any(|f| f.labels.contains_key(key));
    let request = &plan.tas[rjob.index];
    let by_topology = |fit| match request.is_any() {
        true => judge_topologies(plan, rjob, request, named, fit),
        false => Ok(None),
    };
    let pairs = match &plan.shapes.own[rjob.index] {
        Some(Shapes::Fixed(p) | Shapes::Open(p)) if carried(topo_key) => p,
        _ => return findings(None, by_topology(flavours.iter().collect())),
    };
    // A flavour of an accelerator the table lacks is left open (SPEC §4.7).
    let unknown = |f: &Flavour| {
        plan.shapes.unknown_open[rjob.index]
            && f.labels
                .get(acc_key)
                .is_some_and(|a| accelerators::lookup(&plan.settings.accelerators, a).is_none())
    };
    let acc_carried = carried(acc_key);
    let (fit, misfit): (Vec<&Flavour>, Vec<&Flavour>) = flavours
        .iter()
        .partition(|f| fits(f, pairs, acc_key, topo_key, acc_carried) || unknown(f));
    let shown = |fs: &[&Flavour]| {
        fs.iter()
            .map(|f| describe_flavour(f, acc_key, topo_key))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if fit.is_empty() {
        let violation = no_flavour_fits(plan, rjob, pairs, named, &shown(&misfit));
        return findings(None, Err(violation));
    }
    let skipped = (!misfit.is_empty()).then(|| {
        format!(
            "{}: {named}: replicated job {:?} fits only {}; Kueue will skip {} for it",
            queue_path(plan),
            rjob.name,
            shown(&fit),
            shown(&misfit)
        )
    });
    findings(skipped, by_topology(fit))
}

/// A replicated job's findings: the shapes' warning, then the Topologies' verdict.
fn findings(shapes: Option<String>, topologies: Result<Option<String>, Violation>) -> Findings {
    let (violations, topologies) = match topologies {
        Ok(warning) => (Vec::new(), warning),
        Err(violation) => (vec![violation], None),
    };
    let warnings = shapes.into_iter().chain(topologies).collect();
    Findings {
        violations,
        warnings,
    }
}

/// Why Kueue skips flavour `f` for a replicated job that asks for `request`, if it does: its
/// Topology lacks a level the request names, or puts the slice level above the required one.
fn topology_misfit(f: &Flavour, request: &Request) -> Option<String> {
    let (Some(name), Some(levels)) = (&f.topology_name, &f.levels) else {
        return f.topology_name.is_none().then(|| "no Topology".to_string());
    };
    let index = |key: &str| levels.iter().position(|l| l == key);
    if let Some(missing) = request.levels().find(|key| index(key).is_none()) {
        return Some(format!("Topology {name:?} has no level {missing}"));
    }
    let top = request.required.or(request.preferred)?;
    let slice = request.layers.first()?.key.as_ref();
    (index(slice) < index(top))
        .then(|| format!("Topology {name:?} has the slice level {slice} above {top}"))
}

/// The flavours that fit `rjob`'s slices, judged again by their Topologies: a refusal where none
/// places it, else a warning naming those Kueue skips for it.
fn judge_topologies(
    plan: &JobSetPlan,
    rjob: &ReplicatedJob,
    request: &Request,
    named: &str,
    fit: Vec<&Flavour>,
) -> Result<Option<String>, Violation> {
    let (placed, unplaced): (Vec<&Flavour>, Vec<&Flavour>) = fit
        .into_iter()
        .partition(|f| topology_misfit(f, request).is_none());
    let why = |fs: &[&Flavour]| {
        fs.iter()
            .filter_map(|f| Some(format!("{:?} ({})", f.name, topology_misfit(f, request)?)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if placed.is_empty() {
        return Err(Violation::new(
            Rule::Q1,
            queue_path(plan),
            format!(
                "names {named}, whose flavours cannot place replicated job {:?} by topology: {}, so Kueue would never admit it",
                rjob.name,
                why(&unplaced)
            ),
            "use levels of the flavour's Topology in the kueue.x-k8s.io/podset-* annotations, the slice level at or below the required one, or add the levels to the Topology",
        ));
    }
    let placed: Vec<String> = placed.iter().map(|f| format!("{:?}", f.name)).collect();
    Ok((!unplaced.is_empty()).then(|| {
        format!(
            "{}: {named}: replicated job {:?} can be placed by topology only in {}; Kueue will skip {} for it",
            queue_path(plan),
            rjob.name,
            placed.join(", "),
            why(&unplaced),
        )
    }))
}

fn no_flavour_fits(
    plan: &JobSetPlan,
    rjob: &ReplicatedJob,
    pairs: &Pairs,
    named: &str,
    flavours: &str,
) -> Violation {
    let needs = if pairs.is_empty() {
        "no slice of the accelerator table".to_string()
    } else {
        narrowing::describe(pairs)
    };
    Violation::new(
        Rule::Q1,
        queue_path(plan),
        format!(
            "names {named}, where replicated job {:?} fits no flavour of {}: {flavours}; it needs a slice of {} hosts with {} chips per pod: {needs}, so Kueue would never admit it",
            rjob.name,
            plan.settings.tpu_resource,
            rjob.parallelism,
            rjob.chips_per_pod,
        ),
        "submit it to a queue with a flavour of one of those shapes, or add such a flavour to the ClusterQueue",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;
    use crate::views::jobset_view::JobSetView;
    use rstest::rstest;
    use serde_json::json;

    const ACC: &str = "cloud.google.com/gke-tpu-accelerator";
    const TOPO: &str = "cloud.google.com/gke-tpu-topology";

    fn flavour(name: &str, labels: &[(&str, &str)]) -> Flavour {
        Flavour {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            topology_name: None,
            levels: None,
        }
    }

    #[rstest]
    #[case::no_fitting_flavour_is_a_q1_naming_each_flavour_and_the_shapes_needed(Some(vec![flavour("a", &[(ACC, "tpu-v6e-slice"), (TOPO, "2x4")]), flavour("b", &[(ACC, "tpu-v5p-slice"), (TOPO, "4x4")]), flavour("c", &[(ACC, "tpu-v6e-slice")])]), &["[Q1] metadata.labels[\"kueue.x-k8s.io/queue-name\"]: names queue \"ns/q\" (ClusterQueue \"cq\"), where replicated job \"w\" fits no flavour of google.com/tpu: \"a\" (tpu-v6e-slice 2x4), \"b\" (tpu-v5p-slice 4x4), \"c\" (tpu-v6e-slice no topology label); it needs a slice of 4 hosts with 4 chips per pod: tpu-v6e-slice 4x4, so Kueue would never admit it; submit it to a queue with a flavour of one of those shapes, or add such a flavour to the ClusterQueue; see docs/rules.md, Q1"], &[])]
    #[case::some_misfits_are_a_warning_that_kueue_will_skip_them(Some(vec![flavour("a", &[(ACC, "tpu-v6e-slice"), (TOPO, "2x4")]), flavour("b", &[(ACC, "tpu-v6e-slice"), (TOPO, "4x4")])]), &[], &["metadata.labels[\"kueue.x-k8s.io/queue-name\"]: queue \"ns/q\" (ClusterQueue \"cq\"): replicated job \"w\" fits only \"b\" (tpu-v6e-slice 4x4); Kueue will skip \"a\" (tpu-v6e-slice 2x4) for it"])]
    #[case::a_key_no_flavour_carries_is_not_compared(Some(vec![flavour("t", &[(TOPO, "4x4")])]), &[], &[])]
    #[case::no_topology_label_means_untold(Some(vec![flavour("v6e", &[(ACC, "tpu-v6e-slice")])]), &[], &["metadata.labels[\"kueue.x-k8s.io/queue-name\"]: queue \"ns/q\" (ClusterQueue \"cq\"): its google.com/tpu flavours carry no cloud.google.com/gke-tpu-topology label, so the policy could not check the slice shape; every flavour counts"])]
    #[case::a_cluster_queue_without_the_tpu_resource_never_admits_it(None, &["[Q1] metadata.labels[\"kueue.x-k8s.io/queue-name\"]: names queue \"ns/q\" (ClusterQueue \"cq\"), which has no resource group for google.com/tpu, so Kueue would never admit it; submit it to a queue whose ClusterQueue covers google.com/tpu; see docs/rules.md, Q1"], &[])]
    fn judges_the_flavours(
        #[case] flavours: Option<Vec<Flavour>>,
        #[case] violations: &[&str],
        #[case] warnings: &[&str],
    ) {
        let js = json!({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {
            "suspend": true,
            "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
                "parallelism": 4, "completions": 4,
                "template": {"spec": {"nodeSelector": {ACC: "tpu-v6e-slice"},
                    "containers": [{"name": "c", "resources": {"limits": {"google.com/tpu": 4}}}]}}}}}]}});
        let view = JobSetView::parse(&js, "google.com/tpu").unwrap();
        let settings = Settings::default();
        let queue = Queue {
            namespace: "ns".into(),
            local_queue: "q".into(),
            cluster_queue: "cq".into(),
            flavours,
            multikueue_check: None,
        };
        let got = judge_flavours(&JobSetPlan::new(&view, &settings).unwrap(), &queue);
        let got_violations: Vec<String> = got.violations.iter().map(ToString::to_string).collect();
        assert_eq!(got_violations, violations);
        assert_eq!(got.warnings, warnings);
    }
}
