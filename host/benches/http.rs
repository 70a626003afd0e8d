//! Outbound HTTP benchmark, printed as a table: a GET through the `http` component (fresh
//! sandbox, wasi:http, the host's enforced send path, TLS, the capability's kept-alive
//! connection) versus the same GET with reqwest from the host (a new connection each, and its
//! default pool), against one HTTPS server on 127.0.0.1; and the leak scanner on a mebibyte of
//! each of four texts (prose dense with anchor words, the README, anchors crafted to make the
//! scan's trials walk far, the README in base64 wrapped into lines). Run with
//! `cargo bench -p chitin-host --bench http` after `just build-components` (`just bench` does
//! both). Figures are reported, never asserted.
//!
//! With `CHITIN_BENCH_GETS=N` set, the bench makes only N GETs through the component (after
//! ten that warm up) and prints their p50 to stderr: a series to run under `perf record`.

// The tests' server; the bench reads none of its hit counters.
#[allow(dead_code)]
#[path = "../tests/https_server/mod.rs"]
mod https_server;
#[path = "common/reqwest_ref.rs"]
mod reqwest_ref;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use chitin_host::approver::{ApprovalRequest, Approver, CallContext, Decision};
use chitin_host::data_dir::DataDir;
use chitin_host::engine::EngineOptions;
use chitin_host::leak::LeakScanner;
use chitin_host::policy::{DEFAULT_POLICY, Policy, RateLimits};
use chitin_host::{Host, Runtime, Services};
use chitin_registry::keys::SigningKey;
use chitin_registry::trust_store::{Scope, TrustStore, TrustedKey};

const ROUNDS: usize = 200;

struct Yes;

#[async_trait::async_trait]
impl Approver for Yes {
    async fn approve(&self, _: &ApprovalRequest) -> Decision {
        Decision::Approved
    }
}

fn p(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * q).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// The built `http` component re-signed by a bench key with its grant narrowed to `port`.
fn http_component(dir: &Path, port: u16, key: &SigningKey) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let wasm = std::fs::read(root.join("build/components/http.wasm"))
        .expect("build/components/http.wasm missing: run `just build-components`");
    // The built manifest, which records the tool specs the component must match at load.
    let manifest = chitin_registry::artifact::manifest_text(&wasm)
        .expect("artifact")
        .expect("manifest")
        .replace("host = \"*\"", &format!("host = \"*\"\nport = {port}"));
    let bare = chitin_registry::signature::strip(&wasm).expect("strip");
    let embedded = chitin_registry::artifact::embed_manifest(&bare, &manifest).expect("embed");
    let signed = chitin_registry::signature::sign(&embedded, key).expect("sign");
    let path = dir.join("http.wasm");
    std::fs::write(&path, signed).expect("write");
    path
}

/// Only `gets` GETs through the component (after ten that warm up), their p50 to stderr: a
/// series long enough to profile (`perf record`), with nothing else in the run.
async fn profile_gets(host: &Host, args: &str, ctx: &CallContext, gets: usize) {
    let mut took = Vec::with_capacity(gets);
    for i in 0..gets + 10 {
        let started = Instant::now();
        let report = host.call_in("http", args, ctx).await;
        if i >= 10 {
            took.push(started.elapsed());
        }
        report.result.expect("GET through the component");
    }
    took.sort();
    if let Some(p50) = took.get(took.len() / 2) {
        eprintln!("GET through the http component: p50 {p50:?} of {gets}");
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(dir.path()).await;
    let url = server.url("/echo");

    let key = SigningKey::generate();
    let mut trust = TrustStore::empty();
    trust
        .add(
            TrustedKey::new(
                key.public().clone(),
                "bench",
                vec![Scope::parse("chitin/*").expect("scope")],
            )
            .expect("entry"),
        )
        .expect("trust");
    let policy_text = DEFAULT_POLICY
        .replace("allow_addresses = []", "allow_addresses = [\"127.0.0.1\"]")
        .replace(
            "ca_files = []",
            &format!("ca_files = [{:?}]", server.ca_file),
        )
        .replace(
            "rate_limit = { per_minute = 60, per_hour = 1000 }",
            "rate_limit = { per_minute = 100000, per_hour = 1000000 }",
        );
    let mut policy = Policy::parse(&policy_text, Path::new("bench")).expect("policy");
    policy.approval.clear();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let services = Arc::new(
        Services::new(
            &workspace,
            DataDir::resolve(Some(dir.path())).expect("data"),
        )
        .expect("services")
        .with_trust(trust),
    );
    let runtime =
        Runtime::new(&dir.path().join("cache"), &EngineOptions::default()).expect("runtime");
    let mut host = Host::new(runtime, policy, services);
    host.load_path(&http_component(dir.path(), server.addr.port(), &key))
        .await
        .expect("load http");
    let ctx = CallContext {
        approver: Arc::new(Yes),
        ..CallContext::default()
    };
    let args = serde_json::json!({"method": "GET", "url": url}).to_string();
    if let Some(gets) = std::env::var("CHITIN_BENCH_GETS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
    {
        return profile_gets(&host, &args, &ctx, gets).await;
    }

    let mut through = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS + 10 {
        let started = Instant::now();
        let report = host.call_in("http", &args, &ctx).await;
        let took = started.elapsed();
        report.result.expect("GET through the component");
        if i >= 10 {
            through.push(took);
        }
    }

    // The same GET from a server that closes each connection: a new TCP and TLS connection
    // every call, as before the capability kept connections.
    let closing_args =
        serde_json::json!({"method": "GET", "url": server.url("/closing")}).to_string();
    let mut fresh = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS + 10 {
        let started = Instant::now();
        let report = host.call_in("http", &closing_args, &ctx).await;
        let took = started.elapsed();
        report.result.expect("GET through the component");
        if i >= 10 {
            fresh.push(took);
        }
    }

    // Parts of a call, measured alone: the rate limiter's check (a durable commit to the data
    // directory's database, shared with every chitin process on it), and a call the allowlist
    // refuses right after that check (the sandbox, the component, the checks, no network).
    let rate = host.services().http_rate();
    let limits = RateLimits {
        per_minute: 100_000,
        per_hour: 1_000_000,
    };
    let mut rated = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS + 10 {
        let started = Instant::now();
        rate.check("bench", "probe", limits, std::time::SystemTime::now())
            .expect("within the limit");
        let took = started.elapsed();
        if i >= 10 {
            rated.push(took);
        }
    }
    let refused_args =
        serde_json::json!({"method": "GET", "url": "https://127.0.0.1:1/echo"}).to_string();
    let mut refused = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS + 10 {
        let started = Instant::now();
        let report = host.call_in("http", &refused_args, &ctx).await;
        let took = started.elapsed();
        report.result.expect_err("port outside the grant");
        if i >= 10 {
            refused.push(took);
        }
    }

    let tls = reqwest_ref::tls(&server.ca_file);
    // A new connection per request.
    let mut direct = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS + 10 {
        let client = reqwest_ref::client(&tls, false);
        let started = Instant::now();
        reqwest_ref::get(&client, &url).await;
        if i >= 10 {
            direct.push(started.elapsed());
        }
    }

    // reqwest's default pool: one kept-alive connection, like the capability's.
    let client = reqwest_ref::client(&tls, true);
    let mut pooled = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS + 10 {
        let started = Instant::now();
        reqwest_ref::get(&client, &url).await;
        if i >= 10 {
            pooled.push(started.elapsed());
        }
    }

    let (t50, t99) = (p(&mut through, 0.5), p(&mut through, 0.99));
    let (d50, d99) = (p(&mut direct, 0.5), p(&mut direct, 0.99));
    let (k50, k99) = (p(&mut pooled, 0.5), p(&mut pooled, 0.99));
    println!("\n## GET https://127.0.0.1/echo ({ROUNDS} rounds)");
    println!("| path | p50 | p99 | chitin ÷ this (p50) |");
    println!("|---|---|---|---|");
    println!(
        "| `http` component through the capability (call, sandbox, checks, kept-alive TLS) | {} | {} | 1× |",
        ms(t50),
        ms(t99)
    );
    for (name, d50, d99) in [
        ("reqwest from the host, new TLS connection each", d50, d99),
        ("reqwest from the host, its pool (kept-alive)", k50, k99),
    ] {
        println!(
            "| {name} | {} | {} | {:.2}× |",
            ms(d50),
            ms(d99),
            t50.as_secs_f64() / d50.as_secs_f64()
        );
    }

    println!(
        "\n## the call above without its kept-alive connection, and parts of it alone ({ROUNDS} rounds)"
    );
    println!("| part | p50 | p99 |");
    println!("|---|---|---|");
    for (name, series) in [
        (
            "`http` call, the server closing each connection (new TCP + TLS each call)",
            &mut fresh,
        ),
        ("rate limiter check (durable commit)", &mut rated),
        (
            "`http` call refused by the allowlist (sandbox, component, rate check, no network)",
            &mut refused,
        ),
    ] {
        let (m50, m99) = (p(series, 0.5), p(series, 0.99));
        println!("| {name} | {} | {} |", ms(m50), ms(m99));
    }

    // The leak scan alone, on a mebibyte of each kind of text a tool hands back.
    let paragraph = "The operator rotated the API token on Tuesday; the password policy is in the \
                     runbook, section 4. Deploys go out at 10:00 UTC after the tests pass. ";
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("the README");
    let mebibyte = |text: &str| -> String {
        let mut whole = text.repeat((1 << 20) / text.len() + 1);
        whole.truncate(whole.floor_char_boundary(1 << 20));
        whole
    };
    // Anchors whose trials each walk the letters after them looking for a JWT's `.`.
    let crafted = format!("{}{}", "eyJ-".repeat(1000), "a".repeat((1 << 20) - 4000));
    // A mail attachment or `base64`'s output: each line is a run, and the lines one stream.
    let encoded = base64::engine::general_purpose::STANDARD.encode(mebibyte(&readme));
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(76)
        .map(|line| std::str::from_utf8(line).expect("base64 is ASCII"))
        .collect();
    let wrapped = mebibyte(&(lines.join("\n") + "\n"));
    let texts = [
        (
            "prose dense with anchor words (`API`, `token`, `password`)",
            mebibyte(paragraph),
        ),
        ("the README, repeated", mebibyte(&readme)),
        ("1,000 `eyJ-` anchors, then letters to the end", crafted),
        ("the README in base64, wrapped at 76 columns", wrapped),
    ];
    let scanner =
        LeakScanner::new([("bench_secret", "bench-VALUE-0a1b2c3d4e5f")]).expect("scanner");
    println!("\n## leak scan of 1 MiB (built-in patterns + one secret value, p50 of 20)");
    println!("| text | scan | p50 | throughput |");
    println!("|---|---|---|---|");
    for (which, text) in &texts {
        let mut scrub = Vec::new();
        let mut outbound = Vec::new();
        for _ in 0..20 {
            let started = Instant::now();
            std::hint::black_box(scanner.scrub(text));
            scrub.push(started.elapsed());
            let started = Instant::now();
            let _ = std::hint::black_box(scanner.scan_outbound(text));
            outbound.push(started.elapsed());
        }
        for (name, series) in [
            ("scrub (tool output)", &mut scrub),
            ("scan_outbound (request)", &mut outbound),
        ] {
            let d = p(series, 0.5);
            let mib = text.len() as f64 / f64::from(1 << 20);
            println!(
                "| {which} | {name} | {} | {:.1} MiB/s |",
                ms(d),
                mib / d.as_secs_f64()
            );
        }
    }
}
