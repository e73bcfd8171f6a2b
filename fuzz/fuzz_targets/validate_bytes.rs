//! Raw bytes into the `validate` entry point: any input gives a verdict, never a panic.
#![no_main]
use jobset_multislice_policy::admission::evaluate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let verdict = evaluate(data);
    // The response must always serialize, as the guest sends it to the host.
    let _ = serde_json::to_vec(&verdict.to_response()).expect("response serializes");
});
