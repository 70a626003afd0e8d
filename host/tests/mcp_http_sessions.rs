//! `chitin serve --http` bounds the MCP sessions one client keeps open (rmcp keeps a session
//! until it has idled five minutes, and one client starting sessions at its request rate held
//! gigabytes), and a session answers only the client that began it. Real server process, real
//! loopback sockets.

use crate::common;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sessions one client may keep open (`chitin_host::mcp::sessions::MAX_PER_CLIENT`).
const MOST: usize = chitin_host::mcp::sessions::MAX_PER_CLIENT;

/// Send one request on a fresh connection and read the whole answer (the server closes it).
async fn exchange(addr: &str, request: String) -> String {
    let stream = TcpStream::connect(addr).await.expect("connect");
    read_answer(stream, request).await
}

/// [`exchange`] from another user of this machine (`nobody`): to the server, another client.
/// `None` where that user's socket cannot be made (not root).
async fn exchange_as_another_user(addr: &str, request: String) -> Option<String> {
    let stream = common::connect_as_another_user(addr)?;
    Some(read_answer(stream, request).await)
}

/// An HTTP answer without its `date` header, which changes from one second to the next.
fn without_date(answer: &str) -> String {
    answer
        .lines()
        .filter(|line| !line.to_ascii_lowercase().starts_with("date:"))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn read_answer(mut stream: TcpStream, request: String) -> String {
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let mut buf = [0u8; 8192];
    // An answer is whole once its head and body have come; SSE answers end with the stream.
    loop {
        let read = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buf)).await;
        match read {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&answer);
        if text.contains("\r\n\r\n") && (text.ends_with("\n\n") || text.ends_with("0\r\n\r\n")) {
            break;
        }
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .and_then(|n| n.trim().parse::<usize>().ok())
            });
            if length.is_some_and(|n| body.len() >= n) {
                break;
            }
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

fn post(addr: &str, token: &str, extra: &str, body: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         connection: close\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// An `initialize` request at protocol `version`.
fn initialize(version: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "sessions-test", "version": "0"}
        }
    })
    .to_string()
}

/// The session id an answer begins, if any.
fn session_of(answer: &str) -> Option<String> {
    let head = answer.split_once("\r\n\r\n")?.0;
    head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    })
}

#[tokio::test]
async fn one_client_cannot_keep_more_than_its_sessions_open() {
    tokio::time::timeout(Duration::from_secs(120), run())
        .await
        .expect("the test finishes within two minutes");
}

async fn run() {
    let server = common::serve_http(&[common::component("echo")]).await;
    let (addr, token) = (server.addr.as_str(), server.token.as_str());
    let initialize = initialize("2025-06-18");
    let mut sessions = Vec::new();
    for _ in 0..MOST {
        let answer = exchange(addr, post(addr, token, "", &initialize)).await;
        let session = session_of(&answer).unwrap_or_else(|| panic!("a session: {answer}"));
        sessions.push(session);
    }
    let over = exchange(addr, post(addr, token, "", &initialize)).await;
    assert!(
        over.starts_with("HTTP/1.1 429") && over.contains("DELETE"),
        "the session over the bound is refused, saying how to end one: {over}"
    );
    assert!(
        session_of(&over).is_none(),
        "no session is handed out: {over}"
    );

    // Stateless calls need no session and are still answered.
    let call = serde_json::json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {
            "name": "echo", "arguments": {"message": "hi"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    })
    .to_string();
    let headers =
        "mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: echo\r\n";
    let answer = exchange(addr, post(addr, token, headers, &call)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // A session ended gives its place back.
    let ended = sessions.pop().expect("a session");
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\
         mcp-session-id: {ended}\r\nmcp-protocol-version: 2025-06-18\r\nconnection: close\r\n\r\n"
    );
    let deleted = exchange(addr, delete).await;
    assert!(deleted.starts_with("HTTP/1.1 2"), "{deleted}");
    let again = exchange(addr, post(addr, token, "", &initialize)).await;
    assert!(session_of(&again).is_some(), "a new session fits: {again}");
}

#[tokio::test]
async fn a_session_answers_only_the_client_that_began_it() {
    tokio::time::timeout(Duration::from_secs(60), stranger())
        .await
        .expect("the test finishes within a minute");
}

async fn stranger() {
    let server = common::serve_http(&[common::component("echo")]).await;
    let (addr, token) = (server.addr.as_str(), server.token.as_str());
    let initialize = initialize("2025-11-25");
    let begun = exchange(addr, post(addr, token, "", &initialize)).await;
    let session = session_of(&begun).unwrap_or_else(|| panic!("a session: {begun}"));
    let on_session = format!("mcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\n");
    let initialized =
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let answer = exchange(addr, post(addr, token, &on_session, &initialized)).await;
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();

    // Another client holding the same token and the id can neither call on the session, nor
    // open its stream of server messages, nor end it: each is answered as an unknown session.
    // A made-up id gets the very same answers, so none of them tells a live session from one
    // that does not exist.
    let made_up = "0123456789abcdef0123456789abcdef";
    let on_made_up = on_session.replace(&session, made_up);
    let requests = |on: &str| {
        [
            ("a call", post(addr, token, on, &list)),
            (
                "the stream",
                format!(
                    "GET /mcp HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\
                     accept: text/event-stream\r\n{on}connection: close\r\n\r\n"
                ),
            ),
            (
                "the end",
                format!(
                    "DELETE /mcp HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\
                     {on}connection: close\r\n\r\n"
                ),
            ),
        ]
    };
    for ((what, live), (_, made_up)) in requests(&on_session).into_iter().zip(requests(&on_made_up))
    {
        let unknown = exchange(addr, made_up.clone()).await;
        assert!(
            unknown.starts_with("HTTP/1.1 404") && unknown.contains("began no session"),
            "{what} on a made-up session: {unknown}"
        );
        let (Some(refused), Some(unknown)) = (
            exchange_as_another_user(addr, live).await,
            exchange_as_another_user(addr, made_up).await,
        ) else {
            eprintln!("not root: another user's socket was not made");
            continue;
        };
        assert!(
            refused.starts_with("HTTP/1.1 404") && refused.contains("began no session"),
            "{what} from another client: {refused}"
        );
        assert_eq!(
            without_date(&refused),
            without_date(&unknown),
            "{what}: another's live session and a made-up one are answered alike"
        );
    }

    // The session is still its own client's.
    let listed = exchange(addr, post(addr, token, &on_session, &list)).await;
    assert!(
        listed.starts_with("HTTP/1.1 200") && listed.contains("\"echo\""),
        "{listed}"
    );
}
