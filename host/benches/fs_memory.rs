//! File and memory tool benchmarks, printed as a table: `read_file` of a 1 MiB file through the
//! fs component versus `std::fs::read`; `memory_write` latency; `memory_search` over 10,000
//! stored documents. Run with `cargo bench -p chitin-host --bench fs_memory` after
//! `just build-components` (`just bench` does both).
//!
//! Figures are reported, never asserted: the machines are shared and noisy, and kv writes wait
//! for fsync, whose cost depends on the disk.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chitin_host::engine::EngineOptions;
use chitin_host::policy::Policy;
use chitin_host::{Host, Limits, Runtime};
use futures::StreamExt;

/// Documents stored before searching.
const DOCS: usize = 10_000;
/// memory_write calls in flight while filling the store.
const FILL_CONCURRENCY: usize = 64;

fn component(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../build/components")
        .join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} missing: run `just build-components`",
        path.display()
    );
    path
}

async fn host(data: &Path, limits: Limits, name: &str) -> Host {
    let runtime = Runtime::new(&data.join("cache"), &EngineOptions::default()).expect("runtime");
    let services = common::services(data);
    let mut policy = Policy::builtin().expect("policy");
    policy.limits = chitin_host::PolicyLimits::fixed(limits);
    let mut host = Host::new(runtime, policy, services);
    host.load_path(&component(name)).await.expect("load");
    host
}

async fn call(host: &Host, tool: &str, args: &str) -> String {
    match host.call(tool, args).await.result {
        Ok(out) => out.text,
        Err(e) => panic!("{tool}: {e}"),
    }
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// A deterministic word stream over a 2,000-word vocabulary (an LCG; no crate needed for this).
struct Words(u64);

impl Words {
    fn next(&mut self) -> String {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // Skewed towards low word numbers, like natural text.
        let r = (self.0 >> 33) % 2000;
        format!("w{}", r * r / 2000)
    }

    fn text(&mut self, words: usize) -> String {
        (0..words)
            .map(|_| self.next())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(run());
}

async fn run() {
    let data = tempfile::tempdir().expect("tempdir");

    // read_file needs room for its 1 MiB result (the default policy hands back 64 KiB).
    let roomy = Limits {
        memory_bytes: 64 * 1024 * 1024,
        output_bytes: 4 * 1024 * 1024,
        ..Limits::default()
    };
    let fs_data = data.path().join("fs");
    let fs = host(&fs_data, roomy, "fs").await;
    let file = fs_data.join("workspace/big.txt");
    let line = format!("{}\n", "x".repeat(1023));
    std::fs::write(&file, line.repeat(1024)).expect("1 MiB file");
    let args = r#"{"path": "big.txt"}"#;
    call(&fs, "read_file", args).await;
    let mut through = Vec::new();
    let mut direct = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let out = call(&fs, "read_file", args).await;
        through.push(t.elapsed());
        assert!(out.len() > 1024 * 1024);
        let t = Instant::now();
        let bytes = std::fs::read(&file).expect("read");
        direct.push(t.elapsed());
        assert_eq!(bytes.len(), 1024 * 1024);
    }
    let (through, direct) = (p50(through), p50(direct));
    println!("\n## read_file of a 1 MiB file (p50 of 30)");
    println!("| path | p50 | ratio |");
    println!("|---|---|---|");
    println!("| std::fs::read | {} | 1× |", ms(direct));
    println!(
        "| read_file through the fs component (call + JSON result) | {} | {:.0}× |",
        ms(through),
        through.as_secs_f64() / direct.as_secs_f64()
    );

    // Memory under the default policy: what an operator gets.
    let mem_data = data.path().join("memory");
    let memory = Arc::new(host(&mem_data, Limits::default(), "memory").await);
    let mut words = Words(7);
    let docs: Vec<String> = (0..DOCS)
        .map(|i| {
            serde_json::json!({
                "content": words.text(40),
                "target": format!("notes/{}/{i}.md", i % 100),
                "append": false,
            })
            .to_string()
        })
        .collect();
    let t = Instant::now();
    futures::stream::iter(docs)
        .map(|args| {
            let memory = memory.clone();
            async move { call(&memory, "memory_write", &args).await }
        })
        .buffer_unordered(FILL_CONCURRENCY)
        .for_each(|_| async {})
        .await;
    let fill = t.elapsed();

    let mut writes = Vec::new();
    for _ in 0..50 {
        let args = serde_json::json!({"content": words.text(40), "target": "daily_log"});
        let t = Instant::now();
        call(&memory, "memory_write", &args.to_string()).await;
        writes.push(t.elapsed());
    }
    let mut searches = Vec::new();
    for _ in 0..20 {
        let args = serde_json::json!({"query": format!("{} {}", words.next(), words.next())});
        let t = Instant::now();
        let out = call(&memory, "memory_search", &args.to_string()).await;
        searches.push(t.elapsed());
        assert!(out.contains("results"));
    }
    println!("\n## memory (default policy: 10 MiB memory per call; kv writes fsync'd)");
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| fill: {DOCS} memory_write calls, {FILL_CONCURRENCY} in flight | {:.1} s ({:.0} writes/s) |",
        fill.as_secs_f64(),
        DOCS as f64 / fill.as_secs_f64()
    );
    println!(
        "| memory_write p50 (one in flight, 40 words) | {} |",
        ms(p50(writes))
    );
    println!(
        "| memory_search p50 over {} documents (2-word queries) | {} |",
        DOCS + 50,
        ms(p50(searches))
    );
}
