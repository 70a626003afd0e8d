//! The memory benchmark `goals` and `fs_memory` share: a store of 10,000 documents filled by
//! concurrent `memory_write` calls, then `memory_write` and `memory_search` timed one call at a
//! time, under the policy the host was built with.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chitin_host::Host;
use futures::StreamExt;

/// Documents stored before searching.
pub const DOCS: usize = 10_000;
/// memory_write calls in flight while filling the store.
pub const FILL_CONCURRENCY: usize = 64;

/// What one run measured.
pub struct MemoryRun {
    /// Filling the store.
    pub fill: Duration,
    /// Each timed `memory_write` (40 words, appended to the daily log).
    pub writes: Vec<Duration>,
    /// Each timed `memory_search` (two words).
    pub searches: Vec<Duration>,
}

/// Fill `host`'s memory with [`DOCS`] documents, then time `writes` writes and `searches`
/// searches.
pub async fn run(host: Arc<Host>, writes: usize, searches: usize) -> MemoryRun {
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
    let started = Instant::now();
    futures::stream::iter(docs)
        .map(|args| {
            let host = host.clone();
            async move { call(&host, "memory_write", &args).await }
        })
        .buffer_unordered(FILL_CONCURRENCY)
        .for_each(|_| async {})
        .await;
    let fill = started.elapsed();
    let timed = |tool: &'static str, args: String| {
        let host = host.clone();
        async move {
            let started = Instant::now();
            let out = call(&host, tool, &args).await;
            (started.elapsed(), out)
        }
    };
    let mut write_times = Vec::with_capacity(writes);
    for _ in 0..writes {
        let args = serde_json::json!({"content": words.text(40), "target": "daily_log"});
        write_times.push(timed("memory_write", args.to_string()).await.0);
    }
    let mut search_times = Vec::with_capacity(searches);
    for _ in 0..searches {
        let args = serde_json::json!({"query": format!("{} {}", words.next(), words.next())});
        let (took, out) = timed("memory_search", args.to_string()).await;
        assert!(out.contains("results"), "{out}");
        search_times.push(took);
    }
    MemoryRun {
        fill,
        writes: write_times,
        searches: search_times,
    }
}

async fn call(host: &Host, tool: &str, args: &str) -> String {
    match host.call(tool, args).await.result {
        Ok(out) => out.text,
        Err(e) => panic!("{tool}: {e}"),
    }
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
