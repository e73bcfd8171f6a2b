//! `make cluster-test`: the policy as a webhook of a real kube-apiserver, the pods made by the
//! real JobSet and Job controllers and bound by the real scheduler. One control plane serves
//! every case, in order; a case records its failures and the run goes on, then prints
//! `N passed, N failed`. On a failure the control plane's logs are kept.
mod kueue;
mod preview;

use multislice_cluster::agent::NodeAgent;
use multislice_cluster::fleet::{self, Pool};
use multislice_cluster::policies;
use multislice_cluster::run::{self, Submitted};
use multislice_cluster::{Binaries, ControlPlane, Options};
use multislice_gen::oracle;
use multislice_host::controller;
use multislice_host::env::{get, resolve};
use multislice_host::fixtures::load_yaml;
use multislice_host::preview::yaml_documents;
use multislice_host::workspace_root;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long the pods of one batch of shapes may take to exist and be bound.
const BOUND: Duration = Duration::from_secs(240);

/// The failures of one case, gathered instead of panicking so every case runs.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }
    fn eq<T: PartialEq + std::fmt::Debug>(&mut self, got: T, want: T, what: &str) {
        if got != want {
            self.0.push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }
}

struct Report {
    passed: usize,
    failed: usize,
}

impl Report {
    fn record(&mut self, name: &str, result: anyhow::Result<Failures>) {
        match result {
            Ok(f) if f.0.is_empty() => {
                self.passed += 1;
                println!("ok: {name}");
            }
            Ok(f) => {
                self.failed += 1;
                println!("FAILED: {name}");
                for line in f.0.iter().take(40) {
                    println!("    {line}");
                }
                if f.0.len() > 40 {
                    println!("    … and {} more", f.0.len() - 40);
                }
            }
            Err(e) => {
                self.failed += 1;
                println!("FAILED: {name}: {e:#}");
            }
        }
    }
}

/// One file of objects to run: examples/*.yaml and the fixtures under test_data/.
struct Shape {
    label: String,
    namespace: String,
    objects: Vec<Value>,
}

fn shape(label: &str, path: &std::path::Path, index: usize) -> anyhow::Result<Shape> {
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
    })
}

/// Every shape that must run: each example that states it is accepted, each JobSet fixture,
/// and each opted-in Job fixture that the rules accept.
fn shapes_that_must_run() -> anyhow::Result<Vec<Shape>> {
    let root = workspace_root();
    let mut shapes = Vec::new();
    let mut files: Vec<(String, std::path::PathBuf)> = Vec::new();
    for dir in ["examples", "test_data/jobsets", "test_data/jobs"] {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        entries.sort();
        for path in entries {
            let text = std::fs::read_to_string(&path)?;
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            let runs = match dir {
                "examples" => text.contains("# Expected verdict: accepted"),
                // A JobSet's child is served through its JobSet; the -fail Jobs are refused.
                "test_data/jobs" => !stem.ends_with("-fail") && stem != "jobset-child",
                _ => true,
            };
            if runs {
                files.push((format!("{dir}/{stem}"), path));
            }
        }
    }
    for (i, (label, path)) in files.iter().enumerate() {
        shapes.push(shape(label, path, i)?);
    }
    Ok(shapes)
}

/// The same object's CREATE as the fast tests send it, as each of our policies received it (the
/// mutating ones first, in the order the API server called them): what they received, and the
/// warnings they answered, must reach the user.
fn reviews_of<'a>(reviews: &'a [Value], kind: &str, namespace: &str, name: &str) -> Vec<&'a Value> {
    reviews
        .iter()
        .filter(|r| {
            r["kind"] == kind
                && r["operation"] == "CREATE"
                && r["namespace"] == namespace
                && (r["object"]["metadata"]["name"] == name
                    || r["name"] == name
                    || r["object"]["metadata"]["generateName"]
                        .as_str()
                        .is_some_and(|prefix| name.starts_with(prefix)))
        })
        .collect()
}

/// What ran: each case's failures, and each shape's real pods (by shape label).
type ShapesRun = (
    Vec<(String, anyhow::Result<Failures>)>,
    BTreeMap<String, Vec<Value>>,
);

async fn shapes_run(plane: &ControlPlane) -> anyhow::Result<ShapesRun> {
    let filter = std::env::var("CLUSTER_SHAPES").unwrap_or_default();
    let shapes: Vec<Shape> = shapes_that_must_run()?
        .into_iter()
        .filter(|s| filter.split(',').any(|f| s.label.contains(f)))
        .collect();
    // Each shape's namespace, labelled for the single policy where it rests on a bare queue
    // label; then a moment for the API server's namespace informer to have the labels.
    for s in &shapes {
        let single = s.objects.iter().any(rests_on_bare_label);
        policies::namespace(
            &plane.cluster,
            &s.namespace,
            single.then_some(policies::SINGLE),
        )
        .await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut results = Vec::new();
    let mut by_shape = BTreeMap::new();
    // A few shapes at a time: JobSet's exclusive placement makes each follower pod wait for its
    // leader, and the Job controller backs off; a small batch keeps that short on 2 cores.
    for (b, batch) in shapes.chunks(BATCH).enumerate() {
        let (r, pods) = run_batch(plane, batch, b).await?;
        results.extend(r);
        by_shape.extend(pods);
    }
    Ok((results, by_shape))
}

/// Shapes run together, then removed with their nodes. One at a time: a shape's pods that
/// select no node pool of their own (no exclusive placement) take any node that fits, and
/// would take another shape's.
const BATCH: usize = 1;

async fn run_batch(plane: &ControlPlane, shapes: &[Shape], b: usize) -> anyhow::Result<ShapesRun> {
    // A shape that rests on a bare queue label leaves its slice shape to a queue: the policy
    // limits it to the shapes where it fits (a required node affinity, SPEC §4.7), and its
    // nodes are made for the object as stored, once it is.
    let late = |s: &Shape| s.objects.iter().any(rests_on_bare_label);
    let mut pools: Vec<Pool> = shapes
        .iter()
        .enumerate()
        .filter(|(_, s)| !late(s))
        .flat_map(|(i, s)| fleet::pools_for(&s.objects, &format!("b{b}s{i}-")))
        .collect();
    let mut nodes = fleet::provision(&plane.cluster, &pools).await?;
    let mut submitted: Vec<Vec<(Submitted, u64)>> = Vec::new();
    for (i, s) in shapes.iter().enumerate() {
        let mut with_counts = Vec::new();
        let subs = run::submit(&plane.cluster, &s.objects).await?;
        if late(s) {
            let stored: Vec<Value> = subs
                .iter()
                .filter(|sub| sub.allowed())
                .map(|sub| sub.created.body.clone())
                .collect();
            let more = fleet::pools_for(&stored, &format!("b{b}s{i}-"));
            nodes += fleet::provision(&plane.cluster, &more).await?;
            pools.extend(more);
        }
        for sub in subs {
            let object = s
                .objects
                .iter()
                .find(|o| o["kind"] == json!(sub.kind))
                .cloned()
                .unwrap_or_default();
            let mut n = run::expected_pods(&object);
            if object["spec"]["suspend"] == json!(true) && sub.allowed() {
                // What Kueue does once it admits the JobSet: unsuspend it. Without node
                // selectors that UPDATE is refused by T3 (tested in the Kueue cases), so such a
                // JobSet stays suspended and makes no pods.
                if has_tpu_selectors(&object) {
                    plane
                        .cluster
                        .patch_merge(&sub.created.body, &json!({"spec": {"suspend": false}}))
                        .await?;
                } else {
                    n = 0;
                }
            }
            with_counts.push((sub, n));
        }
        submitted.push(with_counts);
    }
    let flat: Vec<(Submitted, u64)> = submitted.iter().flatten().cloned().collect();
    let started = Instant::now();
    let (complete, pods) = run::wait_bound(&plane.cluster, &flat, BOUND).await?;
    eprintln!(
        "batch {b}: {} shapes, {nodes} nodes, {} pods {} in {:.0} s",
        shapes.len(),
        pods.iter().map(Vec::len).sum::<usize>(),
        if complete {
            "all bound"
        } else {
            "NOT all bound"
        },
        started.elapsed().as_secs_f64()
    );
    let reviews = plane.reviews()?;
    let mut results = Vec::new();
    let mut by_shape = BTreeMap::new();
    let mut k = 0;
    for (shape, subs) in shapes.iter().zip(&submitted) {
        let mut f = Failures::default();
        let mut shape_pods = Vec::new();
        for (sub, expected) in subs {
            let object_pods = &pods[k];
            k += 1;
            let made = Made {
                sub,
                expected: *expected,
                pods: object_pods,
            };
            check_submitted(&mut f, plane, shape, &made, &reviews).await;
            shape_pods.extend(object_pods.iter().cloned());
        }
        results.push((format!("runs for real: {}", shape.label), Ok(f)));
        by_shape.insert(shape.label.clone(), shape_pods);
    }
    for (sub, _) in flat.iter().filter(|(s, _)| s.allowed()) {
        plane.cluster.delete(&object_named(sub)).await?;
    }
    fleet::remove(&plane.cluster, &pools).await?;
    Ok((results, by_shape))
}

/// Whether every TPU replicated job selects its accelerator and topology.
fn has_tpu_selectors(jobset: &Value) -> bool {
    jobset["spec"]["replicatedJobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| oracle::is_tpu(r))
        .all(|r| {
            let selector = &r["template"]["spec"]["template"]["spec"]["nodeSelector"];
            selector["cloud.google.com/gke-tpu-topology"].is_string()
        })
}

/// Real JAX on the env of a JAX JobSet's real pods: one process per JAX process, each pod's
/// DNS name mapped to a loopback address of its own (tests/jax/processes.py).
fn real_jax(label: &str, pods: &[Value], net: u8) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let python = std::env::var("JAX_PYTHON").map_err(|_| {
        anyhow::anyhow!(
            "JAX_PYTHON is not set: `make cluster-test` installs the pinned jax and sets it"
        )
    })?;
    let mut hosts = serde_json::Map::new();
    let mut processes = Vec::new();
    for (i, p) in pods.iter().enumerate() {
        let host = format!(
            "{}.{}",
            p["spec"]["hostname"].as_str().unwrap_or_default(),
            p["spec"]["subdomain"].as_str().unwrap_or_default()
        );
        let address = format!("127.{net}.{}.{}", i / 200, i % 200 + 1);
        hosts.insert(host.clone(), json!(address));
        let tpu = oracle::tpu_container_names(&p["spec"]);
        for c in containers(p) {
            let env: serde_json::Map<String, Value> = resolve(p, &c)?
                .into_iter()
                .map(|(k, v)| (k, json!(v)))
                .collect();
            if !env.contains_key("JAX_PROCESS_ID") {
                continue;
            }
            if !tpu.is_empty() && !tpu.iter().any(|n| c["name"] == json!(n)) {
                continue;
            }
            processes.push(json!({
                "name": format!("{}/{}", p["metadata"]["name"].as_str().unwrap_or_default(), c["name"].as_str().unwrap_or_default()),
                "address": address,
                "env": env,
            }));
            if tpu.is_empty() {
                break;
            }
        }
    }
    let n = processes.len();
    f.check(n > 1, || format!("{label}: {n} JAX processes"));
    let spec =
        json!({"init_seconds": 45, "wall_seconds": 110, "hosts": hosts, "processes": processes});
    let spec_path =
        std::env::temp_dir().join(format!("cluster-jax-{net}-{}.json", std::process::id()));
    std::fs::write(&spec_path, serde_json::to_vec(&spec)?)?;
    let out = std::process::Command::new("timeout")
        .args(["--kill-after=5", "130", &python])
        .arg(workspace_root().join("tests/jax/processes.py"))
        .arg("launch")
        .arg(&spec_path)
        .env("JAX_PLATFORMS", "cpu")
        .output()?;
    let _ = std::fs::remove_file(&spec_path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or(Value::Null);
    let results = summary["results"].as_array().cloned().unwrap_or_default();
    let all: Vec<u64> = (0..n as u64).collect();
    let (mut initialised, mut gathered) = (0, 0);
    for (r, p) in results.iter().zip(&processes) {
        if r["report"]["process_count"] == json!(n) {
            initialised += 1;
        }
        let want: u64 = p["env"]["JAX_PROCESS_ID"]
            .as_str()
            .unwrap_or("")
            .parse()
            .unwrap_or(u64::MAX);
        if r["exit"] == json!(0)
            && r["report"]["process_index"] == json!(want)
            && r["report"]["gathered"] == json!(all)
        {
            gathered += 1;
        } else {
            f.0.push(format!("{label}: {}: {r}", r["name"]));
        }
    }
    eprintln!(
        "real JAX on the real pods of {label}: {} processes started, {initialised} initialised, {gathered} gathered 0..{}",
        results.len(),
        n.saturating_sub(1)
    );
    f.eq(
        results.len(),
        n,
        &format!("{label}: processes that reported"),
    );
    Ok(f)
}

/// One object the case submitted, with the pods it was expected to make and those it made.
struct Made<'a> {
    sub: &'a Submitted,
    expected: u64,
    pods: &'a [Value],
}

async fn check_submitted(
    f: &mut Failures,
    plane: &ControlPlane,
    shape: &Shape,
    made: &Made<'_>,
    reviews: &[Value],
) {
    let Made {
        sub,
        expected,
        pods,
    } = *made;
    let what = format!("{} {}", sub.kind, sub.name);
    f.check(sub.allowed(), || {
        format!("{what}: refused: {:?}", sub.created.message())
    });
    if sub.kind == "Service" {
        return;
    }
    // The warnings our policies answered reach the client as Warning headers.
    let created = reviews_of(reviews, &sub.kind, &shape.namespace, &sub.name);
    if !created.is_empty() {
        check_warnings_reached(f, &what, &created, sub);
    } else if sub.kind == "JobSet" || is_opted_in_job(&sub.created.body) {
        f.0.push(format!("{what}: our webhook never saw its CREATE"));
    }
    f.eq(pods.len() as u64, expected, &format!("{what}: pods"));
    for p in pods {
        f.check(p["spec"]["nodeName"].is_string(), || {
            let why = p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "PodScheduled")
                .and_then(|c| c["message"].as_str())
                .unwrap_or("no scheduling condition yet");
            format!("{what}: pod {} is not bound: {why}", p["metadata"]["name"])
        });
    }
    let template = shape
        .objects
        .iter()
        .find(|o| o["kind"] == json!(sub.kind))
        .cloned()
        .unwrap_or_default();
    match sub.kind.as_str() {
        "JobSet" => {
            let stored = plane
                .cluster
                .get(&sub.created.body)
                .await
                .ok()
                .flatten()
                .unwrap_or(sub.created.body.clone());
            check_jobset_pods(f, &what, &stored, pods);
            check_nothing_lost_jobset(f, &what, &template, pods);
            check_exclusive_placement(f, &what, &stored, pods, &plane.cluster).await;
            if expected > 0 {
                check_simulation(f, &what, &stored, reviews, &shape.namespace);
            }
        }
        "Job" => check_job_pods(f, &what, &sub.created.body, pods),
        _ => {}
    }
}

/// The warnings our policies answered for a CREATE, in the order they were called, are what
/// the client read from the `Warning` headers (the API server sends a text once).
fn check_warnings_reached(f: &mut Failures, what: &str, reviews: &[&Value], sub: &Submitted) {
    let mut answered: Vec<String> = Vec::new();
    for review in reviews {
        let warnings: Vec<String> =
            serde_json::from_value(review["warnings"].clone()).unwrap_or_default();
        for w in warnings {
            if !answered.contains(&w) {
                answered.push(w);
            }
        }
    }
    f.eq(
        &sub.created.warnings,
        &answered,
        &format!("{what}: Warning headers"),
    );
}

fn is_opted_in_job(job: &Value) -> bool {
    job["metadata"]["annotations"]["multislice.kubewarden.io/jax-distributed"] == "true"
}

fn label<'a>(pod: &'a Value, key: &str) -> &'a str {
    pod["metadata"]["labels"][key].as_str().unwrap_or_default()
}

fn containers(pod: &Value) -> Vec<Value> {
    ["containers", "initContainers"]
        .iter()
        .flat_map(|l| pod["spec"][l].as_array().cloned().unwrap_or_default())
        .collect()
}

/// SPEC §4 on every real pod of a JobSet, against the oracle, and the invariants across pods.
fn check_jobset_pods(f: &mut Failures, what: &str, jobset: &Value, pods: &[Value]) {
    let name = jobset["metadata"]["name"].as_str().unwrap_or_default();
    let subdomain = jobset["spec"]["network"]["subdomain"]
        .as_str()
        .unwrap_or(name)
        .to_string();
    let hosts: BTreeSet<String> = pods
        .iter()
        .map(|p| {
            format!(
                "{}.{subdomain}",
                p["spec"]["hostname"].as_str().unwrap_or("")
            )
        })
        .collect();
    let mut slice_ids: BTreeMap<String, BTreeMap<(String, String), BTreeSet<String>>> =
        BTreeMap::new();
    let mut coordinators: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut jax_ids: Vec<(u64, String)> = Vec::new();
    let mut jax_coordinators = BTreeSet::new();
    let mut jax_counts = BTreeSet::new();
    for p in pods {
        let pod_name = p["metadata"]["name"].as_str().unwrap_or_default();
        let rjob = label(p, "jobset.sigs.k8s.io/replicatedjob-name").to_string();
        let job_index: u64 = label(p, "jobset.sigs.k8s.io/job-index")
            .parse()
            .unwrap_or(0);
        let want = oracle::expected(jobset, name, &rjob, job_index);
        for map in ["labels", "annotations"] {
            let m = &p["metadata"][map];
            f.eq(
                m["jobset.sigs.k8s.io/group-name"].clone(),
                json!(want.group),
                &format!("{what}: {pod_name} {map} group-name"),
            );
            f.eq(
                m["jobset.sigs.k8s.io/group-replicas"].clone(),
                json!(want.group_replicas.to_string()),
                &format!("{what}: {pod_name} {map} group-replicas"),
            );
            f.eq(
                m["jobset.sigs.k8s.io/job-group-index"].clone(),
                json!(want.job_group_index.to_string()),
                &format!("{what}: {pod_name} {map} job-group-index"),
            );
        }
        let mut counted = BTreeSet::new();
        for c in containers(p) {
            let env = match resolve(p, &c) {
                Ok(env) => env,
                Err(e) => {
                    f.0.push(format!("{what}: {pod_name}: {e:#}"));
                    continue;
                }
            };
            let cname = c["name"].as_str().unwrap_or_default();
            // A variable the template sets itself is the user's and stays (SPEC §4.5).
            let own = own_env(jobset, &rjob, cname);
            let expect = |f: &mut Failures, var: &str, want: Option<&str>| {
                if !own.contains(var) {
                    f.eq(
                        get(&env, var),
                        want,
                        &format!("{what}: {pod_name}/{cname} {var}"),
                    );
                }
            };
            match (&want.multislice, oracle::is_tpu_container(&c)) {
                (Some((num, id, coordinator)), true) => {
                    expect(f, "MEGASCALE_NUM_SLICES", Some(num.to_string().as_str()));
                    expect(f, "MEGASCALE_SLICE_ID", Some(id.to_string().as_str()));
                    expect(
                        f,
                        "MEGASCALE_COORDINATOR_ADDRESS",
                        Some(coordinator.as_str()),
                    );
                    let k = want.tpu_containers.iter().position(|n| n == cname);
                    let port = (want.tpu_containers.len() >= 2)
                        .then(|| k.map(|k| (8081 + k).to_string()))
                        .flatten();
                    expect(f, "MEGASCALE_PORT", port.as_deref());
                    if let Some(slice) = get(&env, "MEGASCALE_SLICE_ID")
                        .filter(|_| !own.contains("MEGASCALE_SLICE_ID"))
                    {
                        slice_ids
                            .entry(want.group.clone())
                            .or_default()
                            .entry((rjob.clone(), job_index.to_string()))
                            .or_default()
                            .insert(slice.to_string());
                    }
                    if let Some(c) = get(&env, "MEGASCALE_COORDINATOR_ADDRESS")
                        .filter(|_| !own.contains("MEGASCALE_COORDINATOR_ADDRESS"))
                    {
                        coordinators
                            .entry(want.group.clone())
                            .or_default()
                            .insert(c.to_string());
                    }
                }
                _ => {
                    for var in [
                        "MEGASCALE_NUM_SLICES",
                        "MEGASCALE_SLICE_ID",
                        "MEGASCALE_COORDINATOR_ADDRESS",
                    ] {
                        expect(f, var, None);
                    }
                }
            }
            if let Some(id) =
                get(&env, "JAX_PROCESS_ID").filter(|_| is_jax_process(p, &c, &counted))
            {
                counted.insert(pod_name.to_string());
                let host = format!(
                    "{}.{subdomain}",
                    p["spec"]["hostname"].as_str().unwrap_or("")
                );
                jax_ids.push((id.parse().unwrap_or(u64::MAX), host));
                jax_coordinators.insert(
                    get(&env, "JAX_COORDINATOR_ADDRESS")
                        .unwrap_or("")
                        .to_string(),
                );
                jax_counts.insert(get(&env, "JAX_NUM_PROCESSES").unwrap_or("").to_string());
            }
        }
    }
    for (group, jobs) in &slice_ids {
        let ids: Vec<String> = jobs.values().flat_map(|s| s.iter().cloned()).collect();
        f.check(jobs.values().all(|s| s.len() == 1), || {
            format!("{what}: group {group}: pods of one Job disagree on their slice id: {jobs:?}")
        });
        let got: BTreeSet<u64> = ids.iter().filter_map(|s| s.parse().ok()).collect();
        f.eq(
            got,
            (0..jobs.len() as u64).collect(),
            &format!("{what}: group {group}: slice ids"),
        );
        let Some(coordinator) = coordinators.get(group) else {
            continue;
        };
        f.eq(
            coordinator.len(),
            1,
            &format!("{what}: group {group}: coordinators {coordinator:?}"),
        );
        if let Some(c) = coordinator.iter().next() {
            let host = c.strip_suffix(":8081").unwrap_or(c);
            let outside = jobset["spec"]["coordinator"].is_object();
            f.check(hosts.contains(host) || outside, || {
                format!("{what}: group {group}: coordinator {host} is not a pod")
            });
        }
    }
    if !jax_ids.is_empty() {
        jax_ids.sort();
        let ids: Vec<u64> = jax_ids.iter().map(|(i, _)| *i).collect();
        f.eq(
            ids.clone(),
            (0..ids.len() as u64).collect(),
            &format!("{what}: JAX process ids"),
        );
        f.eq(
            jax_counts.len(),
            1,
            &format!("{what}: JAX_NUM_PROCESSES values {jax_counts:?}"),
        );
        f.eq(
            jax_coordinators.len(),
            1,
            &format!("{what}: JAX coordinators {jax_coordinators:?}"),
        );
        if let Some(c) = jax_coordinators.iter().next() {
            let host = c.rsplit_once(':').map(|(h, _)| h).unwrap_or(c);
            f.eq(
                jax_ids[0].1.as_str(),
                host,
                &format!("{what}: process 0 runs on the JAX coordinator"),
            );
        }
    }
}

/// The env names a replicated job's template sets in one of its containers.
fn own_env(jobset: &Value, rjob: &str, container: &str) -> BTreeSet<String> {
    let spec = jobset["spec"]["replicatedJobs"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["name"] == rjob))
        .map(|r| r["template"]["spec"]["template"]["spec"].clone())
        .unwrap_or_default();
    ["containers", "initContainers"]
        .iter()
        .flat_map(|l| spec[l].as_array().cloned().unwrap_or_default())
        .filter(|c| c["name"] == container)
        .flat_map(|c| c["env"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["name"].as_str().map(str::to_string))
        .collect()
}

/// Whether a container is a JAX process of its pod: each TPU container of a TPU pod, else the
/// pod's first container that carries the JAX env (`counted` holds the pods already counted).
fn is_jax_process(pod: &Value, c: &Value, counted: &BTreeSet<String>) -> bool {
    let tpu = oracle::tpu_container_names(&pod["spec"]);
    if tpu.is_empty() {
        !counted.contains(pod["metadata"]["name"].as_str().unwrap_or_default())
    } else {
        tpu.iter().any(|n| c["name"] == json!(n))
    }
}

/// SPEC §4.6 on a plain Job's real pods: process ids 0..N-1, one coordinator, process 0 on it.
fn check_job_pods(f: &mut Failures, what: &str, job: &Value, pods: &[Value]) {
    if !is_opted_in_job(job) {
        for p in pods {
            for c in containers(p) {
                let env = resolve(p, &c).unwrap_or_default();
                f.eq(
                    get(&env, "JAX_PROCESS_ID"),
                    None,
                    &format!("{what}: not opted in"),
                );
            }
        }
        return;
    }
    let subdomain = job["spec"]["template"]["spec"]["subdomain"]
        .as_str()
        .unwrap_or_default();
    let mut ids = Vec::new();
    let mut coordinators = BTreeSet::new();
    for p in pods {
        let host = format!(
            "{}.{subdomain}",
            p["spec"]["hostname"].as_str().unwrap_or("")
        );
        let mut counted = BTreeSet::new();
        for c in containers(p) {
            let env = resolve(p, &c).unwrap_or_default();
            if let Some(id) =
                get(&env, "JAX_PROCESS_ID").filter(|_| is_jax_process(p, &c, &counted))
            {
                counted.insert(
                    p["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
                ids.push((id.parse::<u64>().unwrap_or(u64::MAX), host.clone()));
                coordinators.insert(
                    get(&env, "JAX_COORDINATOR_ADDRESS")
                        .unwrap_or("")
                        .to_string(),
                );
            }
        }
    }
    ids.sort();
    let only: Vec<u64> = ids.iter().map(|(i, _)| *i).collect();
    f.eq(
        only.clone(),
        (0..only.len() as u64).collect(),
        &format!("{what}: JAX process ids"),
    );
    f.check(!only.is_empty(), || format!("{what}: no pod got JAX env"));
    f.eq(
        coordinators.len(),
        1,
        &format!("{what}: coordinators {coordinators:?}"),
    );
    if let (Some(c), Some((_, host0))) = (coordinators.iter().next(), ids.first()) {
        let host = c.rsplit_once(':').map(|(h, _)| h).unwrap_or(c);
        f.eq(
            host0.as_str(),
            host,
            &format!("{what}: process 0 runs on the coordinator"),
        );
    }
}

/// Nothing of the template is lost: every field the user wrote is in every pod, quantities
/// compared by value (the API server writes `4000m` as `4`).
fn check_nothing_lost_jobset(f: &mut Failures, what: &str, jobset: &Value, pods: &[Value]) {
    for p in pods {
        let rjob = label(p, "jobset.sigs.k8s.io/replicatedjob-name");
        let Some(r) = jobset["spec"]["replicatedJobs"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["name"] == rjob))
        else {
            f.0.push(format!("{what}: pod of unknown replicated job {rjob}"));
            continue;
        };
        let template = &r["template"]["spec"]["template"];
        let mut missing = Vec::new();
        subset(&template["spec"], &p["spec"], "spec", &mut missing);
        subset(
            &template["metadata"]["labels"],
            &p["metadata"]["labels"],
            "labels",
            &mut missing,
        );
        subset(
            &template["metadata"]["annotations"],
            &p["metadata"]["annotations"],
            "annotations",
            &mut missing,
        );
        f.check(missing.is_empty(), || {
            format!("{what}: {} lost {missing:?}", p["metadata"]["name"])
        });
    }
}

/// Every leaf of `want` is in `got`; list entries are matched by `name` when they have one.
fn subset(want: &Value, got: &Value, path: &str, missing: &mut Vec<String>) {
    match (want, got) {
        (Value::Null, _) => {}
        (Value::Object(w), Value::Object(g)) => {
            for (k, v) in w {
                subset(
                    v,
                    g.get(k).unwrap_or(&Value::Null),
                    &format!("{path}.{k}"),
                    missing,
                );
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            for (i, v) in w.iter().enumerate() {
                let other = match v.get("name") {
                    Some(n) => g.iter().find(|x| x.get("name") == Some(n)),
                    None => g.get(i),
                };
                match other {
                    Some(o) => subset(v, o, &format!("{path}[{i}]"), missing),
                    None => missing.push(format!("{path}[{i}]")),
                }
            }
        }
        // The API server drops empty strings (omitempty), as it does `serviceAccountName: ""`.
        (Value::String(w), Value::Null) if w.is_empty() => {}
        (w, g) if same_value(w, g) => {}
        (w, g) => missing.push(format!("{path}: {w} became {g}")),
    }
}

fn same_value(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match (text(a), text(b)) {
        (Some(x), Some(y)) => {
            let milli = |s: &str| fleet::quantity(s, true);
            x == y || (milli(&x) == milli(&y) && milli(&x) != 0)
        }
        _ => false,
    }
}

/// Under exclusive placement by a node label, each Job's pods share one value of it and no two
/// Jobs share one.
async fn check_exclusive_placement(
    f: &mut Failures,
    what: &str,
    jobset: &Value,
    pods: &[Value],
    cluster: &multislice_cluster::Cluster,
) {
    let Some(key) =
        jobset["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"].as_str()
    else {
        return;
    };
    let nodes = fleet::nodes_by_name(cluster).await.unwrap_or_default();
    let mut domains: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in pods {
        let node = p["spec"]["nodeName"].as_str().unwrap_or_default();
        let domain = nodes
            .get(node)
            .and_then(|n| n["metadata"]["labels"][key].as_str())
            .unwrap_or("?")
            .to_string();
        let job = format!(
            "{}-{}",
            label(p, "jobset.sigs.k8s.io/replicatedjob-name"),
            label(p, "jobset.sigs.k8s.io/job-index")
        );
        domains.entry(job).or_default().insert(domain);
    }
    let mut seen = BTreeSet::new();
    for (job, d) in &domains {
        f.eq(
            d.len(),
            1,
            &format!("{what}: Job {job} spans {key} values {d:?}"),
        );
        for v in d {
            f.check(seen.insert(v.clone()), || {
                format!("{what}: {key}={v} holds two Jobs")
            });
        }
    }
}

/// The pods the host crate's simulation builds from the stored JobSet carry what the real
/// controllers sent our webhook: labels, annotations, hostname and subdomain, up to names and
/// uids the API server generates.
fn check_simulation(
    f: &mut Failures,
    what: &str,
    jobset: &Value,
    reviews: &[Value],
    namespace: &str,
) {
    let name = jobset["metadata"]["name"].as_str().unwrap_or_default();
    let real: BTreeMap<String, &Value> = reviews
        .iter()
        .filter(|r| r["kind"] == "Pod" && r["operation"] == "CREATE" && r["namespace"] == namespace)
        .filter(|r| r["object"]["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == name)
        .map(|r| {
            (
                r["object"]["spec"]["hostname"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                &r["object"],
            )
        })
        .collect();
    let sims = match controller::jobset_pods(jobset) {
        Ok(s) => s,
        Err(e) => {
            f.0.push(format!("{what}: simulation: {e:#}"));
            return;
        }
    };
    f.eq(
        sims.iter()
            .map(|s| s.hostname.clone())
            .collect::<BTreeSet<_>>(),
        real.keys().cloned().collect(),
        &format!("{what}: simulated hostnames"),
    );
    for sim in &sims {
        let Some(pod) = real.get(&sim.hostname) else {
            continue;
        };
        for map in ["labels", "annotations"] {
            let s = comparable(&sim.object["metadata"][map]);
            let r = comparable(&pod["metadata"][map]);
            let differ: Vec<String> = s
                .keys()
                .chain(r.keys())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .filter(|k| s.get(*k) != r.get(*k))
                .map(|k| format!("{k}: simulated {:?}, real {:?}", s.get(k), r.get(k)))
                .collect();
            f.check(differ.is_empty(), || {
                format!("{what}: {} {map}: {differ:?}", sim.hostname)
            });
        }
        for field in ["hostname", "subdomain"] {
            f.eq(
                sim.object["spec"][field].clone(),
                pod["spec"][field].clone(),
                &format!("{what}: {} spec.{field}: simulated vs real", sim.hostname),
            );
        }
    }
}

/// A label or annotation map without what only the API server knows (uids).
fn comparable(map: &Value) -> BTreeMap<String, String> {
    map.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !k.ends_with("controller-uid") && !k.ends_with("jobset-uid"))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}

/// Whether an object's verdict rests on a queue label that no Kueue acts on here: it carries
/// one, is not suspended, and a TPU replicated job leaves T3's selection to a flavour. The
/// single policy (role `both`) takes the label for Kueue's suspend to come; the pair judges
/// the object as stored, unsuspended (the bare-label case). Without Kueue on this control
/// plane, such an object runs, and the rule table (role `both`) judges it, in a namespace of
/// the single policy.
fn rests_on_bare_label(object: &Value) -> bool {
    let queued = ["labels", "annotations"]
        .iter()
        .any(|m| object["metadata"][m]["kueue.x-k8s.io/queue-name"].is_string());
    queued
        && object["spec"]["suspend"] != json!(true)
        && object["spec"]["replicatedJobs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| oracle::is_tpu(r))
            .any(|r| {
                let pod = &r["template"]["spec"]["template"];
                let selector = &pod["spec"]["nodeSelector"];
                !(selector["cloud.google.com/gke-tpu-accelerator"].is_string()
                    && (selector["cloud.google.com/gke-tpu-topology"].is_string()
                        || pod["metadata"]["annotations"]
                            ["cloud.google.com/gke-tpu-slice-topology"]
                            .is_string()))
            })
}

/// Every rule fixture that must fail is refused by the API server with our exact message,
/// from the webhook that gives the verdicts: the pair's validating one, or the single policy
/// for a fixture that rests on a bare queue label. Validating webhooks are called in parallel
/// and the API server answers with the first refusal to arrive, so where JobSet's own
/// validation (`vjobset.kb.io`) refuses the object too, its message may come first: then our
/// verdict is read from the review log.
async fn rejections(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let expected = load_yaml(&workspace_root().join("test_data/rules/expected.yaml"))?;
    let single = plane
        .webhook_of(policies::SINGLE_MANIFEST)
        .unwrap_or_default()
        .to_string();
    let mut tried = 0;
    let mut by_jobset = Vec::new();
    for (name, want) in expected.as_object().into_iter().flatten() {
        let Some(message) = want["message"].as_str() else {
            continue;
        };
        if !want["settings"].is_null() {
            continue; // this control plane runs the manifest's settings
        }
        let mut object = load_yaml(&workspace_root().join(format!("test_data/rules/{name}.yaml")))?;
        let (namespace, webhook) = if rests_on_bare_label(&object) {
            (RULES_SINGLE, single.as_str())
        } else {
            (RULES, plane.webhook_name.as_str())
        };
        object["metadata"]["namespace"] = json!(namespace);
        let created = plane.cluster.create(&object, false).await?;
        tried += 1;
        let got = created.message().unwrap_or_default().to_string();
        let ours = format!("admission webhook \"{webhook}\" denied the request: {message}");
        if got.starts_with("admission webhook \"vjobset.kb.io\" denied the request: ") {
            by_jobset.push(name.clone());
            let reviews = plane.reviews()?;
            let kind = object["kind"].as_str().unwrap_or_default();
            let object_name = object["metadata"]["name"].as_str().unwrap_or_default();
            let policy = webhook
                .strip_suffix(".kubewarden.admission")
                .unwrap_or(webhook);
            let verdicts: Vec<(&Value, &Value)> =
                reviews_of(&reviews, kind, namespace, object_name)
                    .into_iter()
                    .filter(|r| r["policy"] == policy)
                    .map(|r| (&r["allowed"], &r["message"]))
                    .collect();
            f.eq(
                verdicts,
                vec![(&json!(false), &json!(message))],
                &format!("{name}: our verdict (JobSet's own validation answered first: {got:?})"),
            );
        } else {
            f.eq(created.status, 400, &format!("{name}: status"));
            f.eq(got, ours, &format!("{name}: message"));
        }
    }
    eprintln!(
        "{tried} rule fixtures refused through the API server; JobSet's own validation answered first for {by_jobset:?}"
    );
    f.check(tried > 0, || "no rule fixture tried".to_string());
    Ok(f)
}

/// The rule fixtures' namespaces: the pair's, and the single policy's.
const RULES: &str = "rules";
const RULES_SINGLE: &str = "rules-single";

/// Where the bare-label case submits: a namespace of the pair, and one of the single policy.
const BARE_PAIR: &str = "bare-pair";
const BARE_SINGLE: &str = "bare-single";
/// T3 on JobSet's own v6e example, which selects neither an accelerator nor a topology.
const V6E_T3: &str = concat!(
    "[T3] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector: does not select cloud.google.com/gke-tpu-accelerator, so the pods may land on any TPU node; add cloud.google.com/gke-tpu-accelerator (for example \"tpu-v5p-slice\") to the nodeSelector, or a required node affinity with one In value\n",
    "[T3] spec.replicatedJobs[0].template.spec.template.spec.nodeSelector: does not select cloud.google.com/gke-tpu-topology, so the pods may land on any TPU node; add cloud.google.com/gke-tpu-topology (for example \"2x2x4\") to the nodeSelector, or a required node affinity with one In value",
);

/// A queue label that no Kueue acts on (this control plane has none): JobSet's own v6e example,
/// with its label, not suspended, and no topology selector. The pair judges the object as it
/// will be stored, not suspended, so T3 refuses it at CREATE; the single policy (role `both`)
/// takes the label for Kueue's suspend to come, and accepts it.
async fn bare_label(plane: &ControlPlane) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    let file = workspace_root().join("test_data/jobsets/jobset-v6e-example.yaml");
    let mut outcomes = Vec::new();
    for namespace in [BARE_PAIR, BARE_SINGLE] {
        let mut object = shape("bare", &file, 0)?.objects.remove(0);
        object["metadata"]["namespace"] = json!(namespace);
        object["metadata"]["name"] = json!("v6e-bare");
        let sub = run::submit(&plane.cluster, &[object]).await?.remove(0);
        let message = sub.created.message().unwrap_or_default().to_string();
        outcomes.push(format!("{namespace}: {} {message}", sub.created.status));
        if namespace == BARE_PAIR {
            f.eq(sub.created.status, 400, "the pair: status");
            f.eq(
                message,
                format!(
                    "admission webhook \"{}\" denied the request: {V6E_T3}",
                    plane.webhook_name
                ),
                "the pair: message",
            );
        } else {
            f.check(sub.allowed(), || {
                format!("the single policy: refused: {message:?}")
            });
            let reviews = plane.reviews()?;
            let verdicts: Vec<(&Value, &Value)> =
                reviews_of(&reviews, "JobSet", namespace, "v6e-bare")
                    .iter()
                    .map(|r| (&r["policy"], &r["allowed"]))
                    .collect();
            f.eq(
                verdicts,
                vec![(&json!("clusterwide-jobset-multislice"), &json!(true))],
                "the single policy: our verdicts at CREATE",
            );
        }
        if sub.allowed() {
            plane.cluster.delete(&object_named(&sub)).await?;
        }
    }
    eprintln!("bare queue label, no Kueue: {outcomes:?}");
    Ok(f)
}

/// A TPU node pool of `nodes` v5e hosts (4 chips each) claiming `topology`.
fn v5e_pool(name: &str, topology: &str, nodes: usize) -> Pool {
    Pool {
        name: name.to_string(),
        nodes,
        labels: [
            (
                "cloud.google.com/gke-tpu-accelerator",
                "tpu-v5-lite-podslice",
            ),
            ("cloud.google.com/gke-tpu-topology", topology),
            (fleet::NODEPOOL, name),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        tpu: 4,
        gpu: 0,
        cpu_milli: 0,
        memory: 0,
        cordoned: false,
    }
}

/// What each rule saves a user from: the JobSet it rejects, applied where our webhook does not
/// run (the `kubewarden` namespace, which Kubewarden keeps out of every policy), on a fleet
/// chosen so that the outcome is certain. Every other node is cordoned first.
async fn unprotected_runs(
    plane: &ControlPlane,
) -> anyhow::Result<Vec<(String, anyhow::Result<Failures>)>> {
    for node in plane.cluster.list("v1", "Node", None, None).await? {
        plane
            .cluster
            .patch_merge(&node, &json!({"spec": {"unschedulable": true}}))
            .await?;
    }
    let cases: Vec<(&str, Vec<Pool>)> = vec![
        // No topology selector: one slice of 2 hosts lands on a 4x4 pool of 4.
        (
            "t3-fail",
            vec![v5e_pool("u-t3-a", "4x4", 4), v5e_pool("u-t3-b", "2x4", 2)],
        ),
        // parallelism 2 on 4x4 slices of 4 hosts: half of every pool idles.
        (
            "t4-fail",
            vec![v5e_pool("u-t4-a", "4x4", 4), v5e_pool("u-t4-b", "4x4", 4)],
        ),
        // No exclusive placement: 4 pods on pools of 3 and 1 hosts, so a slice spans both.
        (
            "x1-fail",
            vec![v5e_pool("u-x1-a", "2x4", 3), v5e_pool("u-x1-b", "2x4", 1)],
        ),
        // The pinned pool holds one slice; the other three can never be placed.
        (
            "x4-fail",
            vec![
                v5e_pool("tpu-pool-1", "2x4", 2),
                v5e_pool("u-x4-b", "2x4", 2),
                v5e_pool("u-x4-c", "2x4", 2),
                v5e_pool("u-x4-d", "2x4", 2),
            ],
        ),
    ];
    let mut out = Vec::new();
    for (rule, pools) in cases {
        let result = unprotected_run(plane, rule, &pools).await;
        out.push((
            format!("without the policy, {rule}'s JobSet goes wrong"),
            result,
        ));
        fleet::remove(&plane.cluster, &pools).await?;
    }
    Ok(out)
}

async fn unprotected_run(
    plane: &ControlPlane,
    rule: &str,
    pools: &[Pool],
) -> anyhow::Result<Failures> {
    let mut f = Failures::default();
    fleet::provision(&plane.cluster, pools).await?;
    let mut object = load_yaml(&workspace_root().join(format!("test_data/rules/{rule}.yaml")))?;
    object["metadata"]["namespace"] = json!(policies::KUBEWARDEN_NAMESPACE);
    object["metadata"]["name"] = json!(format!("unprotected-{rule}"));
    let sub = run::submit(&plane.cluster, &[object.clone()])
        .await?
        .remove(0);
    f.check(sub.allowed(), || {
        format!(
            "{rule}: refused without our webhook: {:?}",
            sub.created.message()
        )
    });
    let expect_bound = match rule {
        "x4-fail" => 2,
        _ => 4,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let pods = loop {
        let pods = run::pods_of(&plane.cluster, &sub).await?;
        let bound = pods
            .iter()
            .filter(|p| p["spec"]["nodeName"].is_string())
            .count();
        if bound >= expect_bound || Instant::now() > deadline {
            // Give the scheduler time to bind what it ever will.
            tokio::time::sleep(Duration::from_secs(5)).await;
            break run::pods_of(&plane.cluster, &sub).await?;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let pool_of = |p: &Value| -> Option<String> {
        let node = p["spec"]["nodeName"].as_str()?;
        pools
            .iter()
            .find(|pool| node.starts_with(&format!("{}-", pool.name)))
            .map(|pool| pool.name.clone())
    };
    let bound: Vec<&Value> = pods
        .iter()
        .filter(|p| p["spec"]["nodeName"].is_string())
        .collect();
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    let mut job_pools: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &bound {
        let pool = pool_of(p).unwrap_or_default();
        *used.entry(pool.clone()).or_default() += 1;
        job_pools
            .entry(label(p, "jobset.sigs.k8s.io/job-index").to_string())
            .or_default()
            .insert(pool);
    }
    let idle: usize = pools
        .iter()
        .map(|p| p.nodes - used.get(&p.name).copied().unwrap_or(0))
        .sum();
    let unschedulable = pods
        .iter()
        .filter(|p| {
            p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "PodScheduled" && c["reason"] == "Unschedulable")
        })
        .count();
    eprintln!(
        "unprotected {rule}: {} pods, {} bound, {unschedulable} unschedulable, {idle} hosts idle, pools used {used:?}, Jobs' pools {job_pools:?}",
        pods.len(),
        bound.len()
    );
    match rule {
        "t3-fail" => {
            // One slice sits on the 4x4 pool: 2 of its 4 hosts idle, a topology its 2 hosts
            // are not.
            f.eq(bound.len(), 4, "t3: pods bound");
            f.eq(
                used.get("u-t3-a").copied(),
                Some(2),
                "t3: pods on the 4x4 pool",
            );
            f.eq(idle, 2, "t3: hosts left idle");
        }
        "t4-fail" => {
            f.eq(bound.len(), 4, "t4: pods bound");
            f.eq(idle, 4, "t4: hosts left idle (half of each 4x4 slice)");
        }
        "x1-fail" => {
            f.eq(bound.len(), 4, "x1: pods bound");
            let split = job_pools.values().filter(|p| p.len() > 1).count();
            f.check(split >= 1, || {
                format!("x1: no slice spans two node pools: {job_pools:?}")
            });
        }
        "x4-fail" => {
            f.eq(bound.len(), 2, "x4: pods bound");
            f.eq(
                used.get("tpu-pool-1").copied(),
                Some(2),
                "x4: the pinned pool holds one slice",
            );
            f.check(unschedulable >= 3, || format!("x4: {unschedulable} pods reported Unschedulable, want the 3 other slices' leaders"));
            f.eq(idle, 6, "x4: hosts left idle");
        }
        _ => {}
    }
    plane.cluster.delete(&object_named(&sub)).await?;
    Ok(f)
}

fn object_named(sub: &Submitted) -> Value {
    json!({
        "apiVersion": sub.created.body["apiVersion"], "kind": sub.kind,
        "metadata": {"name": sub.name, "namespace": sub.namespace},
    })
}

/// Which parts run: `CLUSTER_PARTS=shapes,rules,unprotected,kueue` (all by default; `kueue`
/// includes cluster-preview with Kueue), to narrow a run when debugging.
fn part(name: &str) -> bool {
    std::env::var("CLUSTER_PARTS").map_or(true, |parts| parts.split(',').any(|p| p == name))
}

async fn main_async() -> anyhow::Result<bool> {
    let binaries = Binaries::build()?;
    let mut report = Report {
        passed: 0,
        failed: 0,
    };
    if part("shapes") || part("rules") || part("unprotected") {
        plain_cases(&binaries, &mut report).await?;
    }
    if part("kueue") {
        if let Err(e) = kueue::cases(&binaries, &mut report).await {
            report.record("the Kueue cases", Err(e));
        }
        // cluster-preview starts a control plane of its own, after the others have stopped.
        preview::cases(&mut report);
    }
    println!("{} passed, {} failed", report.passed, report.failed);
    Ok(report.failed == 0)
}

/// The cases on a control plane without Kueue.
async fn plain_cases(binaries: &Binaries, report: &mut Report) -> anyhow::Result<()> {
    let mut plane = ControlPlane::start(binaries, Options::default()).await?;
    let _agent = NodeAgent::start(plane.cluster.clone(), plane.remaining());
    // Labelled long before their case submits, so the API server's namespace informer has the
    // label by then.
    for (namespace, deployment) in [
        (BARE_PAIR, None),
        (BARE_SINGLE, Some(policies::SINGLE)),
        (RULES, None),
        (RULES_SINGLE, Some(policies::SINGLE)),
    ] {
        policies::namespace(&plane.cluster, namespace, deployment).await?;
    }
    let before = report.failed;
    if part("shapes") {
        match shapes_run(&plane).await {
            Ok((results, pods)) => {
                for (name, r) in results {
                    report.record(&name, r);
                }
                for (i, label) in [
                    "test_data/jobsets/jax-cpu-coordinator-last",
                    "examples/jax-gpu",
                ]
                .iter()
                .enumerate()
                {
                    // Only where the shape ran (CLUSTER_SHAPES narrows the run when debugging).
                    let Some(shape_pods) = pods.get(*label).cloned() else {
                        continue;
                    };
                    report.record(
                        &format!("real JAX initializes on the real pods of {label}"),
                        real_jax(label, &shape_pods, 40 + i as u8),
                    );
                }
            }
            Err(e) => report.record("shapes that must run", Err(e)),
        }
    }
    if part("rules") {
        report.record(
            "rule fixtures are refused with our message",
            rejections(&plane).await,
        );
        report.record(
            "a bare queue label defers nothing: the pair refuses by T3 at CREATE, the single policy accepts",
            bare_label(&plane).await,
        );
    }
    if part("unprotected") {
        match unprotected_runs(&plane).await {
            Ok(results) => {
                for (name, r) in results {
                    report.record(&name, r);
                }
            }
            Err(e) => report.record("unprotected runs", Err(e)),
        }
    }
    if let Err(e) = plane.check_alive() {
        report.record("the control plane stayed up", Err(e));
    }
    if report.failed > before {
        plane.keep_logs();
    }
    Ok(())
}

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(main_async()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            println!("FAILED: the control plane: {e:#}");
            println!("0 passed, 1 failed");
            ExitCode::FAILURE
        }
    }
}
