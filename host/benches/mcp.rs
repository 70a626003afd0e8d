//! MCP round-trip benchmark, printed as a table: `tools/call echo` through `chitin serve` over
//! stdio and over Streamable HTTP, from an rmcp client in this process — p50 and p99 of one
//! client's sequential calls, and calls/s with 8 concurrent HTTP clients. Run with
//! `just bench-mcp` (builds the components and the binary first).
//!
//! The goal (≤ 100 µs p50 over stdio) is reported, never asserted: the machines are shared.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Calls measured per series, after the warm-up.
const CALLS: usize = 2000;
/// Calls before measuring (compile cache, allocator, connections).
const WARMUP: usize = 200;
/// Concurrent HTTP clients in the throughput series.
const CLIENTS: usize = 8;

type Client = RunningService<RoleClient, ()>;

fn chitin() -> &'static str {
    env!("CARGO_BIN_EXE_chitin")
}

/// The trust store `just build-components` writes for the development key that signed echo.
fn trusted_keys() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/trusted_keys")
}

fn echo_component() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/components/echo.wasm");
    assert!(
        path.is_file(),
        "{} missing: run `just build-components`",
        path.display()
    );
    path
}

fn echo_call() -> CallToolRequestParams {
    let args = serde_json::json!({"message": "hello"});
    CallToolRequestParams::new("echo").with_arguments(args.as_object().cloned().unwrap_or_default())
}

/// Time `calls` sequential echo calls; the latencies, sorted.
async fn sequential(client: &Client, calls: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        let result = client.call_tool(echo_call()).await.expect("call");
        times.push(started.elapsed());
        assert_ne!(result.is_error, Some(true), "echo failed: {result:?}");
    }
    times.sort();
    times
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

async fn stdio_client(data: &Path) -> Client {
    let mut command = Command::new(chitin());
    command
        .args(["serve", "--no-watch", "--components"])
        .arg(echo_component())
        .env("CHITIN_DATA_DIR", data)
        .env("CHITIN_TRUSTED_KEYS", trusted_keys());
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn chitin serve");
    ().serve(transport).await.expect("initialize over stdio")
}

/// Start `chitin serve --http` on a free port; the child, the URL and the token.
async fn http_server(data: &Path) -> (Child, String, String) {
    let mut child = Command::new(chitin())
        .args([
            "serve",
            "--no-watch",
            "--http",
            "127.0.0.1:0",
            "--rate-limit",
            "1000000",
            "--components",
        ])
        .arg(echo_component())
        .env("CHITIN_DATA_DIR", data)
        .env("CHITIN_TRUSTED_KEYS", trusted_keys())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn chitin serve --http");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await
            .expect("read banner")
            .expect("chitin serve --http exited before listening");
        if let Some(at) = line.find("http://127.0.0.1:") {
            break line[at..]
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let token = std::fs::read_to_string(data.join("http-token")).expect("token");
    (child, url, token.trim().to_owned())
}

async fn http_client(url: &str, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let transport = StreamableHttpClientTransport::from_config(config);
    ().serve(transport).await.expect("initialize over HTTP")
}

fn row(series: &str, sorted: &[Duration], rate: f64) {
    println!(
        "| {series:<34} | {:>8} | {:>8} | {:>10.0} |",
        micros(percentile(sorted, 0.5)),
        micros(percentile(sorted, 0.99)),
        rate
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let data = tempfile::tempdir().expect("data dir");
    println!(
        "tools/call echo through `chitin serve`, {CALLS} calls per series after {WARMUP} warm-up"
    );
    println!();
    println!("| series                             |      p50 |      p99 |    calls/s |");
    println!("|------------------------------------|---------:|---------:|-----------:|");

    let stdio = stdio_client(data.path()).await;
    sequential(&stdio, WARMUP).await;
    let started = Instant::now();
    let times = sequential(&stdio, CALLS).await;
    row(
        "stdio, 1 client",
        &times,
        CALLS as f64 / started.elapsed().as_secs_f64(),
    );
    stdio.cancel().await.expect("close stdio");

    let (server, url, token) = http_server(data.path()).await;
    let one = http_client(&url, &token).await;
    sequential(&one, WARMUP).await;
    let started = Instant::now();
    let times = sequential(&one, CALLS).await;
    row(
        "HTTP, 1 client",
        &times,
        CALLS as f64 / started.elapsed().as_secs_f64(),
    );
    one.cancel().await.expect("close HTTP client");

    let mut clients = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        let client = http_client(&url, &token).await;
        sequential(&client, WARMUP / CLIENTS).await;
        clients.push(client);
    }
    let started = Instant::now();
    let per_client = CALLS / CLIENTS;
    let runs = clients.iter().map(|client| sequential(client, per_client));
    let mut times: Vec<Duration> = futures::future::join_all(runs).await.concat();
    let elapsed = started.elapsed();
    times.sort();
    row(
        &format!("HTTP, {CLIENTS} concurrent clients"),
        &times,
        (per_client * CLIENTS) as f64 / elapsed.as_secs_f64(),
    );
    for client in clients {
        client.cancel().await.expect("close HTTP client");
    }
    drop(server);
    println!();
    println!("goal: ≤ 100 µs p50 over stdio (reported, not asserted)");
}
