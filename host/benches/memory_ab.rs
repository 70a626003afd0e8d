//! Two builds of the memory component compared on one store, their searches taken in turn so a
//! shared VM's slow minutes fall on both alike; every query must give both the same answer.
//!
//! ```text
//! cargo bench -p chitin-host --bench memory_ab -- A.wasm B.wasm [SEARCHES]
//! cargo bench -p chitin-host --bench memory_ab -- A.wasm [SEARCHES]
//! ```
//!
//! The store (10,000 documents as the goals bench fills them, then 20 writes and 20 searches
//! through the first build) is filled once into `$CHITIN_AB_DATA` when that is set and kept
//! there, else into a temporary directory. With one build it only runs the searches: run the
//! executable `cargo bench --no-run` names under `valgrind --tool=callgrind` at two counts over
//! one kept store, and the difference of the totals over the difference of the counts is the
//! instructions of one search, a figure a busy machine does not move. Components must be
//! signed by a key the host trusts (`just build-components` signs its own and writes
//! `build/trusted_keys`).

mod common;
#[path = "common/memory.rs"]
mod memory_load;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chitin_host::engine::EngineOptions;
use chitin_host::policy::Policy;
use chitin_host::{Host, Limits, PolicyLimits, Runtime};

fn main() {
    // `cargo bench` adds `--bench`; the rest are this bench's own.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let searches = args
        .last()
        .and_then(|a| a.parse::<usize>().ok())
        .unwrap_or(400);
    let builds: Vec<PathBuf> = args
        .iter()
        .filter(|a| a.parse::<usize>().is_err())
        .map(PathBuf::from)
        .collect();
    if builds.is_empty() || builds.len() > 2 {
        eprintln!("usage: memory_ab A.wasm [B.wasm] [SEARCHES]");
        std::process::exit(2);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(run(&builds, searches));
}

async fn run(builds: &[PathBuf], searches: usize) {
    let temp = tempfile::tempdir().expect("tempdir");
    let data = std::env::var_os("CHITIN_AB_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| temp.path().to_path_buf());
    let mut hosts = Vec::new();
    for build in builds {
        hosts.push(Arc::new(host(&data, build).await));
    }
    let filled = data.join("memory_ab.filled");
    if !filled.exists() {
        eprintln!(
            "filling {} with {} documents",
            data.display(),
            memory_load::DOCS
        );
        let fill = memory_load::run(hosts[0].clone(), 20, 20).await;
        std::fs::write(&filled, "").expect("mark the store filled");
        eprintln!(
            "filled in {:.1} s; then, through the first build, memory_write p50 {:.0} µs and \
             memory_search p50 {:.0} µs",
            fill.fill.as_secs_f64(),
            p50_us(fill.writes),
            p50_us(fill.searches)
        );
    }
    if searches == 0 {
        return;
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(searches); hosts.len()];
    for i in 0..searches {
        let query = serde_json::json!({"query": format!("w{} w{}", (i * 7) % 300, (i * 13) % 900)})
            .to_string();
        // Alternate which build goes first.
        let order: Vec<usize> = if i % 2 == 0 {
            (0..hosts.len()).collect()
        } else {
            (0..hosts.len()).rev().collect()
        };
        let mut answers = Vec::new();
        for at in order {
            let started = Instant::now();
            let answer = hosts[at].call("memory_search", &query).await.result;
            times[at].push(started.elapsed());
            answers.push(answer.map(|out| out.text).expect("memory_search"));
        }
        assert!(
            answers.windows(2).all(|w| w[0] == w[1]),
            "the builds differ on {query}: {answers:?}"
        );
    }
    let p50s: Vec<f64> = times.into_iter().map(p50_us).collect();
    for (build, p50) in builds.iter().zip(&p50s) {
        println!("{}: memory_search p50 {p50:.0} µs", build.display());
    }
    if let [a, b] = p50s[..] {
        println!(
            "second / first: {:.3} ({searches} searches each, the same answers)",
            b / a
        );
    }
}

async fn host(data: &Path, build: &Path) -> Host {
    let runtime = Runtime::new(&data.join("cache"), &EngineOptions::default()).expect("runtime");
    let mut policy = Policy::builtin().expect("policy");
    policy.limits = PolicyLimits::fixed(Limits::default());
    let mut host = Host::new(runtime, policy, common::services(data));
    host.load_path(build)
        .await
        .expect("load the memory component");
    host
}

fn p50_us(mut samples: Vec<Duration>) -> f64 {
    samples.sort_unstable();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}
