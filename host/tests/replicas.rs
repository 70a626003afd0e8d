//! Replicas sharing PostgreSQL: two `chitin serve --http` processes with separate data
//! directories and one throwaway database. A write through A is found through B after A is
//! SIGKILLed; with the database stopped, state calls fail with a typed error naming it while
//! `echo` keeps working and readiness goes false, and both recover on their own when it
//! returns. Real processes, real PostgreSQL, loopback only, bounded in time.

mod common;
// The one throwaway-server helper, shared with the end-to-end tests.
#[allow(dead_code)]
#[path = "../../tests/src/postgres.rs"]
mod postgres;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use postgres::Postgres;

/// A running `chitin serve --http` replica.
struct Replica {
    child: Child,
    addr: String,
    token: String,
}

impl Replica {
    async fn start(data: &Path, pg: &Postgres) -> Self {
        let workspace = data.join("workspace");
        std::fs::create_dir_all(&workspace).expect("workspace");
        let mut child = Command::new(env!("CARGO_BIN_EXE_chitin"))
            .args(["serve", "--no-watch", "--http", "127.0.0.1:0"])
            .arg("--components")
            .arg(common::component("memory"))
            .arg("--components")
            .arg(common::component("echo"))
            .env("CHITIN_DATA_DIR", data)
            .env("CHITIN_WORKSPACE", &workspace)
            .env("CHITIN_STATE_URL", pg.url())
            .env(
                "CHITIN_TRUSTED_KEYS",
                common::repo().join("build/trusted_keys"),
            )
            .env_remove("CHITIN_COMPONENTS")
            .env_remove("CHITIN_POLICY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn chitin serve --http");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let addr = loop {
            let line = lines
                .next_line()
                .await
                .expect("read the banner")
                .expect("chitin serve --http exited before listening");
            if let Some(at) = line.find("over HTTP at http://") {
                let rest = &line[at + "over HTTP at http://".len()..];
                break rest.split('/').next().unwrap_or_default().to_owned();
            }
        };
        while let Some(line) = lines.next_line().await.expect("read the banner") {
            if line.contains("bearer token") {
                break;
            }
        }
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let token = std::fs::read_to_string(data.join("http-token")).expect("token");
        Self {
            child,
            addr,
            token: token.trim().to_owned(),
        }
    }

    /// GET `path`: the status and body.
    async fn get(&self, path: &str) -> (u16, String) {
        let request = Request::get(path)
            .header("host", &self.addr)
            .body(Full::new(Bytes::new()))
            .expect("request");
        self.send(request).await
    }

    /// A 2026-07-28 stateless `tools/call`: the result, or the JSON-RPC error.
    async fn call(&self, tool: &str, arguments: Value) -> Value {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "replicas-test", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}}}});
        let request = Request::post("/mcp")
            .header("host", &self.addr)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("request");
        let (status, text) = self.send(request).await;
        assert_eq!(status, 200, "{text}");
        // A JSON body, or an event stream whose data line holds the response.
        let json = text
            .lines()
            .find_map(|l| l.strip_prefix("data:"))
            .unwrap_or(&text)
            .trim();
        let response: Value = serde_json::from_str(json).expect("JSON-RPC response");
        response
            .get("result")
            .or_else(|| response.get("error"))
            .cloned()
            .unwrap_or(response)
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> (u16, String) {
        let stream = TcpStream::connect(&self.addr).await.expect("connect");
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("HTTP/1.1 handshake");
        tokio::spawn(connection);
        let response = sender.send_request(request).await.expect("send");
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }
}

fn text_of(result: &Value) -> String {
    result.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_state_through_postgres_and_survive_its_outage() {
    tokio::time::timeout(Duration::from_secs(240), run())
        .await
        .expect("the test finishes within four minutes");
}

async fn run() {
    let pg = tokio::task::spawn_blocking(Postgres::start)
        .await
        .expect("start PostgreSQL");
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut a = Replica::start(dir_a.path(), &pg).await;
    let b = Replica::start(dir_b.path(), &pg).await;

    // Written through A, acknowledged, then A is killed: B finds it.
    let wrote = a
        .call(
            "memory_write",
            json!({"content": "the replicamarker fact\n", "target": "shared.md"}),
        )
        .await;
    assert_eq!(wrote["isError"], false, "{wrote}");
    a.child.start_kill().expect("SIGKILL A");
    a.child.wait().await.expect("A exits");
    let found = b
        .call("memory_search", json!({"query": "replicamarker"}))
        .await;
    assert!(text_of(&found).contains("replicamarker"), "{found}");

    // Probes need no token.
    assert_eq!(b.get("/healthz").await.0, 200);
    let (status, body) = b.get("/readyz").await;
    assert_eq!(status, 200, "{body}");

    // The database goes away: calls needing state fail naming it, echo works, not ready.
    tokio::task::block_in_place(|| pg.halt());
    let failed = b
        .call("memory_search", json!({"query": "replicamarker"}))
        .await;
    // A database fault is the operator's, not the tool's: a JSON-RPC error, not a tool result.
    let text = text_of(&failed);
    assert_eq!(failed["code"], -32603, "{failed}");
    assert!(text.contains("host fault"), "{failed}");
    assert!(text.contains("state database"), "{failed}");
    assert!(text.contains("cannot be reached"), "{failed}");
    let echoed = b.call("echo", json!({"message": "still here"})).await;
    assert_eq!(echoed["isError"], false, "{echoed}");
    let (status, body) = b.get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("state database"), "{body}");

    // It comes back: readiness and state calls recover without a restart.
    tokio::task::block_in_place(|| pg.resume());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = b.get("/readyz").await;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "not ready again: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let found = b
        .call("memory_search", json!({"query": "replicamarker"}))
        .await;
    assert!(text_of(&found).contains("replicamarker"), "{found}");
}
