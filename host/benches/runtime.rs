//! Runtime benchmarks, printed as a table: fresh-instance echo calls (p50/p99, 1 and 2 threads,
//! default versus tuned allocator), host start (cold and warm cache), and resident memory per
//! live instance. Run with `just bench` (builds the components first).
//!
//! Timing goals (echo ≤ 10 µs p50; 2 threads ≥ 1.8× one; warm start ≤ 20 ms; ≤ 64 KB per live
//! instance) are reported, never asserted: the machines are shared and noisy.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chitin_host::call::CallTarget;
use chitin_host::engine::{AllocatorProfile, EngineOptions};
use chitin_host::policy::Policy;
use chitin_host::spec::CallArgs;
use chitin_host::state::{CallEnv, HostState};
use chitin_host::{CallContext, Host, Limits, Runtime};

const ECHO_ARGS: &str = r#"{"message":"hello"}"#;

fn components_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/components");
    assert!(
        dir.is_dir(),
        "{} missing: run `just build-components`",
        dir.display()
    );
    dir
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

async fn host(
    data: &Path,
    allocator: AllocatorProfile,
    keep_resident: Option<usize>,
    slots: u32,
    paths: &[PathBuf],
) -> Host {
    let options = EngineOptions {
        allocator,
        max_live_instances: slots,
        keep_resident,
    };
    let runtime = Runtime::new(&data.join("cache"), &options).expect("runtime");
    let services = common::services(data);
    let mut policy = Policy::builtin().expect("policy");
    policy.limits = chitin_host::PolicyLimits::fixed(Limits::default());
    let mut host = Host::new(runtime, policy, services);
    for p in paths {
        host.load_path(p).await.expect("load");
    }
    host
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// Calls per second over `window` on `threads` threads.
fn throughput(host: &Host, threads: usize, window: Duration) -> f64 {
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let rt = rt();
                    rt.block_on(async {
                        let started = Instant::now();
                        let mut n = 0u64;
                        while started.elapsed() < window {
                            for _ in 0..100 {
                                let r = host.call("echo", ECHO_ARGS).await;
                                assert!(r.result.is_ok(), "{:?}", r.result);
                            }
                            n += 100;
                        }
                        n
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .sum()
    });
    total as f64 / window.as_secs_f64()
}

/// Median cost of each phase of a call to `tool` of `component_file`, measured separately
/// (tuned pooling).
fn breakdown(
    rt: &tokio::runtime::Runtime,
    label: &str,
    tool: &str,
    component_file: &Path,
    calls: usize,
) {
    let data = tempfile::tempdir().expect("tempdir");
    let host = rt.block_on(host(
        data.path(),
        AllocatorProfile::Tuned,
        None,
        1000,
        &[component_file.to_owned()],
    ));
    let component = &host.components()[0];
    let ctx = CallContext::default();
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let mut state = Vec::with_capacity(calls);
    let mut validate = Vec::with_capacity(calls);
    let mut instantiate = Vec::with_capacity(calls);
    let mut drop_instance = Vec::with_capacity(calls);
    let mut full = Vec::with_capacity(calls);
    rt.block_on(async {
        for _ in 0..calls {
            let t = Instant::now();
            let env = CallEnv {
                grant: &component.grant,
                services: host.services(),
                ctx: &ctx,
                invoke: None,
                target: Some(CallTarget {
                    tool: &component.tools[0].name,
                    args_json: ECHO_ARGS,
                }),
            };
            drop(std::hint::black_box(HostState::new(&env).expect("state")));
            state.push(t.elapsed());
            let t = Instant::now();
            component.tools[0]
                .validate_args(&CallArgs::parse(ECHO_ARGS))
                .expect("valid");
            validate.push(t.elapsed());
            let t = Instant::now();
            let live = host
                .runtime()
                .hold(component, host.services())
                .await
                .expect("instance");
            instantiate.push(t.elapsed());
            let t = Instant::now();
            drop(live);
            drop_instance.push(t.elapsed());
            let t = Instant::now();
            host.call(tool, ECHO_ARGS).await.result.expect("call");
            full.push(t.elapsed());
        }
    });
    println!("\n## Where a call's time goes: {label} (medians, tuned pooling)");
    println!("| phase | median |");
    println!("|---|---|");
    println!(
        "| validate arguments against the schema | {} |",
        us(median(validate))
    );
    println!(
        "| per-call state (WASI context, log), built and dropped | {} |",
        us(median(state))
    );
    println!("| new store + instantiate | {} |", us(median(instantiate)));
    println!(
        "| drop store (slot reset) | {} |",
        us(median(drop_instance))
    );
    println!("| whole call | {} |", us(median(full)));
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() {
    let dir = components_dir();
    let echo = dir.join("echo.wasm");
    let calls = std::env::var("CHITIN_BENCH_CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000usize);
    let window = Duration::from_millis(1500);
    let rt = rt();

    let minimal = Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/fixtures/test-minimal.wasm");
    assert!(
        minimal.is_file(),
        "{} missing: run `just build-fixtures`",
        minimal.display()
    );
    breakdown(&rt, "echo (SDK component, serde)", "echo", &echo, calls);
    breakdown(
        &rt,
        "minimal_echo (wit-bindgen only, no SDK)",
        "minimal_echo",
        &minimal,
        calls,
    );

    println!(
        "\n## Fresh-instance echo call (full host path: validate args, new store, instantiate, call, drop)"
    );
    println!("| allocator | p50 | p99 | 1 thread calls/s | 2 threads calls/s | 2T / 1T |");
    println!("|---|---|---|---|---|---|");
    for (label, profile, keep) in [
        ("tuned pooling".to_owned(), AllocatorProfile::Tuned, None),
        (
            "tuned, keep-resident 64 KiB".to_owned(),
            AllocatorProfile::Tuned,
            Some(64 << 10),
        ),
        (
            "tuned, keep-resident 256 KiB".to_owned(),
            AllocatorProfile::Tuned,
            Some(256 << 10),
        ),
        (
            "tuned, keep-resident 1 MiB".to_owned(),
            AllocatorProfile::Tuned,
            Some(1 << 20),
        ),
        (
            "default pooling".to_owned(),
            AllocatorProfile::PoolingDefault,
            None,
        ),
        ("on-demand".to_owned(), AllocatorProfile::OnDemand, None),
    ] {
        let data = tempfile::tempdir().expect("tempdir");
        let host = rt.block_on(host(
            data.path(),
            profile,
            keep,
            1000,
            std::slice::from_ref(&echo),
        ));
        let report = host.runtime().engine_report();
        let mut samples = Vec::with_capacity(calls);
        rt.block_on(async {
            for _ in 0..2_000 {
                host.call("echo", ECHO_ARGS).await.result.expect("warm-up");
            }
            for _ in 0..calls {
                let t = Instant::now();
                let r = host.call("echo", ECHO_ARGS).await;
                samples.push(t.elapsed());
                assert!(r.result.is_ok());
            }
        });
        samples.sort();
        let one = throughput(&host, 1, window);
        let two = throughput(&host, 2, window);
        let label = if report.pagemap_scan {
            format!("{label} (pagemap_scan)")
        } else {
            label
        };
        println!(
            "| {label} | {} | {} | {:.0} | {:.0} | {:.2}× |",
            us(percentile(&samples, 0.5)),
            us(percentile(&samples, 0.99)),
            one,
            two,
            two / one
        );
    }

    println!("\n## Host start until every built-in component is ready (engine + load + specs)");
    println!("| cache | median | min | max |");
    println!("|---|---|---|---|");
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..5 {
        let data = tempfile::tempdir().expect("tempdir");
        for bucket in [&mut cold, &mut warm] {
            let t = Instant::now();
            let h = rt.block_on(host(
                data.path(),
                AllocatorProfile::Tuned,
                None,
                1000,
                std::slice::from_ref(&dir),
            ));
            bucket.push(t.elapsed());
            drop(h);
        }
    }
    for (label, v) in [("cold (empty)", &mut cold), ("warm", &mut warm)] {
        v.sort();
        println!(
            "| {label} | {:.1} ms | {:.1} ms | {:.1} ms |",
            v[v.len() / 2].as_secs_f64() * 1e3,
            v[0].as_secs_f64() * 1e3,
            v[v.len() - 1].as_secs_f64() * 1e3
        );
    }

    println!("\n## Resident memory per live instance (1000 echo instances alive at once)");
    println!("| allocator | RSS before | RSS after | per instance |");
    println!("|---|---|---|---|");
    for (label, profile) in [
        ("tuned pooling", AllocatorProfile::Tuned),
        ("on-demand", AllocatorProfile::OnDemand),
    ] {
        let data = tempfile::tempdir().expect("tempdir");
        let host = rt.block_on(host(
            data.path(),
            profile,
            None,
            1100,
            std::slice::from_ref(&echo),
        ));
        let component = &host.components()[0];
        // One instance first, so shared code and images are already resident.
        let first = rt
            .block_on(host.runtime().hold(component, host.services()))
            .expect("instance");
        let before = rss_bytes();
        let live: Vec<_> = (0..1000)
            .map(|_| {
                rt.block_on(host.runtime().hold(component, host.services()))
                    .expect("instance")
            })
            .collect();
        let after = rss_bytes();
        println!(
            "| {label} | {:.1} MiB | {:.1} MiB | {:.1} KiB |",
            before as f64 / 1048576.0,
            after as f64 / 1048576.0,
            (after.saturating_sub(before)) as f64 / 1000.0 / 1024.0
        );
        drop(live);
        drop(first);
    }
}
