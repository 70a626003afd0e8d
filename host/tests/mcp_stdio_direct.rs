//! `chitin serve` on stdio answers a plain `tools/call` of an initialized session without
//! rmcp's per-request machinery (`mcp/stdio.rs`); progress still reaches the client before the
//! result, a cancellation still stops the call, a line over the cap is refused, and the
//! session carries on. Real server process, real pipes.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout, Command};

/// A session with `chitin serve` over its stdin and stdout.
struct Session {
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Session {
    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to the server");
    }

    /// The next message from the server.
    async fn next(&mut self) -> Value {
        let line = self
            .stdout
            .next_line()
            .await
            .expect("read from the server")
            .expect("the server closed stdout");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Messages up to and including the answer to request `id`.
    async fn until_answer(&mut self, id: u64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next().await;
            let done = message["id"] == json!(id) && message.get("method").is_none();
            seen.push(message);
            if done {
                return seen;
            }
        }
    }
}

fn call(id: u64, tool: &str, arguments: Value, meta: Option<Value>) -> Value {
    let mut params = json!({"name": tool, "arguments": arguments});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

#[tokio::test]
async fn plain_calls_answer_report_progress_and_cancel() {
    tokio::time::timeout(Duration::from_secs(90), run())
        .await
        .expect("the test finishes within 90 s");
}

async fn run() {
    let data = tempfile::tempdir().expect("data dir");
    let workspace = data.path().join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let mut server = Command::new(env!("CARGO_BIN_EXE_chitin"))
        .arg("serve")
        .arg("--no-watch")
        .arg("--components")
        .arg(common::component("echo"))
        .arg("--components")
        .arg(common::fixture("test-hostile"))
        .arg("--components")
        .arg(common::fixture("test-conformance"))
        .env("CHITIN_DATA_DIR", data.path())
        .env("CHITIN_CACHE_DIR", common::shared_cache())
        .env("CHITIN_WORKSPACE", &workspace)
        .env(
            "CHITIN_TRUSTED_KEYS",
            common::repo().join("build/trusted_keys"),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn chitin serve");
    let mut session = Session {
        stdin: server.stdin.take().expect("stdin"),
        stdout: BufReader::new(server.stdout.take().expect("stdout")).lines(),
    };
    session
        .send(json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "stdio-direct-test", "version": "0"}
            }
        }))
        .await;
    let initialized = session.until_answer(0).await;
    assert!(
        initialized.last().expect("answer")["result"]["serverInfo"]["name"] == "chitin",
        "{initialized:?}"
    );
    session
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    // A plain call.
    session
        .send(call(1, "echo", json!({"message": "hello"}), None))
        .await;
    let answer = session.until_answer(1).await.pop().expect("answer");
    assert_eq!(
        answer["result"]["structuredContent"]["message"], "hello",
        "{answer}"
    );

    // Progress reaches the client before the result.
    session
        .send(call(
            2,
            "test_tool_with_progress",
            json!({}),
            Some(json!({"progressToken": "p-2"})),
        ))
        .await;
    let seen = session.until_answer(2).await;
    let (answer, before) = seen.split_last().expect("answer");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let progress: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(
        !progress.is_empty(),
        "no progress before the result: {seen:?}"
    );
    assert!(
        progress
            .iter()
            .all(|m| m["params"]["progressToken"] == "p-2"),
        "{progress:?}"
    );

    // A cancelled call stops within a second (it would spin for seconds until its fuel ran
    // out), and the session carries on.
    session.send(call(3, "spin", json!({}), None)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancelled_at = Instant::now();
    session
        .send(json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 3, "reason": "the test cancels it"}
        }))
        .await;
    let answer = session.until_answer(3).await.pop().expect("answer");
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(1),
        "the cancelled call ran on for {:?}",
        cancelled_at.elapsed()
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cancelled")),
        "{answer}"
    );
    session
        .send(call(4, "echo", json!({"message": "after"}), None))
        .await;
    let answer = session.until_answer(4).await.pop().expect("answer");
    assert_eq!(
        answer["result"]["structuredContent"]["message"], "after",
        "{answer}"
    );

    // A message over the cap on a line is answered with an error naming the cap, by its id,
    // without the server holding it; the session carries on.
    let huge = "z".repeat(2 * 1024 * 1024);
    session
        .send(call(5, "echo", json!({"message": huge}), None))
        .await;
    let answer = session.until_answer(5).await.pop().expect("answer");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("over 1048576 bytes")),
        "{answer}"
    );
    session
        .send(call(6, "echo", json!({"message": "still here"}), None))
        .await;
    let answer = session.until_answer(6).await.pop().expect("answer");
    assert_eq!(
        answer["result"]["structuredContent"]["message"], "still here",
        "{answer}"
    );

    // A line that is not JSON, whose start shows a request id, is answered with a parse error
    // by that id (a trailing comma; arguments nested deeper than JSON parsers go): its client
    // is not left waiting. One with no id is skipped. The session carries on.
    let deep = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"message\":{}1{}}}}}}}\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    for (id, line) in [
        (
            7,
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",}\n".to_owned(),
        ),
        (8, deep),
    ] {
        session
            .stdin
            .write_all(format!("hello, not JSON\n{line}").as_bytes())
            .await
            .expect("write to the server");
        let answer = session.until_answer(id).await.pop().expect("answer");
        assert_eq!(answer["error"]["code"], -32700, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("not valid JSON")),
            "{answer}"
        );
    }
    // A tools/call whose params are not a call's is told what is wrong (not "method not
    // found" for a method the server serves).
    session
        .send(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "echo", "arguments": [1]}}))
        .await;
    let answer = session.until_answer(10).await.pop().expect("answer");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("invalid tools/call params")),
        "{answer}"
    );
    session
        .send(call(9, "echo", json!({"message": "and still"}), None))
        .await;
    let answer = session.until_answer(9).await.pop().expect("answer");
    assert_eq!(
        answer["result"]["structuredContent"]["message"], "and still",
        "{answer}"
    );

    // Closing stdin ends the server.
    drop(session);
    let status = tokio::time::timeout(Duration::from_secs(10), server.wait())
        .await
        .expect("the server exits once stdin closes")
        .expect("wait");
    assert!(status.success(), "{status}");
}
