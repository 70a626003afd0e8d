//! Many chitin processes on one data directory: servers killed with SIGKILL at random moments
//! (often while they hold the database lock) lose no acknowledged write and block no one, and
//! a component's key-value quota holds across processes without half-writing.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use chitin_e2e::{built_dir, chitin, stderr, stdout};
use serde_json::{Value, json};

/// Servers writing at once.
const WRITERS: usize = 4;
/// Servers each writer starts (and kills) in turn.
const LIVES: usize = 4;
/// Longest wait for any one response; a process waiting longer has hung.
const RESPONSE_WAIT: Duration = Duration::from_secs(30);

fn memory() -> PathBuf {
    built_dir("components").join("memory.wasm")
}

/// A `chitin serve` on stdio after the MCP handshake.
struct Server {
    child: Child,
    stdin: ChildStdin,
    responses: mpsc::Receiver<Value>,
}

impl Server {
    fn start(data: &Path, policy: Option<&Path>) -> Self {
        let mut cmd = chitin(data, &[memory()]);
        if let Some(policy) = policy {
            cmd.arg("--policy").arg(policy);
        }
        let mut child = cmd
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
        let stdin = child.stdin.take().expect("stdin");
        let mut server = Self {
            child,
            stdin,
            responses,
        };
        server.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "shared-state-test", "version": "0"}}}),
        );
        let init = server.recv();
        assert_eq!(init["id"], 0, "{init}");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("send");
        self.stdin.flush().expect("flush");
    }

    /// The next response (notifications are skipped).
    fn recv(&self) -> Value {
        loop {
            let message = self
                .responses
                .recv_timeout(RESPONSE_WAIT)
                .expect("a response in time: no process may hang");
            if message.get("id").is_some() {
                return message;
            }
        }
    }

    fn write(&mut self, id: u64, target: &str, content: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "memory_write", "arguments": {"content": content, "target": target}}}),
        );
    }

    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }
}

/// A small deterministic generator (xorshift), seeded per writer, so a failure can be replayed.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One writer: `LIVES` servers in turn, each acknowledging a random number of writes, then
/// killed with a write in flight after a random pause of 0–4 ms (mostly while it commits, so
/// holding the lock). Returns the contents acknowledged.
fn writer(data: &Path, w: usize) -> BTreeSet<String> {
    let mut dice = Dice(0x9E37_79B9_7F4A_7C15 ^ ((w as u64 + 1) * 0x1000_0001));
    let target = format!("w{w}.md");
    let mut acked = BTreeSet::new();
    let mut id = 1u64;
    for life in 0..LIVES {
        let mut server = Server::start(data, None);
        for _ in 0..(3 + dice.below(12)) {
            let content = format!("w{w} life{life} write{id}\n");
            server.write(id, &target, &content);
            let response = server.recv();
            assert_eq!(response["id"], id, "{response}");
            assert_eq!(response["result"]["isError"], false, "{response}");
            acked.insert(content);
            id += 1;
        }
        server.write(id, &target, &format!("w{w} life{life} in flight\n"));
        id += 1;
        std::thread::sleep(Duration::from_micros(dice.below(4000)));
        server.kill();
    }
    acked
}

fn read(data: &Path, path: &str) -> String {
    let out = chitin(data, &[memory()])
        .args(["call", "memory_read", &json!({ "path": path }).to_string()])
        .output()
        .expect("run chitin call");
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    doc["content"].as_str().expect("content").to_owned()
}

#[test]
fn four_writers_killed_at_random_lose_no_acknowledged_write_and_never_hang() {
    let data = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let dir = data.path().to_owned();
            std::thread::spawn(move || writer(&dir, w))
        })
        .collect();
    let acked: Vec<BTreeSet<String>> = writers
        .into_iter()
        .map(|t| t.join().expect("writer"))
        .collect();
    eprintln!(
        "{} writers x {LIVES} lives: {} acknowledged writes in {:?}",
        WRITERS,
        acked.iter().map(BTreeSet::len).sum::<usize>(),
        started.elapsed()
    );
    for (w, writes) in acked.iter().enumerate() {
        let content = read(data.path(), &format!("w{w}.md"));
        for write in writes {
            assert!(
                content.contains(write.as_str()),
                "acknowledged `{write}` lost"
            );
        }
    }
}

#[test]
fn a_full_quota_refuses_the_write_whole_and_keeps_earlier_data() {
    let data = tempfile::tempdir().expect("tempdir");
    let policy = data.path().join("policy.toml");
    let text = std::fs::read_to_string(chitin_e2e::repo().join("policies/default.toml"))
        .expect("default policy");
    assert!(
        text.contains("max_bytes = 67108864"),
        "the default policy sets the kv ceiling"
    );
    std::fs::write(
        &policy,
        text.replace("max_bytes = 67108864", "max_bytes = 4096"),
    )
    .expect("policy");
    let call = |args: Value| {
        chitin(data.path(), &[memory()])
            .arg("--policy")
            .arg(&policy)
            .args(["call", "memory_write", &args.to_string()])
            .output()
            .expect("run chitin call")
    };
    let mut kept = Vec::new();
    let refusal = loop {
        let line = format!("note {:03} {}\n", kept.len(), "x".repeat(200));
        let out = call(json!({"content": line, "target": "notes.md"}));
        if !out.status.success() {
            // A refusal (exit 4), not a failing service (exit 5).
            assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
            break format!("{}{}", stdout(&out), stderr(&out));
        }
        kept.push(line);
        assert!(kept.len() < 100, "4096 bytes never filled");
    };
    assert!(refusal.contains("permission denied"), "{refusal}");
    assert!(!kept.is_empty(), "the first write fits: {refusal}");
    assert!(refusal.contains("quota of 4096 bytes"), "{refusal}");
    assert!(refusal.contains("nothing was written"), "{refusal}");
    // A server started afterwards (another process) reads everything written before.
    let mut server = Server::start(data.path(), Some(&policy));
    server.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "memory_read", "arguments": {"path": "notes.md"}}}),
    );
    let response = server.recv();
    let content = response["result"]["structuredContent"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("{response}"));
    for line in &kept {
        assert!(content.contains(line.as_str()), "lost `{line}`");
    }
    assert_eq!(
        response["result"]["structuredContent"]["entries"],
        kept.len(),
        "the refused write left no entry"
    );
    server.kill();
}

#[test]
fn a_broken_database_fails_only_the_calls_that_need_it() {
    let data = tempfile::tempdir().expect("tempdir");
    let db = data.path().join("chitin.db");
    std::fs::write(
        &db,
        b"not a database: a half-copied backup, say".repeat(100),
    )
    .expect("write");
    let all = || chitin(data.path(), &[built_dir("components")]);
    let echo = all()
        .args(["call", "echo", r#"{"message": "still here"}"#])
        .output()
        .expect("run chitin call");
    assert!(echo.status.success(), "{}", stderr(&echo));
    assert!(stdout(&echo).contains("still here"));
    let list = all().arg("list").output().expect("run chitin list");
    assert!(list.status.success(), "{}", stderr(&list));
    assert!(stdout(&list).contains("memory_write"));
    let write = all()
        .args([
            "call",
            "memory_write",
            r#"{"content": "x", "target": "a.md"}"#,
        ])
        .output()
        .expect("run chitin call");
    // A host fault: exit 1, not a tool failure.
    assert_eq!(write.status.code(), Some(1), "{}", stderr(&write));
    let text = format!("{}{}", stdout(&write), stderr(&write));
    assert!(text.contains(&db.display().to_string()), "{text}");
    assert!(text.contains("move it aside"), "{text}");
    // A server starts and answers; only the memory call fails, with a JSON-RPC error.
    let mut server = Server::start(data.path(), None);
    server.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "memory_read", "arguments": {"path": "a.md"}}}),
    );
    let response = server.recv();
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("host fault: "), "{response}");
    assert!(message.contains("move it aside"), "{response}");
    server.kill();
}
