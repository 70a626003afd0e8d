//! `chitin serve --http` against peers that hold connections without finishing a request: a
//! connection that sends nothing, trickles its headers or idles after an answer is closed at
//! the header deadline, and one address cannot hold more than its share of connections, so it
//! cannot take every file descriptor of the server. Real server process, real loopback sockets.

use crate::common;

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// The header deadline the server is started with, in seconds.
const HEADER_TIMEOUT_SECS: u64 = 1;
/// Far above the deadline: a connection still open after this was never going to be closed.
const CLOSED_WITHIN: Duration = Duration::from_secs(10);

/// Read until the server closes `stream`; what it sent, or `None` when it is still open after
/// [`CLOSED_WITHIN`].
async fn closed_by_server(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(CLOSED_WITHIN, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok().map(|()| got)
}

/// A GET of `/healthz` on `stream`, answered `200`.
async fn healthz(stream: &mut TcpStream, addr: &str) -> bool {
    let request = format!("GET /healthz HTTP/1.1\r\nhost: {addr}\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut buf = [0u8; 256];
    match tokio::time::timeout(CLOSED_WITHIN, stream.read(&mut buf)).await {
        Ok(Ok(n)) => buf[..n].starts_with(b"HTTP/1.1 200"),
        _ => false,
    }
}

#[tokio::test]
async fn connections_that_never_finish_their_headers_are_closed_at_the_deadline() {
    let timeout = HEADER_TIMEOUT_SECS.to_string();
    let server = common::serve_http_with(
        &[common::component("echo")],
        &["--header-timeout", &timeout],
    )
    .await;
    let addr = server.addr.as_str();
    let started = Instant::now();
    // Sends nothing at all.
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    // Sends part of its headers and stops (slowloris).
    let mut partial = TcpStream::connect(addr).await.expect("connect");
    partial
        .write_all(format!("POST /mcp HTTP/1.1\r\nhost: {addr}\r\nx-slow: ").as_bytes())
        .await
        .expect("write");
    // Is answered once, then keeps the connection idle.
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    assert!(healthz(&mut idle, addr).await, "the probe is answered");
    for (name, stream) in [
        ("silent", &mut silent),
        ("partial", &mut partial),
        ("idle", &mut idle),
    ] {
        assert!(
            closed_by_server(stream).await.is_some(),
            "the {name} connection is still open {:?} after it was made",
            started.elapsed()
        );
    }
    // The server still serves.
    let mut next = TcpStream::connect(addr).await.expect("connect");
    assert!(healthz(&mut next, addr).await, "the server still answers");
}

#[tokio::test]
async fn one_address_cannot_hold_every_connection() {
    const MOST: usize = 8;
    let most = MOST.to_string();
    let server = common::serve_http_with(
        &[common::component("echo")],
        &["--max-connections-per-client", &most],
    )
    .await;
    let addr = server.addr.as_str();
    // The flood comes from this user, from one loopback address and then others: every
    // loopback address is this machine, one client for each user.
    let from = |source: &str| {
        let socket = TcpSocket::new_v4().expect("socket");
        socket
            .bind(format!("{source}:0").parse().expect("addr"))
            .expect("bind a loopback source address");
        socket
    };
    let target: std::net::SocketAddr = addr.parse().expect("the server's address");
    let mut held = Vec::new();
    for _ in 0..MOST {
        held.push(from("127.0.0.2").connect(target).await.expect("connect"));
    }
    // Held connections are all served: each is answered.
    for stream in &mut held {
        assert!(
            healthz(stream, addr).await,
            "a connection within the bound is served"
        );
    }
    for source in ["127.0.0.2", "127.0.0.3", "127.0.0.1"] {
        let mut over = from(source).connect(target).await.expect("connect");
        let told = closed_by_server(&mut over)
            .await
            .unwrap_or_else(|| panic!("the connection over the bound from {source} is closed"));
        let told = String::from_utf8_lossy(&told);
        assert!(
            told.starts_with("HTTP/1.1 503") && told.contains("--max-connections-per-client"),
            "the refusal says why and what to do: {told:?}"
        );
    }
    // Another user of the machine is still served while this one holds its most.
    match common::connect_as_another_user(addr) {
        Some(mut other) => assert!(healthz(&mut other, addr).await, "another client is served"),
        None => eprintln!("not root: another user's socket was not made"),
    }
    // A connection closed gives its slot back.
    drop(held.pop());
    let answered = async {
        loop {
            let mut again = from("127.0.0.4").connect(target).await.expect("connect");
            if healthz(&mut again, addr).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(CLOSED_WITHIN, answered)
        .await
        .expect("a closed connection's slot is given back");
}

#[tokio::test]
async fn a_call_that_outlasts_the_header_deadline_is_still_answered() {
    // Calls end at 3 s, well past the 1 s header deadline.
    let policy_dir = tempfile::tempdir().expect("tempdir");
    let policy = policy_dir.path().join("policy.toml");
    let default = std::fs::read_to_string(common::repo().join("policies/default.toml"))
        .expect("the default policy");
    let short = default.replacen("timeout_ms = 30000", "timeout_ms = 3000", 1);
    assert_ne!(short, default, "the default policy names its call timeout");
    std::fs::write(&policy, short).expect("write the policy");
    let timeout = HEADER_TIMEOUT_SECS.to_string();
    let server = common::serve_http_with(
        &[common::fixture("test-hostile")],
        &[
            "--header-timeout",
            &timeout,
            "--policy",
            policy.to_str().expect("utf-8 path"),
        ],
    )
    .await;
    let addr = server.addr.as_str();
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "nap", "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    })
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: nap\r\n\
         content-length: {}\r\n\r\n{body}",
        server.token,
        body.len()
    );
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut buf = vec![0u8; 8192];
    let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf))
        .await
        .expect("answered within 30 s")
        .expect("read");
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("timed out"),
        "the call's own deadline ends it, not the header deadline: {answer:?}"
    );
}
