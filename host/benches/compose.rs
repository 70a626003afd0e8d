//! Composition benchmark, printed as a table: the same work (two calls counting in a library)
//! through a statically composed library, through a library linked by the host (each call into
//! it in a fresh instance of its own), and done inside the tool (monolithic). Run with
//! `cargo bench -p chitin-host --bench compose` after `just build-fixtures` (`just bench` does).
//!
//! Figures are reported, never asserted: the machines are shared and noisy.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chitin_host::engine::EngineOptions;
use chitin_host::policy::Policy;
use chitin_host::{Host, Runtime};

const CALLS: usize = 2000;

fn fixture(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../build/fixtures")
        .join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} missing: run `just build-fixtures`",
        path.display()
    );
    path
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(run());
}

async fn run() {
    let data = tempfile::tempdir().expect("tempdir");
    let services = common::services(data.path());
    for dir in ["rootdir", "libdir"] {
        std::fs::create_dir_all(services.workspace().join(dir)).expect("dir");
    }
    let runtime =
        Runtime::new(&data.path().join("cache"), &EngineOptions::default()).expect("runtime");
    let mut host = Host::new(runtime, Policy::builtin().expect("policy"), services);
    for name in ["test-lib-text", "test-lib-files", "test-composed"] {
        host.load_path(&fixture(name)).await.expect("load");
    }
    let mut rows = Vec::new();
    for (label, tool) in [
        ("monolithic (in the tool)", "own_calls"),
        ("statically composed library", "text_calls"),
        ("host-linked library (own sandbox per call)", "files_calls"),
    ] {
        for _ in 0..50 {
            host.call(tool, "{}").await.result.expect("warm-up");
        }
        let mut samples = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let t = Instant::now();
            host.call(tool, "{}").await.result.expect("call");
            samples.push(t.elapsed());
        }
        rows.push((label, p50(samples)));
    }
    let base = rows[0].1.as_secs_f64();
    println!("\n## A tool call making two library calls (p50 of {CALLS})");
    println!("| variant | p50 | ratio |");
    println!("|---|---|---|");
    for (label, d) in rows {
        println!(
            "| {label} | {:.1} µs | {:.2}× |",
            d.as_secs_f64() * 1e6,
            d.as_secs_f64() / base
        );
    }
}
