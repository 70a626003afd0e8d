//! A direct path for a plain stateless `tools/call` over Streamable HTTP. A 2026-07-28 request
//! that streams nothing before its result is answered here, without the service rmcp builds,
//! spawns and drives for every request. Only a request that simple, exact checks prove valid
//! is taken: the checks rmcp makes, made narrower. Anything else goes to rmcp unchanged, which
//! accepts or refuses it:
//! - another method, a batch, or a session;
//! - an `Origin` header;
//! - a progress token or a log level;
//! - `Mcp-Param-*` headers, or a tool whose schema names one;
//! - a Base64 `Mcp-Name`;
//! - media types with parameters.

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::AsHeaderName;
use axum::http::{HeaderMap, HeaderName, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ErrorCode, ProtocolVersion,
    RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::common::http_header::BASE64_HEADER_PREFIX;
use tokio_util::sync::CancellationToken;

use crate::mcp::McpServer;
use crate::mcp::access::{Access, ClientId};
use crate::mcp::plain_call::{PlainCall, TOOLS_CALL};
use crate::mcp::server::CallOrigin;

// rmcp's header names, parsed once: a lookup by text lower-cases it on every request. A test
// holds them equal to rmcp's.
/// `MCP-Protocol-Version`.
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Method`.
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name`.
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
/// `Mcp-Session-Id`.
const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// The `Mcp-Param-*` headers, as `http` spells header names (lower case).
const PARAM_HEADER_PREFIX: &str = "mcp-param-";

/// What the direct path needs: the handler, the accepted `Host` authorities, the largest
/// body read, and the token that ends calls in flight when the server stops.
pub struct Direct {
    server: McpServer,
    hosts: Vec<String>,
    max_body: usize,
    stopping: CancellationToken,
}

/// A `tools/call` whose headers and body qualify for the direct path.
struct Qualified {
    id: RequestId,
    params: CallToolRequestParams,
    capabilities: ClientCapabilities,
}

impl Direct {
    /// Answer plain stateless calls to `server`'s tools on a server accepting `hosts`, with
    /// bodies of at most `max_body` bytes; calls in flight end when `stopping` is cancelled.
    pub fn new(
        server: McpServer,
        hosts: Vec<String>,
        max_body: usize,
        stopping: CancellationToken,
    ) -> Self {
        Self {
            server,
            hosts,
            max_body,
            stopping,
        }
    }

    /// Whether a tool's schema asks for `Mcp-Param-*` headers, which rmcp checks.
    fn names_param_headers(&self, tool: &str) -> bool {
        self.server.served().host().names_param_headers(tool)
    }

    /// Run a qualified call and answer it as one JSON-RPC message.
    async fn answer(&self, call: Qualified, access: Access, client: ClientId) -> Response {
        let declared_tasks = call.capabilities.supports_tasks();
        let cancelled = self.stopping.child_token();
        let origin = CallOrigin {
            access,
            client,
            capabilities: Some(call.capabilities),
            legacy_session: false,
            stdio: false,
            peer: None,
            progress_token: None,
            min_log: None,
            cancelled: &cancelled,
        };
        let tool = call.params.name.to_string();
        let mut gone = ClientGone {
            tool: &tool,
            answered: false,
        };
        let result = self.server.call(call.params, origin).await.and_then(|r| {
            // SEP-2663, as rmcp enforces it: no task handle for a client that cannot read one.
            if matches!(r, CallToolResponse::Task(_)) && !declared_tasks {
                return Err(ErrorData::missing_required_client_capability(
                    ClientCapabilities::builder().enable_tasks().build(),
                ));
            }
            Ok(r)
        });
        gone.answered = true;
        let (status, message) = match result {
            Ok(response) => (
                StatusCode::OK,
                ServerJsonRpcMessage::response(ServerResult::from(response), call.id),
            ),
            Err(error) => (
                status_of(&error),
                ServerJsonRpcMessage::error(error, Some(call.id)),
            ),
        };
        json_rpc_response(status, &message)
    }
}

/// Notes a call whose client went away before its answer: hyper then drops the request's
/// future, and the call's instance with it.
struct ClientGone<'a> {
    tool: &'a str,
    answered: bool,
}

impl Drop for ClientGone<'_> {
    fn drop(&mut self) {
        if !self.answered {
            tracing::info!(tool = self.tool, "call cancelled by the client");
        }
    }
}

impl Direct {
    /// Answer `request` here when it is a plain stateless call made with `access` by `client`;
    /// otherwise give it back, with its body as it came, for rmcp's service.
    pub async fn take(
        &self,
        request: Request,
        access: Access,
        client: ClientId,
    ) -> Result<Response, Passed> {
        if !headers_qualify(&self.hosts, request.method(), request.headers()) {
            return Err(Passed {
                request,
                access,
                client,
            });
        }
        let (parts, body) = request.into_parts();
        let bytes = match axum::body::to_bytes(body, self.max_body).await {
            Ok(bytes) => bytes,
            Err(e) => {
                return Ok((
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "cannot read the request body (at most {} bytes): {e}",
                        self.max_body
                    ),
                )
                    .into_response());
            }
        };
        match qualify(&parts.headers, &bytes) {
            Some(call) if !self.names_param_headers(&call.params.name) => {
                tracing::trace!(tool = %call.params.name, "a plain stateless call, answered directly");
                // Boxed: the call's future is some 3.7 KB, and would otherwise be moved with
                // the front's future that holds it.
                Ok(Box::pin(self.answer(call, access, client)).await)
            }
            _ => match PlainCall::malformed(&bytes) {
                Some((id, wrong)) => Ok(json_rpc_response(
                    StatusCode::OK,
                    &ServerJsonRpcMessage::error(ErrorData::invalid_params(wrong, None), Some(id)),
                )),
                None => Err(Passed {
                    request: Request::from_parts(parts, Body::from(bytes)),
                    access,
                    client,
                }),
            },
        }
    }
}

/// `message` as an HTTP response with `status`.
fn json_rpc_response(status: StatusCode, message: &ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(message) {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from(body),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot write the response: {e}"),
        )
            .into_response(),
    }
}

/// A request the direct path gave back, with what the front decided about its sender.
pub struct Passed {
    /// The request, its body as it came.
    pub request: Request,
    /// What its credentials reach.
    pub access: Access,
    /// Who sent it.
    pub client: ClientId,
}

/// Whether the request line and headers alone allow the direct path, on a server accepting
/// the `Host` authorities `hosts`.
fn headers_qualify(hosts: &[String], method: &Method, headers: &HeaderMap) -> bool {
    let version = ProtocolVersion::V_2026_07_28;
    method == Method::POST
        && single(headers, header::HOST).is_some_and(|host| host_allowed(hosts, host))
        && !headers.contains_key(header::ORIGIN)
        && !headers.contains_key(SESSION_ID)
        && single(headers, header::CONTENT_TYPE).is_some_and(is_json)
        && accepts_json_and_events(headers)
        && single(headers, PROTOCOL_VERSION) == Some(version.as_str())
        && single(headers, MCP_METHOD) == Some(TOOLS_CALL)
        && single(headers, MCP_NAME).is_some_and(|n| !n.starts_with(BASE64_HEADER_PREFIX))
        && !headers
            .keys()
            .any(|name| name.as_str().starts_with(PARAM_HEADER_PREFIX))
}

/// A `Host` that is exactly one of the accepted authorities (rmcp also accepts other
/// spellings of them; those go to it).
fn host_allowed(hosts: &[String], host: &str) -> bool {
    axum::http::uri::Authority::try_from(host).is_ok()
        && hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
}

/// The call in `body`, when it is a single 2026-07-28 `tools/call` naming the tool the
/// `Mcp-Name` header names, asking for no progress or log messages.
fn qualify(headers: &HeaderMap, body: &[u8]) -> Option<Qualified> {
    let PlainCall { id, params } = PlainCall::parse(body)?;
    if single(headers, MCP_NAME) != Some(&*params.name) {
        return None;
    }
    let meta = params.meta.as_ref()?;
    #[allow(deprecated)]
    let wants_log = meta.log_level().is_some();
    if meta.protocol_version() != Some(ProtocolVersion::V_2026_07_28)
        || meta.get_progress_token().is_some()
        || wants_log
    {
        return None;
    }
    let capabilities = meta.client_capabilities()?;
    Some(Qualified {
        id,
        params,
        capabilities,
    })
}

/// The HTTP status rmcp gives a JSON-RPC error of a 2026-07-28 request whose `_meta` is well
/// formed.
fn status_of(error: &ErrorData) -> StatusCode {
    match error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// The one value of header `name`, as text; `None` when it is absent, repeated or not text.
fn single<K: AsHeaderName>(headers: &HeaderMap, name: K) -> Option<&str> {
    let mut values = headers.get_all(name).into_iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok()
}

/// `application/json`, with or without parameters.
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default();
    essence.trim().eq_ignore_ascii_case("application/json")
}

/// Every `Accept` entry is a bare media type, and both JSON and event streams are among them.
fn accepts_json_and_events(headers: &HeaderMap) -> bool {
    let (mut json, mut events) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for entry in value.split(',') {
            let entry = entry.trim();
            if entry.contains([';', '"']) {
                return false;
            }
            json |= entry.eq_ignore_ascii_case("application/json");
            events |= entry.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && events
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn only_bare_accept_entries_naming_both_types_qualify() {
        let accept = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for v in values {
                headers.append(header::ACCEPT, v.parse().expect("header"));
            }
            accepts_json_and_events(&headers)
        };
        assert!(accept(&["application/json, text/event-stream"]));
        assert!(accept(&["Application/JSON", "text/event-stream"]));
        assert!(!accept(&["application/json"]));
        assert!(!accept(&["application/json;q=0, text/event-stream"]));
        assert!(!accept(&["*/*"]));
    }

    #[test]
    fn a_repeated_header_has_no_single_value() {
        let mut headers = HeaderMap::new();
        headers.append(MCP_METHOD, "tools/call".parse().expect("header"));
        assert_eq!(single(&headers, MCP_METHOD), Some("tools/call"));
        headers.append(MCP_METHOD, "tools/call".parse().expect("header"));
        assert_eq!(single(&headers, MCP_METHOD), None);
    }

    #[test]
    fn the_header_names_are_rmcps() {
        use rmcp::transport::common::http_header as rmcp_names;
        for (ours, theirs) in [
            (&PROTOCOL_VERSION, rmcp_names::HEADER_MCP_PROTOCOL_VERSION),
            (&MCP_METHOD, rmcp_names::HEADER_MCP_METHOD),
            (&MCP_NAME, rmcp_names::HEADER_MCP_NAME),
            (&SESSION_ID, rmcp_names::HEADER_SESSION_ID),
        ] {
            assert_eq!(ours, &HeaderName::try_from(theirs).expect("a header name"));
        }
    }

    /// The headers a 2026-07-28 client sends with a `tools/call` of `echo`.
    fn call_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("host", "127.0.0.1:8080"),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ] {
            headers.insert(name, value.parse().expect("header"));
        }
        headers
    }

    fn hosts() -> Vec<String> {
        vec!["127.0.0.1:8080".into(), "localhost:8080".into()]
    }

    fn call_body(name: &str, meta: &Value) -> Vec<u8> {
        serde_json::json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": name, "arguments": {"message": "hi"}, "_meta": meta}
        })
        .to_string()
        .into_bytes()
    }

    fn meta() -> Value {
        serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        })
    }

    #[test]
    fn a_plain_stateless_call_qualifies() {
        let headers = call_headers();
        assert!(headers_qualify(&hosts(), &Method::POST, &headers));
        let call = qualify(&headers, &call_body("echo", &meta())).expect("qualifies");
        assert_eq!(call.id, RequestId::Number(7));
        assert_eq!(call.params.name, "echo");
    }

    #[test]
    fn headers_rmcp_must_judge_go_to_it() {
        let changed = |name: &str, value: Option<&str>| {
            let mut headers = call_headers();
            match value {
                Some(v) => {
                    headers.append(
                        axum::http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                        v.parse().expect("value"),
                    );
                }
                None => {
                    headers.remove(name);
                }
            }
            headers_qualify(&hosts(), &Method::POST, &headers)
        };
        assert!(!changed("origin", Some("http://127.0.0.1:8080")));
        assert!(!changed("mcp-session-id", Some("abc")));
        assert!(!changed("mcp-param-path", Some("x")));
        assert!(!changed("mcp-method", None));
        assert!(
            !changed("mcp-method", Some("tools/call")),
            "a repeated header"
        );
        assert!(!changed("mcp-name", None));
        assert!(!changed("mcp-protocol-version", None));
        assert!(!changed("content-type", None));
        assert!(!changed("accept", None));
        assert!(!changed("host", Some("127.0.0.1:8080")), "a repeated Host");
        let mut other_host = call_headers();
        other_host.insert("host", "evil.example:8080".parse().expect("host"));
        assert!(!headers_qualify(&hosts(), &Method::POST, &other_host));
        let mut base64_name = call_headers();
        base64_name.insert("mcp-name", "=?base64?ZWNobw==?=".parse().expect("name"));
        assert!(!headers_qualify(&hosts(), &Method::POST, &base64_name));
        let mut older = call_headers();
        older.insert(
            "mcp-protocol-version",
            "2025-11-25".parse().expect("version"),
        );
        assert!(!headers_qualify(&hosts(), &Method::POST, &older));
        assert!(!headers_qualify(&hosts(), &Method::GET, &call_headers()));
    }

    #[test]
    fn bodies_rmcp_must_judge_go_to_it() {
        let headers = call_headers();
        // Another tool than the `Mcp-Name` header names.
        assert!(qualify(&headers, &call_body("time", &meta())).is_none());
        // No client capabilities, another version, a progress token, a log level.
        let without = serde_json::json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
        assert!(qualify(&headers, &call_body("echo", &without)).is_none());
        let mut older = meta();
        older["io.modelcontextprotocol/protocolVersion"] = "2025-11-25".into();
        assert!(qualify(&headers, &call_body("echo", &older)).is_none());
        let mut progress = meta();
        progress["progressToken"] = 1.into();
        assert!(qualify(&headers, &call_body("echo", &progress)).is_none());
        let mut log = meta();
        log["io.modelcontextprotocol/logLevel"] = "debug".into();
        assert!(qualify(&headers, &call_body("echo", &log)).is_none());
        // Another method, a batch, a notification, not JSON-RPC 2.0, not JSON.
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"echo"}}"#;
        assert!(qualify(&headers, list).is_none());
        let batch = format!(
            "[{}]",
            String::from_utf8(call_body("echo", &meta())).expect("utf-8")
        );
        assert!(qualify(&headers, batch.as_bytes()).is_none());
        let notification = br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}"#;
        assert!(qualify(&headers, notification).is_none());
        let old_rpc = String::from_utf8(call_body("echo", &meta()))
            .expect("utf-8")
            .replace("\"2.0\"", "\"1.0\"");
        assert!(qualify(&headers, old_rpc.as_bytes()).is_none());
        assert!(qualify(&headers, b"not json").is_none());
    }
}
