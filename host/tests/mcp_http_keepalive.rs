//! `chitin serve --http` answers kept-alive connections without waiting on a delayed ACK: a
//! response written in more than one segment on a socket without `TCP_NODELAY` stalls ~40 ms on
//! every call after the first. Real server process, one real loopback connection.

use crate::common;

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Calls timed on the one connection.
const CALLS: usize = 20;
/// A correctness bound, not a speed goal: far above a normal call, far below 40 ms stalls.
const MEDIAN_BOUND: Duration = Duration::from_millis(20);

/// A 2026-07-28 stateless `tools/call` of echo.
fn echo_call(id: usize) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {
            "name": "echo",
            "arguments": {"message": "hello"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "keepalive-test", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    })
    .to_string()
}

#[tokio::test]
async fn calls_on_one_kept_alive_connection_never_wait_for_a_delayed_ack() {
    tokio::time::timeout(Duration::from_secs(60), run())
        .await
        .expect("the test finishes within a minute");
}

async fn run() {
    let server = common::serve_http(&[common::component("echo")]).await;
    let (addr, token) = (server.addr.as_str(), server.token.as_str());

    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP/1.1 handshake");
    tokio::spawn(connection);

    let mut times = Vec::with_capacity(CALLS);
    // The first call is not timed: it may compile or warm caches.
    for id in 0..=CALLS {
        let request = Request::post("/mcp")
            .header("host", addr)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "echo")
            .body(Full::new(Bytes::from(echo_call(id))))
            .expect("request");
        let started = Instant::now();
        sender.ready().await.expect("the connection stays open");
        let response = sender
            .send_request(request)
            .await
            .expect("send on the kept-alive connection");
        let status = response.status();
        let content_type = response.headers().get("content-type").cloned();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let took = started.elapsed();
        let body = String::from_utf8_lossy(&body);
        assert!(status.is_success(), "{status}: {body}");
        // A call that sends nothing before its result is answered as plain JSON, not an
        // event stream.
        assert_eq!(
            content_type.as_ref().and_then(|v| v.to_str().ok()),
            Some("application/json"),
            "{body}"
        );
        assert!(
            body.contains(r#"\"message\":\"hello\""#) || body.contains(r#""message":"hello""#),
            "{body}"
        );
        if id > 0 {
            times.push(took);
        }
    }
    times.sort();
    let median = times[CALLS / 2];
    assert!(
        median < MEDIAN_BOUND,
        "median of {CALLS} calls on one kept-alive connection is {median:?} (bound {MEDIAN_BOUND:?}); \
         all: {times:?}"
    );
}
