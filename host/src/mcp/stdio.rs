//! MCP over stdio: newline-delimited JSON-RPC between the client's pipes and rmcp's service,
//! with a direct path for plain `tools/call` requests. Once a session has begun with
//! `initialize`, a call without per-request protocol negotiation is answered here, without
//! rmcp's per-request machinery: its parse, its spawned handler, and its hops through channels.
//! The call still runs through the same handler and reaches the client through the session's
//! peer for progress, log messages and mid-call questions. Every other line goes to rmcp as it
//! came, including the client's answers to those questions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use futures::FutureExt;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, RequestId, ServerJsonRpcMessage,
    ServerResult,
};
use rmcp::service::{Peer, ServerInitializeError};
use rmcp::{ErrorData, RoleServer, ServiceExt};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::mcp::McpServer;
use crate::mcp::access::{Access, ClientId};
use crate::mcp::plain_call::PlainCall;
use crate::mcp::server::CallOrigin;

/// The notification that cancels a request.
const CANCELLED: &str = "notifications/cancelled";
/// Room in each in-memory pipe between this front and rmcp's service.
const PIPE_BYTES: usize = 64 * 1024;
/// How long the front keeps looking for the client's next line before the thread sleeps,
/// counted from the last line read or answer written. A thread that slept ran the next call two
/// to three times slower on the VM measured; a client's next request mostly comes within this
/// window (`docs/performance-log.md`, "A thread that slept").
const LOOK_BEFORE_SLEEP: Duration = Duration::from_micros(100);
/// The longest line read from the client, the HTTP front's cap on a request body: a longer
/// one is answered with an error and skipped as it arrives, so a client cannot make the server
/// hold an unbounded line.
const MAX_LINE_BYTES: usize = crate::mcp::http::MAX_BODY_BYTES;
/// How much of a line over the cap is kept to find its request id in.
const ID_PREFIX_BYTES: usize = 4096;

/// Why serving stdio stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    /// The session did not begin.
    #[error("the MCP session did not begin: {0}")]
    Initialize(#[from] Box<ServerInitializeError>),
    /// The session ended abnormally.
    #[error("the MCP session ended abnormally: {0}")]
    Session(#[from] tokio::task::JoinError),
}

/// What a line that is not a call may be, read only as far as this front needs.
#[derive(Deserialize)]
struct Line {
    jsonrpc: Option<String>,
    id: Option<RequestId>,
    method: Option<String>,
}

/// The parameters of `notifications/cancelled`.
#[derive(Deserialize)]
struct Cancelled {
    params: CancelledParams,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelledParams {
    request_id: RequestId,
}

/// What the reader made of the client's next line.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    /// The line is in the buffer, its newline included unless it ended the input; the buffer
    /// is empty at the end of input.
    Line,
    /// The line was over [`MAX_LINE_BYTES`] and was skipped; the buffer is empty. The request
    /// id, when its first bytes held one.
    TooLong(Option<RequestId>),
}

/// The client's pipe, read a line at a time, each line at most [`MAX_LINE_BYTES`].
struct ClientLines<R> {
    reader: BufReader<R>,
    /// The id of the line being skipped, when one is: `Some(None)` for a line without one.
    skipping: Option<Option<RequestId>>,
}

impl<R: AsyncRead + Unpin> ClientLines<R> {
    fn new(reader: R) -> Self {
        Self {
            reader: BufReader::new(reader),
            skipping: None,
        }
    }

    /// Read the rest of the current line into `line`. Cancel-safe: what was read stays in
    /// `line` and `self`, and a later call goes on from there.
    async fn read(&mut self, line: &mut Vec<u8>) -> std::io::Result<Read> {
        loop {
            let buf = self.reader.fill_buf().await?;
            let (taken, ended) = match memchr::memchr(b'\n', buf) {
                Some(at) => (at + 1, true),
                None => (buf.len(), buf.is_empty()),
            };
            if self.skipping.is_none() {
                line.extend_from_slice(&buf[..taken]);
                let content = line.len() - usize::from(line.ends_with(b"\n"));
                if content > MAX_LINE_BYTES {
                    let id = leading_id(&line[..line.len().min(ID_PREFIX_BYTES)]);
                    line.clear();
                    self.skipping = Some(id);
                }
            }
            self.reader.consume(taken);
            if ended {
                return Ok(match self.skipping.take() {
                    Some(id) => Read::TooLong(id),
                    None => Read::Line,
                });
            }
        }
    }
}

/// The request id of a JSON-RPC message from its first bytes: the value of its top-level
/// `"id"` key where that comes within them, a number or a string.
fn leading_id(prefix: &[u8]) -> Option<RequestId> {
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&b) = prefix.get(at) {
        match b {
            b'"' => {
                let end = string_end(prefix, at)?;
                let after = prefix[end..].trim_ascii_start();
                if depth == 1
                    && &prefix[at..end] == b"\"id\""
                    && let Some(value) = after.strip_prefix(b":")
                {
                    let value = value.trim_ascii_start();
                    let len = match value.first()? {
                        b'"' => string_end(value, 0)?,
                        _ => value
                            .iter()
                            .position(|&b| matches!(b, b',' | b'}') || b.is_ascii_whitespace())?,
                    };
                    return serde_json::from_slice(&value[..len]).ok();
                }
                at = end;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            _ => {}
        }
        at += 1;
    }
    None
}

/// The offset just past the end of the JSON string that begins at `start` of `bytes`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    loop {
        match bytes.get(at)? {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
}

/// The client's stdout, written one whole message at a time by rmcp's relay and the direct
/// calls alike.
struct Out<W> {
    writer: tokio::sync::Mutex<W>,
    /// Told of every line written, so the reader looks for the client's next request again.
    answered: Notify,
}

impl<W: AsyncWrite + Unpin> Out<W> {
    /// Write `line` (a message and its newline) whole, in one write where the pipe has room,
    /// then flush.
    async fn line(&self, line: &[u8]) -> std::io::Result<()> {
        let mut writer = self.writer.lock().await;
        writer.write_all(line).await?;
        writer.flush().await?;
        self.answered.notify_one();
        Ok(())
    }
}

/// The direct calls in flight, by request id, each with the token that cancels it.
type InFlight = Arc<Mutex<HashMap<RequestId, CancellationToken>>>;

/// Serve `server` on `reader` and `writer` (the client's pipes) until the client closes them.
/// Returns `Ok(false)` when the client hung up before the session began.
pub async fn serve<R, W>(server: McpServer, reader: R, writer: W) -> Result<bool, StdioError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let out = Arc::new(Out {
        writer: tokio::sync::Mutex::new(writer),
        answered: Notify::new(),
    });
    let (to_rmcp, rmcp_reads) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let peer: Arc<OnceLock<Peer<RoleServer>>> = Arc::default();
    let front = tokio::spawn(read_client(
        server.clone(),
        reader,
        to_rmcp,
        out.clone(),
        peer.clone(),
    ));
    let relay = tokio::spawn(relay(from_rmcp, out));
    let service = match server.serve((rmcp_reads, rmcp_writes)).await {
        Ok(service) => service,
        Err(ServerInitializeError::ConnectionClosed(during)) => {
            tracing::info!(%during, "client closed the connection before initializing");
            front.abort();
            relay.abort();
            return Ok(false);
        }
        Err(e) => {
            front.abort();
            relay.abort();
            return Err(Box::new(e).into());
        }
    };
    // A set cell is never set again; this is the only place it is set.
    let _ = peer.set(service.peer().clone());
    let ended = service.waiting().await;
    front.abort();
    // rmcp's last messages are written before the relay is left behind.
    let _ = relay.await;
    ended?;
    Ok(true)
}

/// Pass rmcp's messages to the client, a line at a time.
async fn relay<W: AsyncWrite + Unpin>(from_rmcp: tokio::io::DuplexStream, out: Arc<Out<W>>) {
    let mut lines = BufReader::new(from_rmcp);
    let mut line = Vec::new();
    loop {
        line.clear();
        match lines.read_until(b'\n', &mut line).await {
            Ok(0) => return,
            Ok(_) => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                if let Err(e) = out.line(&line).await {
                    tracing::debug!(error = %e, "cannot write to the client");
                    return;
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot read rmcp's output");
                return;
            }
        }
    }
}

/// Read the client's lines: answer plain calls directly, catch cancellations of them, and
/// pass everything else to rmcp. Closing rmcp's input when the client closes ends the session.
async fn read_client<R, W>(
    server: McpServer,
    reader: R,
    mut to_rmcp: tokio::io::DuplexStream,
    out: Arc<Out<W>>,
    peer: Arc<OnceLock<Peer<RoleServer>>>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let in_flight: InFlight = Arc::default();
    let mut lines = ClientLines::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        match next_line(&mut lines, &mut line, &out.answered).await {
            Ok(Read::Line) if line.is_empty() => break,
            Ok(Read::Line) => {}
            Ok(Read::TooLong(id)) => {
                tracing::warn!(?id, "a message over {MAX_LINE_BYTES} bytes was skipped");
                if !refuse_too_long(&out, id).await {
                    break;
                }
                continue;
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot read from the client");
                break;
            }
        }
        if let Some(peer) = peer.get()
            && taken(&server, peer, &line, &out, &in_flight)
        {
            continue;
        }
        // A blank line is nothing; a byte-order mark before a message is allowed, as rmcp
        // allows it.
        let message = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&line);
        if message.trim_ascii().is_empty() {
            continue;
        }
        // Read as rmcp reads it (`IgnoredAny` would pass nesting deeper than rmcp's parser goes).
        if let Err(unparsable) = serde_json::from_slice::<serde_json::Value>(message) {
            if !refuse_unparsable(&out, &line, &unparsable).await {
                break;
            }
            continue;
        }
        if let Some((id, wrong)) = PlainCall::malformed(message) {
            if !refuse(&out, ErrorData::invalid_params(wrong, None), Some(id)).await {
                break;
            }
            continue;
        }
        if let Err(e) = to_rmcp.write_all(&line).await {
            tracing::debug!(error = %e, "rmcp's service stopped reading");
            break;
        }
    }
    // EOF for rmcp: the session ends as it would on the client's own EOF.
    let _ = to_rmcp.shutdown().await;
}

/// Tell the client that a message of its was over [`MAX_LINE_BYTES`] and skipped: an error
/// answering its request where its id was found, else one without an id. Returns whether the
/// client could be written to.
async fn refuse_too_long<W: AsyncWrite + Unpin>(out: &Out<W>, id: Option<RequestId>) -> bool {
    let error = ErrorData::invalid_request(
        format!(
            "the message is over {MAX_LINE_BYTES} bytes, the most one line over stdio may hold; \
             it was skipped unread (send large content as a file in the workspace instead)"
        ),
        None,
    );
    refuse(out, error, id).await
}

/// A line that is not JSON (a syntax error, two messages on one line, nesting deeper than 128):
/// a request whose id its start shows is answered with a parse error, so its client does not
/// wait for ever; a line without one is skipped, as the official SDKs skip it (answering
/// unparsable input can start an echo loop with a peer that is not an MCP client). Returns
/// whether the client could be written to.
async fn refuse_unparsable<W: AsyncWrite + Unpin>(
    out: &Out<W>,
    line: &[u8],
    unparsable: &serde_json::Error,
) -> bool {
    let Some(id) = leading_id(&line[..line.len().min(ID_PREFIX_BYTES)]) else {
        tracing::warn!(error = %unparsable, "a line from the client that is not JSON was skipped");
        return true;
    };
    let error = ErrorData::parse_error(
        format!("the message is not valid JSON ({unparsable}); one JSON-RPC message per line"),
        None,
    );
    refuse(out, error, Some(id)).await
}

/// Send the client `error`, answering request `id` (or none).
async fn refuse<W: AsyncWrite + Unpin>(
    out: &Out<W>,
    error: ErrorData,
    id: Option<RequestId>,
) -> bool {
    let message = ServerJsonRpcMessage::error(error, id);
    let Ok(mut line) = serde_json::to_vec(&message) else {
        return true;
    };
    line.push(b'\n');
    out.line(&line).await.is_ok()
}

/// Read the client's next line into `line` (left empty at the end of input). The reader first
/// looks for it without sleeping, yielding to the call tasks in between, for
/// [`LOOK_BEFORE_SLEEP`] after it began or after an answer went out; only then does the
/// thread sleep until the line or the next answer.
async fn next_line<R: AsyncRead + Unpin>(
    lines: &mut ClientLines<R>,
    line: &mut Vec<u8>,
    answered: &Notify,
) -> std::io::Result<Read> {
    loop {
        let until = Instant::now() + LOOK_BEFORE_SLEEP;
        loop {
            // `read` keeps what it read of a line when dropped unfinished.
            if let Some(read) = lines.read(line).now_or_never() {
                return read;
            }
            if Instant::now() >= until {
                break;
            }
            // Runs the ready tasks and polls the I/O driver without blocking, then comes back.
            tokio::task::yield_now().await;
        }
        tokio::select! {
            read = lines.read(line) => return read,
            () = answered.notified() => {}
        }
    }
}

/// Whether this front took `line`: a plain call it now answers, or the cancellation of one.
/// A call is read once; only other lines are read again for a cancellation.
fn taken<W>(
    server: &McpServer,
    peer: &Peer<RoleServer>,
    line: &[u8],
    out: &Arc<Out<W>>,
    in_flight: &InFlight,
) -> bool
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    if let Some(call) = PlainCall::parse(line) {
        if !plain(peer, &call) {
            return false;
        }
        tracing::trace!(tool = %call.params.name, "a plain call, answered directly");
        start(
            server.clone(),
            peer.clone(),
            call,
            out.clone(),
            in_flight.clone(),
        );
        return true;
    }
    let Ok(head) = serde_json::from_slice::<Line>(line) else {
        return false;
    };
    if head.jsonrpc.as_deref() != Some("2.0")
        || head.method.as_deref() != Some(CANCELLED)
        || head.id.is_some()
    {
        return false;
    }
    let Ok(cancelled) = serde_json::from_slice::<Cancelled>(line) else {
        return false;
    };
    let token = in_flight
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&cancelled.params.request_id);
    token.map(|t| t.cancel()).is_some()
}

/// Whether this front answers `call`: the session began with `initialize` and the call does
/// not negotiate a protocol version of its own (that is rmcp's to judge).
fn plain(peer: &Peer<RoleServer>, call: &PlainCall) -> bool {
    let began_with_initialize = peer
        .peer_info()
        .is_some_and(|info| info.protocol_version.has_initialize());
    began_with_initialize
        && call
            .params
            .meta
            .as_ref()
            .is_none_or(|meta| meta.protocol_version().is_none())
}

/// Run `call` on its own task and write its answer; a cancellation drops it.
fn start<W>(
    server: McpServer,
    peer: Peer<RoleServer>,
    call: PlainCall,
    out: Arc<Out<W>>,
    in_flight: InFlight,
) where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let cancelled = CancellationToken::new();
    in_flight
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(call.id.clone(), cancelled.clone());
    // Boxed: the call's future is large, and a task is moved into its cell when spawned.
    tokio::spawn(Box::pin(async move {
        let id = call.id;
        let message = match answer(&server, &peer, call.params, &cancelled).await {
            Ok(response) => ServerJsonRpcMessage::response(response, id.clone()),
            Err(error) => ServerJsonRpcMessage::error(error, Some(id.clone())),
        };
        in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        match serde_json::to_vec(&message) {
            Ok(mut line) => {
                line.push(b'\n');
                if let Err(e) = out.line(&line).await {
                    tracing::debug!(error = %e, "cannot write a call's answer to the client");
                }
            }
            Err(e) => tracing::error!(error = %e, "cannot write a call's answer"),
        }
    }));
}

/// The answer to one call, as rmcp's service would give it.
async fn answer(
    server: &McpServer,
    peer: &Peer<RoleServer>,
    params: CallToolRequestParams,
    cancelled: &CancellationToken,
) -> Result<ServerResult, ErrorData> {
    let info = peer.peer_info();
    let meta = params.meta.clone().unwrap_or_default();
    let capabilities = meta
        .client_capabilities()
        .or_else(|| info.as_ref().map(|i| i.capabilities.clone()));
    let version = info.as_ref().map(|i| i.protocol_version.clone());
    let declared_tasks = capabilities.as_ref().is_some_and(|c| c.supports_tasks());
    let origin = CallOrigin {
        access: Access::All,
        client: ClientId::own("stdio"),
        capabilities,
        legacy_session: true,
        stdio: true,
        peer: Some(peer),
        progress_token: meta.get_progress_token(),
        min_log: server.min_log_from(&meta, version.as_ref()),
        cancelled,
    };
    let response = server.call(params, origin).await?;
    // SEP-2663, as rmcp enforces it: no task handle for a client that cannot read one.
    if matches!(response, CallToolResponse::Task(_)) && !declared_tasks {
        return Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        ));
    }
    Ok(ServerResult::from(response))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rmcp::model::{NumberOrString, RequestId};
    use tokio::io::{AsyncWriteExt, DuplexStream};
    use tokio::sync::Notify;

    use super::{
        ClientLines, ID_PREFIX_BYTES, LOOK_BEFORE_SLEEP, MAX_LINE_BYTES, Read, leading_id,
        next_line,
    };

    /// A reader of the client's pipe, and the client's end of it.
    fn pipe() -> (ClientLines<DuplexStream>, DuplexStream) {
        let (client, server) = tokio::io::duplex(1024);
        (ClientLines::new(server), client)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_line_over_the_cap_is_skipped_as_it_comes_and_the_next_is_read() {
        let (mut lines, mut client) = pipe();
        let answered = Notify::new();
        let writer = tokio::spawn(async move {
            let mut long = br#"{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{"arguments":{"a":""#.to_vec();
            long.resize(3 * MAX_LINE_BYTES, b'x');
            long.extend_from_slice(b"\"}}}\n");
            client.write_all(&long).await.expect("write");
            // At the cap exactly, the newline aside: read.
            let mut fits = b"{\"id\":7,\"x\":\"".to_vec();
            fits.resize(MAX_LINE_BYTES - 2, b'y');
            fits.extend_from_slice(b"\"}\n");
            client.write_all(&fits).await.expect("write");
            client.write_all(b"{\"id\":8}\n").await.expect("write");
            client
        });
        let mut line = Vec::new();
        let read = next_line(&mut lines, &mut line, &answered)
            .await
            .expect("read");
        assert_eq!(
            read,
            Read::TooLong(Some(NumberOrString::String("big-1".into())))
        );
        assert!(line.is_empty());
        // Never more than the cap and one buffer of the pipe was held.
        assert!(line.capacity() <= 2 * MAX_LINE_BYTES, "{}", line.capacity());
        let read = next_line(&mut lines, &mut line, &answered)
            .await
            .expect("read");
        assert_eq!(read, Read::Line);
        assert_eq!(line.len(), MAX_LINE_BYTES + 1);
        line.clear();
        let read = next_line(&mut lines, &mut line, &answered)
            .await
            .expect("read");
        assert_eq!((read, line.as_slice()), (Read::Line, &b"{\"id\":8}\n"[..]));
        drop(writer.await.expect("writer"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_line_over_the_cap_cut_by_the_end_of_input_is_still_refused() {
        let (mut lines, mut client) = pipe();
        let answered = Notify::new();
        let writer = tokio::spawn(async move {
            client
                .write_all(&vec![b' '; MAX_LINE_BYTES + 10])
                .await
                .expect("write");
        });
        let mut line = Vec::new();
        let read = next_line(&mut lines, &mut line, &answered)
            .await
            .expect("read");
        assert_eq!(read, Read::TooLong(None));
        writer.await.expect("writer");
        let read = next_line(&mut lines, &mut line, &answered)
            .await
            .expect("read");
        assert_eq!((read, line.len()), (Read::Line, 0));
    }

    #[test]
    fn the_request_id_is_found_at_the_top_level_of_a_messages_start() {
        let number = |n: i64| Some(RequestId::Number(n));
        let string = |s: &str| Some(RequestId::String(s.into()));
        let cases: [(&[u8], Option<RequestId>); 10] = [
            (
                br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"#,
                number(42),
            ),
            (br#"{ "id" : "a\"b" , "method""#, string("a\"b")),
            (br#"{"method":"tools/call","id":-3}"#, number(-3)),
            // An `id` inside the parameters, or as a value, is not the request's.
            (br#"{"params":{"id":5},"id":6,"#, number(6)),
            (br#"{"params":{"id":5,"x":"#, None),
            (br#"{"method":"id","params":{"#, None),
            (br#"{"x":"\"id\":9","id":10,"#, number(10)),
            // Cut before the value ends, or not an id.
            (br#"{"id":12"#, None),
            (br#"{"id":null,"#, None),
            (br#"{"id":{"a":1},"#, None),
        ];
        for (prefix, expected) in cases {
            assert_eq!(
                leading_id(prefix),
                expected,
                "{}",
                String::from_utf8_lossy(prefix)
            );
        }
        // Far into a message, past the part kept.
        let late = format!(
            r#"{{"params":{{"a":"{}"}},"id":1}}"#,
            "z".repeat(ID_PREFIX_BYTES)
        );
        assert_eq!(leading_id(&late.as_bytes()[..ID_PREFIX_BYTES]), None);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_line_that_comes_after_the_look_is_read_once_asleep() {
        let (mut lines, mut client) = pipe();
        let answered = Notify::new();
        let writer = tokio::spawn(async move {
            tokio::time::sleep(LOOK_BEFORE_SLEEP * 50).await;
            client.write_all(b"{\"id\":1}\n").await.expect("write");
            client
        });
        let mut line = Vec::new();
        next_line(&mut lines, &mut line, &answered)
            .await
            .expect("read");
        assert_eq!(line, b"{\"id\":1}\n");
        drop(writer.await.expect("writer"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_line_split_across_the_look_is_read_whole() {
        let (mut lines, mut client) = pipe();
        let answered = Notify::new();
        let writer = tokio::spawn(async move {
            client.write_all(b"{\"id\":").await.expect("write");
            tokio::time::sleep(LOOK_BEFORE_SLEEP * 50).await;
            client.write_all(b"2}\n{\"id\":3}\n").await.expect("write");
            client
        });
        let mut line = Vec::new();
        next_line(&mut lines, &mut line, &answered)
            .await
            .expect("read");
        assert_eq!(line, b"{\"id\":2}\n");
        line.clear();
        next_line(&mut lines, &mut line, &answered)
            .await
            .expect("read");
        assert_eq!(line, b"{\"id\":3}\n");
        drop(writer.await.expect("writer"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn answers_while_waiting_lose_no_line() {
        let (mut lines, mut client) = pipe();
        let answered = std::sync::Arc::new(Notify::new());
        let notifier = answered.clone();
        let writer = tokio::spawn(async move {
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                notifier.notify_one();
            }
            client.write_all(b"{\"id\":4}\n").await.expect("write");
            client
        });
        let mut line = Vec::new();
        next_line(&mut lines, &mut line, &answered)
            .await
            .expect("read");
        assert_eq!(line, b"{\"id\":4}\n");
        drop(writer.await.expect("writer"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_end_of_input_leaves_the_line_empty_after_a_last_unfinished_line() {
        let (mut lines, mut client) = pipe();
        let answered = Notify::new();
        client.write_all(b"{\"id\":5}").await.expect("write");
        drop(client);
        let mut line = Vec::new();
        next_line(&mut lines, &mut line, &answered)
            .await
            .expect("read");
        assert_eq!(
            line, b"{\"id\":5}",
            "a last line without its newline is still read"
        );
        line.clear();
        next_line(&mut lines, &mut line, &answered)
            .await
            .expect("read");
        assert!(line.is_empty());
    }
}
