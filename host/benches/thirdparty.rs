//! The third-party examples (`just build-thirdparty`): the Python, JavaScript and Rust tools,
//! each signed here with a key trusted for `acme/*`. For each, printed as one table: component
//! size, compile on first load (empty cache: what `chitin install` does ahead of the first
//! call), the first call after install (a fresh runtime loading the compiled component from the
//! cache, then one call), the warm call (median of the next calls in the same host, a fresh
//! instance each), and the memory a call needs (the smallest memory limit, in MiB, under which
//! the load and the call succeed: linear memories and tables as the sandbox counts them).
//! Run with `cargo bench -p chitin-host --bench thirdparty`. Figures are reported, never
//! asserted.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chitin_host::data_dir::DataDir;
use chitin_host::engine::EngineOptions;
use chitin_host::policy::Policy;
use chitin_host::{Host, Limits, PolicyLimits, Runtime, Services};
use chitin_registry::keys::SigningKey;
use chitin_registry::trust_store::{Scope, TrustStore, TrustedKey};

const MIB: usize = 1 << 20;
const WARM_CALLS: usize = 20;

/// An example: its file under build/thirdparty, the tool to call and the arguments.
const EXAMPLES: &[(&str, &str, &str)] = &[
    (
        "textstats-py",
        "acme__describe_numbers",
        r#"{"numbers":[1,2,3,4]}"#,
    ),
    (
        "wordcount-js",
        "acme__word_count",
        r#"{"text":"one two three four five six"}"#,
    ),
    (
        "measure-rs",
        "acme__stats_summarize",
        r#"{"numbers":[1,2,3,4]}"#,
    ),
];

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Services over `data`, trusting `key` for `acme/*`.
fn services(data: &Path, key: &SigningKey) -> Arc<Services> {
    let workspace = data.join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let mut trust = TrustStore::default();
    let scope = Scope::parse("acme/*").expect("scope");
    trust
        .add(TrustedKey::new(key.public().clone(), "acme", vec![scope]).expect("entry"))
        .expect("trust acme");
    Arc::new(
        Services::new(&workspace, DataDir::resolve(Some(data)).expect("data dir"))
            .expect("services")
            .with_trust(trust),
    )
}

/// A host over `data` (its compile cache in `data/cache`) with `file` loaded under `policy`;
/// how long the load took. A `chitin:tool` component's load runs its `specs()`, which may not
/// fit a small memory limit.
async fn try_host(
    data: &Path,
    key: &SigningKey,
    policy: Policy,
    file: &Path,
) -> Result<(Host, Duration), chitin_host::LoadError> {
    let runtime = Runtime::new(&data.join("cache"), &EngineOptions::default()).expect("runtime");
    let mut host = Host::new(runtime, policy, services(data, key));
    let started = Instant::now();
    host.load_path(file).await?;
    Ok((host, started.elapsed()))
}

/// As [`try_host`], for a load that must succeed.
async fn host(data: &Path, key: &SigningKey, policy: Policy, file: &Path) -> (Host, Duration) {
    try_host(data, key, policy, file).await.expect("load")
}

/// The built-in default policy with the memory limit (default and ceiling) at `memory` bytes,
/// or as it is.
fn policy(memory: Option<usize>) -> Policy {
    let mut policy = Policy::builtin().expect("policy");
    if let Some(memory_bytes) = memory {
        let c = policy.limits.ceiling;
        policy.limits = PolicyLimits::fixed(Limits {
            memory_bytes,
            fuel: c.fuel,
            timeout_ms: c.timeout_ms,
            output_bytes: c.output_bytes,
            ..policy.limits.default
        });
    }
    policy
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/thirdparty");
    let rt = rt();
    let key = SigningKey::generate();
    println!("## Third-party examples (a fresh instance per call)");
    println!(
        "| example | size | compile (install) | first call after install | warm call (median of {WARM_CALLS}) | memory a call needs |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, tool, args) in EXAMPLES {
        let source: PathBuf = dir.join(format!("{name}.wasm"));
        let Ok(bytes) = std::fs::read(&source) else {
            println!("| {name} | missing: run `just build-thirdparty` | | | | |");
            continue;
        };
        let signed = chitin_registry::signature::sign(&bytes, &key).expect("sign");
        let data = tempfile::tempdir().expect("tempdir");
        let file = data.path().join(format!("{name}.wasm"));
        std::fs::write(&file, &signed).expect("write");

        // Empty cache: the compile `chitin install` does.
        let (_, compile) = rt.block_on(host(data.path(), &key, policy(None), &file));
        // A fresh runtime finds it compiled: load from the cache, then the first call.
        let started = Instant::now();
        let (warm_host, _) = rt.block_on(host(data.path(), &key, policy(None), &file));
        let first = rt.block_on(warm_host.call(tool, args));
        let first_call = started.elapsed();
        if let Err(e) = &first.result {
            println!("| {name} | call failed: {e} | | | | |");
            continue;
        }
        let mut warm: Vec<Duration> = (0..WARM_CALLS)
            .map(|_| {
                let started = Instant::now();
                let report = rt.block_on(warm_host.call(tool, args));
                assert!(report.result.is_ok(), "{name}: {:?}", report.result);
                started.elapsed()
            })
            .collect();
        warm.sort();

        // The smallest memory limit (whole MiB) under which the load and the call succeed.
        let succeeds = |mib: usize| match rt.block_on(try_host(
            data.path(),
            &key,
            policy(Some(mib * MIB)),
            &file,
        )) {
            Ok((host, _)) => rt.block_on(host.call(tool, args)).result.is_ok(),
            Err(_) => false,
        };
        let (mut low, mut high) = (0usize, 256usize);
        while high - low > 1 {
            let mid = (low + high) / 2;
            if succeeds(mid) {
                high = mid;
            } else {
                low = mid;
            }
        }
        println!(
            "| {name} | {:.2} MB | {} | {} | {} | {high} MiB |",
            signed.len() as f64 / 1e6,
            ms(compile),
            ms(first_call),
            ms(warm[warm.len() / 2]),
        );
    }
}
