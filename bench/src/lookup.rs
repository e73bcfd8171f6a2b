//! The cost of the queue check's lookups (issue 28): the same request with the check off and
//! on, the lookups answered at once by a recorded session (kwctl's format, rewound before each
//! call), on a reused instance, rounds interleaved. What remains is the policy's side of a
//! lookup (the host calls through waPC, and reading the answers); a real policy-server adds
//! the API server's round trip, or its 5 s cache.
use crate::{micros, per_call_pair, Timing};
use anyhow::{bail, Context, Result};
use multislice_host::capabilities::{allowed_by_file, Capabilities};
use multislice_host::session::Session;
use multislice_host::{workspace_root, Instance, Policy};
use serde_json::{json, Value};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;

/// One request judged with the check off and on.
pub(crate) struct LookupCase {
    pub(crate) name: &'static str,
    /// The AdmissionRequest.
    pub(crate) request: Value,
    /// The settings without the check, and with it.
    pub(crate) off: Value,
    pub(crate) on: Value,
    /// The session that answers every lookup of one call with `on`, in order.
    pub(crate) session: PathBuf,
}

/// The queued v6e JobSet of test_data/queue, judged by the validating half: its queue with one
/// flavour (three lookups) and with two (four).
pub(crate) fn cases() -> Result<Vec<LookupCase>> {
    let root = workspace_root();
    let request =
        multislice_host::fixtures::load_json(&multislice_host::fixtures::queue_request_path())?;
    let settings = |check: &str| json!({"role": "validate", "queueCheck": check});
    Ok([
        ("queued JobSet CREATE, 1 flavour", "only-2x4"),
        ("queued JobSet CREATE, 2 flavours", "2x4-and-4x4"),
    ]
    .into_iter()
    .map(|(name, session)| LookupCase {
        name,
        request: request.clone(),
        off: settings("off"),
        on: settings("warn"),
        session: root
            .join("test_data/queue")
            .join(format!("{session}.session.yml")),
    })
    .collect())
}

/// The table: time per call without and with the lookups, and per lookup.
pub(crate) fn section(policy: &Policy, timing: &Timing, cases: &[LookupCase]) -> Result<()> {
    println!("| case | check off µs | check on µs | lookups | µs per lookup |");
    println!("|---|---|---|---|---|");
    // What policy-server grants the example ClusterAdmissionPolicy; kwctl's
    // `--allow-context-aware`.
    let allowed = allowed_by_file(&workspace_root().join("policy-metadata.yml"))?;
    for case in cases {
        let session = Arc::new(Session::load(&case.session)?);
        let lookups = session.remaining();
        let off = policy.instance()?;
        let on = policy
            .with_capabilities(Capabilities::kubernetes(session.clone(), allowed.clone()))
            .instance()?;
        let payload_off = payload(&case.request, &case.off)?;
        let payload_on = payload(&case.request, &case.on)?;
        // Once by hand: the session must be used up exactly, or the figure measures another path.
        call(&on, &payload_on).with_context(|| case.name)?;
        if session.remaining() != 0 {
            bail!(
                "{}: {} of {lookups} recorded answers left unread",
                case.name,
                session.remaining()
            );
        }
        let (a, b) = per_call_pair(
            timing,
            || {
                black_box(call(&off, &payload_off).expect("policy call"));
            },
            || {
                session.rewind();
                black_box(call(&on, &payload_on).expect("policy call"));
            },
        );
        let per_lookup = if lookups == 0 {
            "-".to_string()
        } else {
            format!(
                "{:.1}",
                (b.as_secs_f64() - a.as_secs_f64()) * 1e6 / lookups as f64
            )
        };
        println!(
            "| {} | {} | {} | {lookups} | {per_lookup} |",
            case.name,
            micros(a),
            micros(b)
        );
    }
    Ok(())
}

fn payload(request: &Value, settings: &Value) -> Result<Vec<u8>> {
    Ok(serde_json::to_vec(
        &json!({"request": request, "settings": settings}),
    )?)
}

fn call(instance: &Instance, payload: &[u8]) -> Result<Vec<u8>> {
    instance.call("validate", payload)
}
