//! Isolation and hostile components: every attack ends in a typed error, and the next call works.

use crate::common;

use std::time::{Duration, Instant};

use chitin_host::caps::log::LogSource;
use chitin_host::{Host, Limits, Runtime, ToolError};
use common::{TestEnv, fixture};
use serde_json::json;

async fn hostile(limits: Limits) -> TestEnv {
    TestEnv::new(&[fixture("test-hostile"), fixture("test-counter")], limits).await
}

/// A normal call after an attack still succeeds.
async fn still_works(env: &TestEnv) {
    assert_eq!(env.ok("ok", json!({})).await, json!({"ok": true}));
}

#[tokio::test]
async fn a_global_counter_is_fresh_on_every_call() {
    let env = hostile(Limits::default()).await;
    for _ in 0..5 {
        assert_eq!(env.ok("count", json!({})).await, json!({"count": 1}));
    }
}

/// `tool`, under a 300 ms limit, is stopped with a timeout after 0.3–3 s (the epoch ticker and
/// the timer fire within 10 ms; the rest is slack for a busy machine), and the next call works.
async fn stopped_at_the_deadline(tool: &str) {
    let limits = Limits {
        timeout_ms: 300,
        ..Limits::default()
    };
    let env = hostile(limits).await;
    let started = Instant::now();
    let report = env.call(tool, json!({})).await;
    let elapsed = started.elapsed();
    assert!(
        matches!(&report.result, Err(ToolError::Timeout(m)) if m.contains("300 ms")),
        "{tool}: {:?}",
        report.result
    );
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(3),
        "{tool} took {elapsed:?}"
    );
    still_works(&env).await;
}

#[tokio::test]
async fn an_infinite_loop_times_out_within_the_deadline() {
    stopped_at_the_deadline("spin").await;
}

#[tokio::test]
async fn a_call_waiting_in_the_host_is_stopped_at_the_deadline() {
    // No epoch tick reaches a call waiting in the host: only the wall-clock timer ends it.
    stopped_at_the_deadline("nap").await;
}

#[tokio::test]
async fn an_infinite_loop_runs_out_of_fuel_when_fuel_is_tighter_than_time() {
    let limits = Limits {
        fuel: 50_000_000,
        ..Limits::default()
    };
    let env = hostile(limits).await;
    let report = env.call("spin", json!({})).await;
    assert!(
        matches!(&report.result, Err(ToolError::ExecutionFailed(m)) if m.contains("fuel")),
        "{:?}",
        report.result
    );
    still_works(&env).await;
}

#[tokio::test]
async fn memory_growth_past_the_cap_is_refused() {
    let limits = Limits {
        memory_bytes: 4 * 1024 * 1024,
        ..Limits::default()
    };
    let env = hostile(limits).await;
    let report = env.call("grow", json!({})).await;
    assert!(
        matches!(&report.result, Err(ToolError::ExecutionFailed(m)) if m.contains("memory limit exceeded") && m.contains("4 MiB")),
        "{:?}",
        report.result
    );
    still_works(&env).await;
}

#[tokio::test]
async fn deep_recursion_traps_cleanly() {
    let env = hostile(Limits::default()).await;
    let report = env.call("recurse", json!({})).await;
    assert!(
        matches!(&report.result, Err(ToolError::ExecutionFailed(m)) if m.contains("stack overflow")),
        "{:?}",
        report.result
    );
    still_works(&env).await;
}

#[tokio::test]
async fn a_panic_is_reported_with_its_message() {
    let env = hostile(Limits::default()).await;
    let report = env.call("panic", json!({})).await;
    assert!(
        matches!(&report.result, Err(ToolError::ExecutionFailed(m)) if m.contains("deliberate panic")),
        "{:?}",
        report.result
    );
    still_works(&env).await;
}

#[tokio::test]
async fn a_huge_output_is_truncated_with_a_marker() {
    let env = hostile(Limits::default()).await;
    let report = env.call("huge_output", json!({"bytes": 1_000_000})).await;
    let out = report.result.expect("huge output succeeds, truncated");
    let total = out.truncated_from.expect("marked as truncated");
    assert!(total > 1_000_000, "{total}");
    assert!(out.text.len() < 64 * 1024 + 200, "{}", out.text.len());
    assert!(
        out.text
            .ends_with(&format!("showing 65536 of {total} bytes]")),
        "{}",
        &out.text[out.text.len() - 80..]
    );
    still_works(&env).await;
}

#[tokio::test]
async fn a_log_flood_is_capped_in_entries_and_bytes() {
    let env = hostile(Limits::default()).await;
    let report = env.call("log_flood", json!({"count": 5000})).await;
    assert_eq!(
        report.result.expect("log flood returns").json(),
        Some(json!({"logged": 5000}))
    );
    assert_eq!(report.log.entries.len(), 1000);
    assert!(report.log.dropped >= 4000, "{}", report.log.dropped);
    assert!(report.log.entries.iter().all(|e| e.message.len() <= 4096));
    still_works(&env).await;
}

#[tokio::test]
async fn a_long_log_entry_is_cut_to_4_kib() {
    let env = hostile(Limits::default()).await;
    let report = env.call("log_flood", json!({"count": 1})).await;
    let long = report
        .log
        .entries
        .iter()
        .find(|e| e.truncated)
        .expect("the 10 KiB entry is cut");
    assert_eq!(long.message.len(), 4096);
}

#[tokio::test]
async fn a_stdout_flood_lands_in_the_capped_log() {
    let env = hostile(Limits::default()).await;
    let report = env.call("stdout_flood", json!({"lines": 20_000})).await;
    assert_eq!(
        report.result.expect("flood returns").json(),
        Some(json!({"printed": 20_000}))
    );
    assert_eq!(report.log.entries.len(), 1000);
    assert!(
        report
            .log
            .entries
            .iter()
            .any(|e| e.source == LogSource::Stdout)
    );
    assert!(report.log.dropped > 30_000, "{}", report.log.dropped);
    still_works(&env).await;
}

#[tokio::test]
async fn concurrent_calls_do_not_share_state() {
    let env = hostile(Limits::default()).await;
    let calls = (0..16).map(|_| env.host.call("count", "{}"));
    for report in futures::future::join_all(calls).await {
        assert_eq!(
            report.result.expect("count").json(),
            Some(json!({"count": 1}))
        );
    }
}

#[tokio::test]
async fn sockets_names_and_files_are_refused_without_a_grant() {
    // A real listener on loopback: the component must not reach it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    listener.set_nonblocking(true).expect("nonblocking");
    let address = listener.local_addr().expect("address").to_string();
    let env = hostile(Limits::default()).await;
    let out = env.ok("reach", json!({ "connect": address })).await;
    for attempt in ["connect", "udp_bind", "lookup", "open_passwd"] {
        let got = out[attempt].as_str().unwrap_or_default();
        assert!(got.starts_with("error: "), "{attempt}: {out}");
    }
    assert_eq!(
        listener.accept().map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::WouldBlock),
        "the component connected"
    );
    still_works(&env).await;
}

#[tokio::test]
async fn a_call_holds_at_most_its_bound_of_open_files_and_the_next_call_opens_freely() {
    // The fixture's grant is `theirs/` of the workspace, which must exist when it loads.
    let data = tempfile::tempdir().expect("tempdir");
    let workspace = tempfile::tempdir().expect("tempdir");
    let theirs = workspace.path().join("theirs");
    std::fs::create_dir_all(&theirs).expect("dir");
    std::fs::write(theirs.join("f.txt"), "text").expect("file");
    let runtime = Runtime::new(common::shared_cache(), &common::test_engine()).expect("runtime");
    let mut host = Host::new(
        runtime,
        common::policy(Limits::default()),
        common::services(data.path(), workspace.path()),
    );
    host.load_path(&fixture("test-reader")).await.expect("load");
    let env = TestEnv {
        data,
        workspace,
        host,
    };
    let bound = chitin_host::caps::wasi::open_files::MOST_PER_CALL as u32;
    // Held up to the bound: fine.
    let held = json!({"path": "theirs/f.txt", "count": bound, "keep": true});
    assert_eq!(env.ok("hold_open", held).await, json!({"opened": bound}));
    // One more held: the call is stopped, saying why.
    let over = json!({"path": "theirs/f.txt", "count": bound + 1, "keep": true});
    let report = env.call("hold_open", over).await;
    match report.result {
        Err(ToolError::ExecutionFailed(m)) => {
            assert!(m.contains(&format!("holds {bound} open files")), "{m}");
        }
        other => panic!("{other:?}"),
    }
    // Closed as they go, ten times the bound is fine: closing gives the room back.
    let churn = json!({"path": "theirs/f.txt", "count": bound * 10, "keep": false});
    assert_eq!(
        env.ok("hold_open", churn).await,
        json!({"opened": bound * 10})
    );
    // Several calls at once each hold up to the bound, side by side.
    let held = json!({"path": "theirs/f.txt", "count": bound, "keep": true});
    let calls = (0..4).map(|_| env.ok("hold_open", held.clone()));
    for out in futures::future::join_all(calls).await {
        assert_eq!(out, json!({"opened": bound}));
    }
}
