//! wasi-run: runs a wasm32-wasip1 command module (a test binary) in wasmtime, for
//! `cargo test --target wasm32-wasip1` (CARGO_TARGET_WASM32_WASIP1_RUNNER).
//!
//! usage: wasi-run MODULE.wasm [ARGS...]
use anyhow::{anyhow, Context, Result};
use wasmtime::{Engine, Linker, Module, Store};
use wasmtime_wasi::p1::{self, WasiP1Ctx};
use wasmtime_wasi::{I32Exit, WasiCtxBuilder};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let module_path = args
        .first()
        .context("usage: wasi-run MODULE.wasm [ARGS...]")?;
    let wasm_error = |e: wasmtime::Error| anyhow!("{e:?}");
    let engine = Engine::default();
    let module = Module::from_file(&engine, module_path).map_err(wasm_error)?;
    let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
    p1::add_to_linker_sync(&mut linker, |ctx| ctx).map_err(wasm_error)?;
    // The policy's test binary links the waPC imports of its entry points; tests never call
    // them, so they trap if ever reached.
    linker
        .define_unknown_imports_as_traps(&module)
        .map_err(wasm_error)?;
    let wasi = WasiCtxBuilder::new()
        .inherit_stdio()
        .inherit_env()
        .args(&args)
        .build_p1();
    let mut store = Store::new(&engine, wasi);
    let instance = linker
        .instantiate(&mut store, &module)
        .map_err(wasm_error)?;
    let start = instance
        .get_typed_func::<(), ()>(&mut store, "_start")
        .map_err(wasm_error)?;
    match start.call(&mut store, ()) {
        Ok(()) => Ok(()),
        Err(e) => match e.downcast_ref::<I32Exit>() {
            Some(exit) => std::process::exit(exit.0),
            None => Err(anyhow!("the module trapped: {e:?}")),
        },
    }
}
