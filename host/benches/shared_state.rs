//! Many chitin processes on one data directory, printed as a table: `memory_write` latency from
//! one `chitin serve` and from four at once; how long transactions waited for the database lock
//! under that load (from the servers' `chitin::state_db` debug events); and the whole-process
//! time of `chitin call echo` while four servers write; and `memory_write`/`memory_search` with
//! the state in the embedded SQLite file against a throwaway PostgreSQL, same run; and calls per
//! second through one and through two `chitin serve --http` replicas sharing that PostgreSQL. Run
//! with `cargo bench -p chitin-host --bench shared_state` after `just build-components`.
//!
//! On a machine of few cores the replica figures show that concurrent calls through several
//! replicas stay correct (every call succeeds, the shared quota row serialises writers), not a
//! scaling factor: the replicas, the database and the clients share the same cores.
//!
//! Figures are reported, never asserted: the machines are shared and noisy, and every commit
//! waits for fsync, whose cost depends on the disk. The goal (lock wait p99 under 100 ms) is
//! printed beside the figure.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

// The throwaway PostgreSQL helper shared with the tests.
#[allow(dead_code)]
#[path = "../../tests/src/postgres.rs"]
mod postgres;

/// Writes each server makes per run.
const WRITES: usize = 200;
/// Servers writing at once in the loaded runs.
const SERVERS: usize = 4;
/// `chitin call echo` runs timed.
const ECHOES: usize = 20;
/// Clients calling at once in the replica runs, spread over the replicas.
const CLIENTS: usize = 4;
/// Calls each client makes per replica run.
const CLIENT_CALLS: usize = 100;

fn built(name: &str) -> PathBuf {
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

fn chitin(data: &Path) -> Command {
    // The workspace sits beside the data directory, never holding it.
    let workspace = data.join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chitin"));
    cmd.env_remove("CHITIN_COMPONENTS")
        .env_remove("CHITIN_POLICY")
        .env("CHITIN_DATA_DIR", data)
        .env("CHITIN_WORKSPACE", &workspace)
        .env(
            "CHITIN_TRUSTED_KEYS",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/trusted_keys"),
        )
        .current_dir(data);
    cmd
}

/// A `chitin serve` on stdio logging its lock waits to `log`, after the MCP handshake.
struct Server {
    child: Child,
    stdin: ChildStdin,
    responses: mpsc::Receiver<Value>,
}

impl Server {
    fn start(data: &Path, log: &Path) -> Self {
        Self::start_with(data, log, None)
    }

    /// As [`Server::start`], with the state in PostgreSQL at `state_url` when given.
    fn start_with(data: &Path, log: &Path, state_url: Option<&str>) -> Self {
        let mut cmd = chitin(data);
        if let Some(url) = state_url {
            cmd.env("CHITIN_STATE_URL", url);
        }
        let mut child = cmd
            .env("RUST_LOG", "chitin::state_db=debug")
            .arg("--components")
            .arg(built("memory"))
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).expect("log file"))
            .spawn()
            .expect("start chitin serve");
        let out = child.stdout.take().expect("stdout");
        let (lines, responses) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Ok(value) = serde_json::from_str::<Value>(&line)
                    && lines.send(value).is_err()
                {
                    break;
                }
            }
        });
        let stdin = child.stdin.take().expect("stdin");
        let mut server = Self {
            child,
            stdin,
            responses,
        };
        server.request(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}}),
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("send");
        self.stdin.flush().expect("flush");
    }

    fn request(&mut self, message: Value) -> Value {
        self.send(&message);
        let response = self
            .responses
            .recv_timeout(Duration::from_secs(60))
            .expect("response");
        assert_eq!(response["id"], message["id"], "{response}");
        response
    }

    /// `WRITES` memory writes one after another; the latency of each.
    fn write_loop(&mut self, tag: &str) -> Vec<Duration> {
        (1..=WRITES)
            .map(|i| {
                let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                    "name": "memory_write", "arguments": {
                        "content": format!("{tag} note {i}: the quick brown fox\n"),
                        "target": format!("{tag}.md")}}});
                let t = Instant::now();
                let response = self.request(call);
                let took = t.elapsed();
                assert_eq!(response["result"]["isError"], false, "{response}");
                took
            })
            .collect()
    }

    /// `WRITES` memory searches one after another; the latency of each.
    fn search_loop(&mut self, tag: &str) -> Vec<Duration> {
        (1..=WRITES)
            .map(|i| {
                let call = json!({"jsonrpc": "2.0", "id": 100_000 + i, "method": "tools/call",
                    "params": {"name": "memory_search", "arguments": {
                        "query": format!("{tag} note {i} fox")}}});
                let t = Instant::now();
                let response = self.request(call);
                let took = t.elapsed();
                assert_eq!(response["result"]["isError"], false, "{response}");
                took
            })
            .collect()
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` servers writing at once on one data directory: every write's latency, every lock
/// wait the servers logged, and the whole-process times of `chitin call echo` run meanwhile.
fn run(n: usize, echo: bool) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
    let data = tempfile::tempdir().expect("tempdir");
    let logs: Vec<PathBuf> = (0..n)
        .map(|i| data.path().join(format!("serve-{i}.log")))
        .collect();
    let servers: Vec<Server> = logs.iter().map(|l| Server::start(data.path(), l)).collect();
    let start = std::sync::Arc::new(std::sync::Barrier::new(n + 1));
    let writers: Vec<_> = servers
        .into_iter()
        .enumerate()
        .map(|(i, mut server)| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let times = server.write_loop(&format!("s{i}"));
                server.stop();
                times
            })
        })
        .collect();
    start.wait();
    let mut echoes = Vec::new();
    if echo {
        // Let the writers get going first.
        std::thread::sleep(Duration::from_millis(200));
        for _ in 0..ECHOES {
            let t = Instant::now();
            let out = chitin(data.path())
                .arg("--components")
                .arg(built("echo"))
                .args(["call", "echo", r#"{"message": "hi"}"#])
                .output()
                .expect("chitin call echo");
            echoes.push(t.elapsed());
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let writes: Vec<Duration> = writers
        .into_iter()
        .flat_map(|t| t.join().expect("writer"))
        .collect();
    let waits = logs
        .iter()
        .flat_map(|log| {
            let text = std::fs::read_to_string(log).expect("log");
            text.lines()
                .filter_map(|l| l.split("lock_wait_us=").nth(1))
                .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
                .map(Duration::from_micros)
                .collect::<Vec<_>>()
        })
        .collect();
    (writes, waits, echoes)
}

fn pct(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    let i = ((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1;
    samples[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn row(what: &str, samples: &mut [Duration], note: &str) {
    if samples.is_empty() {
        println!("| {what} | - | - | 0 | {note} |");
        return;
    }
    let (p50, p99) = (pct(samples, 0.5), pct(samples, 0.99));
    println!(
        "| {what} | {} | {} | {} | {note} |",
        ms(p50),
        ms(p99),
        samples.len()
    );
}

/// One server writing then searching, with its state in the SQLite file or in PostgreSQL at `url`.
fn backend_run(url: Option<&str>) -> (Vec<Duration>, Vec<Duration>) {
    let data = tempfile::tempdir().expect("tempdir");
    let log = data.path().join("serve.log");
    let mut server = Server::start_with(data.path(), &log, url);
    let writes = server.write_loop("b");
    let searches = server.search_loop("b");
    server.stop();
    (writes, searches)
}

/// A `chitin serve --http` replica with its state in PostgreSQL.
struct HttpReplica {
    child: Child,
    addr: String,
    token: String,
    _data: tempfile::TempDir,
}

impl HttpReplica {
    fn start(url: &str) -> Self {
        let data = tempfile::tempdir().expect("tempdir");
        let mut child = chitin(data.path())
            .env("CHITIN_STATE_URL", url)
            .arg("--components")
            .arg(built("memory"))
            // The per-address limit would otherwise throttle the clients, all on 127.0.0.1.
            .args(["serve", "--no-watch", "--http", "127.0.0.1:0"])
            .args(["--rate-limit", "1000000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chitin serve --http");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut addr = None;
        for line in lines.by_ref() {
            let line = line.expect("banner");
            // Announced once the token file is written.
            if let Some((_, rest)) = line.split_once("over HTTP at http://") {
                addr = rest.split('/').next().map(str::to_owned);
                break;
            }
        }
        std::thread::spawn(move || lines.for_each(drop));
        let token = std::fs::read_to_string(data.path().join("http-token")).expect("token");
        Self {
            child,
            addr: addr.expect("the replica names its address"),
            token: token.trim().to_owned(),
            _data: data,
        }
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One client: `CLIENT_CALLS` stateless (2026-07-28) calls of `tool` on one keep-alive
/// connection to `replica`; the latency of each.
async fn client_loop(
    addr: String,
    token: String,
    tool: &'static str,
    tag: String,
) -> Vec<Duration> {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    let stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("HTTP/1.1 handshake");
    tokio::spawn(connection);
    let mut times = Vec::with_capacity(CLIENT_CALLS);
    for i in 0..CLIENT_CALLS {
        let arguments = match tool {
            "memory_write" => json!({"content": format!("{tag} note {i}: the quick brown fox\n"),
                "target": format!("{tag}.md")}),
            _ => json!({"query": format!("{tag} note {i} fox")}),
        };
        let body = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}}}});
        let request = hyper::Request::post("/mcp")
            .header("host", &addr)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("request");
        let t = Instant::now();
        let response = sender.send_request(request).await.expect("send");
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        times.push(t.elapsed());
        let text = String::from_utf8_lossy(&bytes);
        assert!(status.is_success(), "{status}: {text}");
        assert!(text.contains("\"isError\":false"), "{text}");
    }
    times
}

/// `CLIENTS` clients calling `tool` at once through `n` replicas on the PostgreSQL at `url`:
/// calls per second over the whole run and every call's latency.
fn replicas_run(n: usize, url: &str, tool: &'static str) -> (f64, Vec<Duration>) {
    let replicas: Vec<HttpReplica> = (0..n).map(|_| HttpReplica::start(url)).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    let times: Vec<Duration> = runtime.block_on(async {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let replica = &replicas[c % n];
                tokio::spawn(client_loop(
                    replica.addr.clone(),
                    replica.token.clone(),
                    tool,
                    format!("c{c}"),
                ))
            })
            .collect();
        let mut all = Vec::new();
        for client in clients {
            all.extend(client.await.expect("client"));
        }
        all
    });
    let rate = times.len() as f64 / started.elapsed().as_secs_f64();
    for replica in replicas {
        replica.stop();
    }
    (rate, times)
}

fn main() {
    // Idle baseline for `chitin call echo`.
    let idle = tempfile::tempdir().expect("tempdir");
    let mut idle_echo: Vec<Duration> = (0..ECHOES)
        .map(|_| {
            let t = Instant::now();
            let out = chitin(idle.path())
                .arg("--components")
                .arg(built("echo"))
                .args(["call", "echo", r#"{"message": "hi"}"#])
                .output()
                .expect("chitin call echo");
            assert!(out.status.success());
            t.elapsed()
        })
        .collect();
    let (mut one, mut one_waits, _) = run(1, false);
    let (mut four, mut four_waits, mut busy_echo) = run(SERVERS, true);
    // Same run, same machine: the embedded store against a throwaway PostgreSQL on loopback.
    let (mut sqlite_w, mut sqlite_s) = backend_run(None);
    let pg = postgres::Postgres::start();
    let (mut pg_w, mut pg_s) = backend_run(Some(&pg.url()));
    // Writes first (they fill the documents the searches then look through).
    let fleet: Vec<(String, f64, Vec<Duration>)> = [
        ("memory_write", 1),
        ("memory_write", 2),
        ("memory_search", 1),
        ("memory_search", 2),
    ]
    .into_iter()
    .map(|(tool, n)| {
        let (rate, times) = replicas_run(n, &pg.url(), tool);
        let what = format!(
            "{tool}, {n} replica{} on PostgreSQL",
            if n == 1 { "" } else { "s" }
        );
        (what, rate, times)
    })
    .collect();
    drop(pg);
    println!("| measure | p50 | p99 | samples | note |");
    println!("|---|---|---|---|---|");
    row(
        "memory_write, 1 server",
        &mut one,
        "MCP round trip, durable",
    );
    row(
        &format!("memory_write, {SERVERS} servers at once"),
        &mut four,
        "each server writes its own document",
    );
    row("lock wait, 1 server", &mut one_waits, "per transaction");
    row(
        &format!("lock wait, {SERVERS} servers at once"),
        &mut four_waits,
        "goal: p99 < 100 ms",
    );
    row(
        "memory_write, SQLite",
        &mut sqlite_w,
        "1 server, MCP round trip",
    );
    row(
        "memory_write, PostgreSQL",
        &mut pg_w,
        "1 server, loopback server",
    );
    row(
        "memory_search, SQLite",
        &mut sqlite_s,
        "1 server, MCP round trip",
    );
    row(
        "memory_search, PostgreSQL",
        &mut pg_s,
        "1 server, loopback server",
    );
    for (what, rate, mut times) in fleet {
        row(
            &what,
            &mut times,
            &format!("{rate:.0} calls/s, {CLIENTS} HTTP clients at once"),
        );
    }
    row("chitin call echo, idle", &mut idle_echo, "whole process");
    row(
        &format!("chitin call echo, {SERVERS} servers writing"),
        &mut busy_echo,
        "whole process; echo needs no database",
    );
}
