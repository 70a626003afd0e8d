//! `chitin serve --http` answers a plain stateless `tools/call` without rmcp's per-request
//! service (`mcp/direct.rs`). The same requests with an allowed `Origin` header go through
//! rmcp instead: both answers must be the same. Real server process, real loopback connection.

use crate::common;

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

/// A 2026-07-28 stateless `tools/call` with `id`.
fn call(id: Value, tool: &str, arguments: Value) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "direct-test", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    })
    .to_string()
}

/// How a test request is sent.
#[derive(Clone, Copy)]
enum Sent<'a> {
    /// With the bearer token and no `Origin`: the direct path takes it.
    Plain,
    /// With the bearer token and this allowed `Origin`, which sends it through rmcp.
    From(&'a str),
    /// Without the bearer token.
    Anonymous,
}

/// The status, content type and body of one request of `method` to `path` with `body`, its
/// headers those of a call of `tool`, sent as `sent`.
async fn exchange(
    sender: &mut SendRequest<Full<Bytes>>,
    server: &common::HttpServer,
    (method, path): (&str, &str),
    tool: &str,
    body: String,
    sent: Sent<'_>,
) -> (u16, String, Bytes) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", &server.addr)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool);
    if let Sent::From(origin) = sent {
        request = request.header("origin", origin);
    }
    if !matches!(sent, Sent::Anonymous) {
        request = request.header("authorization", format!("Bearer {}", server.token));
    }
    let request = request.body(Full::new(Bytes::from(body))).expect("request");
    sender.ready().await.expect("the connection stays open");
    let response = sender.send_request(request).await.expect("send");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, content_type, bytes)
}

/// The status, content type and JSON body of one POST of `body` naming `tool`, sent as `sent`.
async fn post(
    sender: &mut SendRequest<Full<Bytes>>,
    server: &common::HttpServer,
    tool: &str,
    body: String,
    sent: Sent<'_>,
) -> (u16, String, Value) {
    let (status, content_type, bytes) =
        exchange(sender, server, ("POST", "/mcp"), tool, body, sent).await;
    let json = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, content_type, json)
}

/// `value` without the keys that differ between two answers to the same request (the sealed
/// request state of an input-required result).
fn comparable(mut value: Value) -> Value {
    if let Some(result) = value.get_mut("result").and_then(Value::as_object_mut) {
        result.remove("requestState");
    }
    value
}

/// The status and body of a request of `method` to `path`, with the bearer token if `token`
/// and a qualifying call of echo as its body if `body`.
async fn send(
    sender: &mut SendRequest<Full<Bytes>>,
    server: &common::HttpServer,
    method: &str,
    path: &str,
    token: bool,
    body: Option<String>,
) -> (u16, String) {
    let sent = if token { Sent::Plain } else { Sent::Anonymous };
    let body = body.unwrap_or_default();
    let (status, _, bytes) = exchange(sender, server, (method, path), "echo", body, sent).await;
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn only_the_probes_are_open_and_only_the_mcp_path_answers_calls() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let server = common::serve_http(&[common::component("echo")]).await;
        let stream = TcpStream::connect(&server.addr).await.expect("connect");
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("HTTP/1.1 handshake");
        tokio::spawn(connection);
        let echo = || Some(call(json!(1), "echo", json!({"message": "hello"})));

        // The probes answer without a token.
        let (status, body) = send(&mut sender, &server, "GET", "/healthz", false, None).await;
        assert_eq!((status, body.as_str()), (200, "ok\n"));
        let (status, body) = send(&mut sender, &server, "GET", "/readyz", false, None).await;
        assert_eq!(status, 200, "{body}");
        // Every other path wants the token, whether it is served or not, and before the
        // request is looked at any further.
        for (method, path) in [
            ("POST", "/mcp"),
            ("POST", "/mcp/"),
            ("POST", "/healthz/"),
            ("GET", "/nothing-here"),
            ("POST", "/.well-known/oauth-protected-resource"),
        ] {
            let (status, body) = send(&mut sender, &server, method, path, false, echo()).await;
            assert_eq!(status, 401, "{method} {path}: {body}");
            assert!(
                body.contains("missing bearer token"),
                "{method} {path}: {body}"
            );
        }
        // With it, a call is answered on the MCP path and nowhere else.
        let (status, body) = send(&mut sender, &server, "POST", "/mcp", true, echo()).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("hello"), "{body}");
        for path in ["/mcp/", "/MCP", "/mcp/x", "/healthz"] {
            let (status, body) = send(&mut sender, &server, "POST", path, true, echo()).await;
            assert!(
                status == 404 || status == 405,
                "POST {path} with a call: {status} {body}"
            );
            assert!(!body.contains("hello"), "POST {path} ran the call: {body}");
        }
    })
    .await
    .expect("the test finishes within 60 s");
}

#[tokio::test]
async fn a_direct_answer_is_the_answer_rmcp_gives() {
    tokio::time::timeout(Duration::from_secs(90), run())
        .await
        .expect("the test finishes within 90 s");
}

async fn run() {
    let server = common::serve_http(&[
        common::component("echo"),
        common::component("fs"),
        common::component("shell"),
    ])
    .await;
    let stream = TcpStream::connect(&server.addr).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP/1.1 handshake");
    tokio::spawn(connection);
    let origin = format!("http://{}", server.addr);

    let cases = [
        ("echo", json!(1), json!({"message": "hello"})),
        (
            "echo",
            json!("a-string-id"),
            json!({"message": "ünïcode \" and \\ escapes"}),
        ),
        // Invalid arguments: a tool error the model reads.
        ("echo", json!(3), json!({})),
        ("echo", json!(4), json!({"message": 5})),
        // A file that is not there: a tool error naming it.
        ("read_file", json!(5), json!({"path": "not-there.txt"})),
        // A tool that is not served.
        ("no_such_tool", json!(6), json!({})),
        // A tool that asks for approval: an input-required result.
        ("shell", json!(7), json!({"command": "true"})),
    ];
    for (tool, id, arguments) in cases {
        let body = call(id.clone(), tool, arguments.clone());
        let direct = post(&mut sender, &server, tool, body.clone(), Sent::Plain).await;
        let through_rmcp = post(&mut sender, &server, tool, body, Sent::From(&origin)).await;
        assert_eq!(direct.0, through_rmcp.0, "status of {tool} {arguments}");
        assert_eq!(
            direct.1, through_rmcp.1,
            "content type of {tool} {arguments}"
        );
        assert_eq!(direct.2["id"], id, "{tool}: {}", direct.2);
        assert_eq!(
            comparable(direct.2.clone()),
            comparable(through_rmcp.2.clone()),
            "{tool} {arguments}"
        );
    }

    // A request the direct path does not take is still refused by rmcp: an `Mcp-Name` that
    // contradicts the body.
    let (status, _, body) = post(
        &mut sender,
        &server,
        "read_file",
        call(json!(8), "echo", json!({"message": "x"})),
        Sent::Plain,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32020, "{body}");

    // The direct path is behind the bearer token: a call that would qualify, without it, is
    // refused before any tool runs.
    let (status, _, body) = post(
        &mut sender,
        &server,
        "echo",
        call(json!(9), "echo", json!({"message": "x"})),
        Sent::Anonymous,
    )
    .await;
    assert_eq!(status, 401, "{body}");
}
