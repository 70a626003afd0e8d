//! Crash safety of the kv capability: a real `chitin serve` takes memory writes over MCP, is
//! killed with SIGKILL mid-stream, and a fresh process finds every write it had acknowledged.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use chitin_e2e::{built_dir, chitin, stderr, stdout};
use serde_json::{Value, json};

/// Writes acknowledged before the kill.
const ACKED_BEFORE_KILL: usize = 40;
/// Most writes sent; the sender paces itself so writes are still arriving at the kill.
const MAX_SENT: usize = 5000;
/// Pause between sent writes.
const PACE: Duration = Duration::from_millis(2);
/// How long the whole exchange may take.
const DEADLINE: Duration = Duration::from_secs(120);

fn send(stdin: &mut ChildStdin, message: &Value) -> std::io::Result<()> {
    writeln!(stdin, "{message}")?;
    stdin.flush()
}

/// Starts `chitin serve` and completes the MCP handshake; the server and its response lines.
fn serve(data: &std::path::Path) -> (Child, mpsc::Receiver<Value>) {
    let mut child = chitin(data, &[built_dir("components").join("memory.wasm")])
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
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
    let stdin = child.stdin.as_mut().expect("stdin");
    send(
        stdin,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "crash-test", "version": "0"}}}),
    )
    .expect("initialize");
    let init = responses
        .recv_timeout(DEADLINE)
        .expect("initialize response");
    assert_eq!(init["id"], 0, "{init}");
    send(
        stdin,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .expect("initialized");
    (child, responses)
}

#[test]
fn every_acknowledged_write_survives_sigkill() {
    let data = tempfile::tempdir().expect("tempdir");
    let (mut child, responses) = serve(data.path());
    let mut stdin = child.stdin.take().expect("stdin");
    // Send from another thread, so writes keep arriving when the kill lands.
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = sent.clone();
    let sender = std::thread::spawn(move || {
        for i in 1..=MAX_SENT {
            let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                "name": "memory_write",
                "arguments": {"content": format!("write {i:04}\n"), "target": "crash.md"}}});
            if send(&mut stdin, &call).is_err() {
                break;
            }
            counter.store(i, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(PACE);
        }
    });
    let start = Instant::now();
    let mut acked = BTreeSet::new();
    while acked.len() < ACKED_BEFORE_KILL {
        let left = DEADLINE.saturating_sub(start.elapsed());
        let response = responses
            .recv_timeout(left)
            .expect("a response before the deadline");
        let id = response["id"].as_u64().expect("response id");
        assert_eq!(response["result"]["isError"], false, "{response}");
        acked.insert(id);
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let _ = sender.join();
    // Responses already written before the kill are acknowledgements too.
    while let Ok(response) = responses.try_recv() {
        if response["result"]["isError"] == false {
            acked.insert(response["id"].as_u64().expect("id"));
        }
    }
    let sent = sent.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        sent < MAX_SENT,
        "the sender finished before the kill; the test proves nothing"
    );

    let out = chitin(data.path(), &[built_dir("components").join("memory.wasm")])
        .args(["call", "memory_read", r#"{"path": "crash.md"}"#])
        .output()
        .expect("run chitin call");
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let content = doc["content"].as_str().expect("content");
    eprintln!(
        "sent {sent}, acknowledged {}, found {} after the kill",
        acked.len(),
        doc["entries"]
    );
    for id in &acked {
        assert!(
            content.contains(&format!("write {id:04}\n")),
            "acknowledged write {id} lost after SIGKILL"
        );
    }
}
