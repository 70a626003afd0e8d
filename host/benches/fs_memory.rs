//! File and memory tool benchmarks, printed as a table: `read_file` of a 1 MiB file through the
//! fs component versus `std::fs::read`; `list_dir`, `glob` and `grep` over a tree of 200 files;
//! `memory_write` latency; `memory_search` over 10,000 stored documents. Run with `cargo bench
//! -p chitin-host --bench fs_memory` after `just build-components` (`just bench-detail` does
//! both).
//!
//! Figures are reported, never asserted: the machines are shared and noisy, and kv writes wait
//! for fsync, whose cost depends on the disk.
//!
//! With `CHITIN_BENCH_READS=N` set, the bench only makes N `read_file` calls of the 1 MiB file
//! (after one more that warms up) and prints only their p50, to stderr: run it under callgrind
//! for N and for 3 N calls, and the difference of the two totals over 2 N is one read's
//! instructions without the start and the compile, the same figure on a busy machine as on a
//! quiet one; or run it in turn with two builds of `fs.wasm` to compare their wall clock
//! (`docs/performance.md`, "How to measure"). `CHITIN_BENCH_READ_LINE` sets the file's line
//! length in bytes (1024 unless set; 10 for text where the JSON escaper stops at every line).

mod common;
#[path = "common/memory.rs"]
mod memory_load;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chitin_host::engine::EngineOptions;
use chitin_host::policy::Policy;
use chitin_host::{Host, Limits, Runtime};
use memory_load::{DOCS, FILL_CONCURRENCY};

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

/// A count from the environment variable `name`, when set.
fn env_count(name: &str) -> Option<usize> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value}: not a count")),
    )
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
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
    let line_bytes = env_count("CHITIN_BENCH_READ_LINE").unwrap_or(1024).max(1);
    let line = format!("{}\n", "x".repeat(line_bytes - 1));
    let content = line.repeat((1 << 20) / line_bytes);
    std::fs::write(&file, &content).expect("1 MiB file");
    let args = r#"{"path": "big.txt"}"#;
    call(&fs, "read_file", args).await;
    if let Some(reads) = env_count("CHITIN_BENCH_READS") {
        let mut times = Vec::with_capacity(reads);
        for _ in 0..reads {
            let t = Instant::now();
            assert!(call(&fs, "read_file", args).await.len() > 1 << 19);
            times.push(t.elapsed());
        }
        if reads > 0 {
            eprintln!("read_file of 1 MiB: p50 {} of {reads}", ms(p50(times)));
        }
        return;
    }
    let mut through = Vec::new();
    let mut direct = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let out = call(&fs, "read_file", args).await;
        through.push(t.elapsed());
        assert!(out.len() > content.len());
        let t = Instant::now();
        let bytes = std::fs::read(&file).expect("read");
        direct.push(t.elapsed());
        assert_eq!(bytes.len(), content.len());
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

    // Smaller files, as an agent mostly reads them: a file's size decides how many reads the
    // component makes (each a blocking-pool round trip) and how much memory it zero-fills.
    println!("\n## read_file by file size (p50 of 300)");
    println!("| file | p50 |");
    println!("|---|---|");
    for size in [200usize, 4 << 10, 16 << 10, 48 << 10, 256 << 10] {
        let name = format!("f{size}.txt");
        let text: String = "abcdefghi\n".repeat(size / 10);
        std::fs::write(fs_data.join("workspace").join(&name), text).expect("file");
        let args = format!(r#"{{"path": "{name}"}}"#);
        call(&fs, "read_file", &args).await;
        let mut times = Vec::new();
        for _ in 0..300 {
            let t = Instant::now();
            call(&fs, "read_file", &args).await;
            times.push(t.elapsed());
        }
        let label = if size < 1024 {
            format!("{size} B")
        } else {
            format!("{} KiB", size >> 10)
        };
        println!("| {label} | {:.1} µs |", p50(times).as_secs_f64() * 1e6);
    }

    // Walks: each entry is a `metadata-hash-at` (wasi-libc's `readdir` wants an inode number)
    // and a `stat-at`; `grep` also opens, stats and reads every file.
    let tree = fs_data.join("workspace/tree");
    for d in 0..10 {
        std::fs::create_dir_all(tree.join(format!("d{d}"))).expect("tree");
        for f in 0..20 {
            let text = format!("{}needle {d} {f}\n", "a line of text\n".repeat(10));
            std::fs::write(tree.join(format!("d{d}/f{f}.txt")), text).expect("tree file");
        }
    }
    println!("\n## walks over 10 directories of 20 files (p50 of 60)");
    println!("| call | p50 |");
    println!("|---|---|");
    for (label, tool, args) in [
        (
            "list_dir of one directory (20 files)",
            "list_dir",
            r#"{"path": "tree/d3"}"#,
        ),
        (
            "list_dir, recursive (210 entries)",
            "list_dir",
            r#"{"path": "tree", "recursive": true}"#,
        ),
        (
            "glob `**/*.txt` (200 matches)",
            "glob",
            r#"{"pattern": "**/*.txt", "path": "tree"}"#,
        ),
        (
            "grep over 200 files (20 matches)",
            "grep",
            r#"{"pattern": "needle 3 ", "path": "tree"}"#,
        ),
    ] {
        call(&fs, tool, args).await;
        let mut times = Vec::new();
        for _ in 0..60 {
            let t = Instant::now();
            call(&fs, tool, args).await;
            times.push(t.elapsed());
        }
        println!("| {label} | {} |", ms(p50(times)));
    }

    // Memory under the default policy: what an operator gets.
    let mem_data = data.path().join("memory");
    let memory = Arc::new(host(&mem_data, Limits::default(), "memory").await);
    let run = memory_load::run(memory, 50, 20).await;
    println!("\n## memory (default policy: 10 MiB memory per call; kv writes fsync'd)");
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| fill: {DOCS} memory_write calls, {FILL_CONCURRENCY} in flight | {:.1} s ({:.0} writes/s) |",
        run.fill.as_secs_f64(),
        DOCS as f64 / run.fill.as_secs_f64()
    );
    println!(
        "| memory_write p50 (one in flight, 40 words) | {} |",
        ms(p50(run.writes))
    );
    println!(
        "| memory_search p50 over {} documents (2-word queries) | {} |",
        DOCS + 50,
        ms(p50(run.searches))
    );
}
