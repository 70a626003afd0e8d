//! Outbound HTTP from a tool, over `wasi:http/outgoing-handler`. The host decides what gets
//! through (the manifest's allowlist, the operator's policy, SSRF rules, size and rate limits)
//! and injects credentials; a refusal comes back as [`HttpError::Refused`] with the host's
//! reason. Redirects are never followed: a 3xx is returned like any other response.

use wasip2::clocks::monotonic_clock;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasip2::io::poll::{Pollable, poll};
use wasip2::io::streams::StreamError;

use crate::ToolError;

/// A request to send.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// An absolute `https://` (or policy-permitted `http://`) URL.
    pub url: String,
    /// Header names and values.
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<Vec<u8>>,
    /// Overall time limit in milliseconds (the host clamps it to the call's deadline).
    pub timeout_ms: Option<u64>,
    /// Keep at most this many bytes of the body (the rest is read and counted, not kept), so a
    /// large response costs no memory; the host still refuses bodies over its own cap.
    pub max_body_bytes: usize,
}

/// A response as received.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code (3xx included: redirects are not followed).
    pub status: u16,
    /// Header names and values, as sent.
    pub headers: Vec<(String, String)>,
    /// The body (at most `max_body_bytes` of it).
    pub body: Vec<u8>,
    /// Bytes of body received in all.
    pub total_bytes: u64,
    /// Whether the body was longer than `max_body_bytes` and was cut.
    pub truncated: bool,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request produced no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The URL or a header is malformed.
    Invalid(String),
    /// The host refused the request (its message says which rule).
    Refused(String),
    /// The host's rate limit for this tool was reached; the message says when to retry.
    RateLimited(String),
    /// The request or the response took longer than allowed.
    Timeout(String),
    /// The connection or the protocol failed.
    Failed(String),
}

impl From<HttpError> for ToolError {
    fn from(e: HttpError) -> Self {
        match e {
            HttpError::Invalid(m) => ToolError::invalid_args(m),
            HttpError::Refused(m) => ToolError::permission_denied(m),
            HttpError::RateLimited(m) => ToolError::rate_limited(m),
            HttpError::Timeout(_) => ToolError::Timeout,
            HttpError::Failed(m) => ToolError::external_service(m),
        }
    }
}

/// Send `request` and read the response.
pub fn send(request: &Request) -> Result<Response, HttpError> {
    let (scheme, rest) = request
        .url
        .split_once("://")
        .ok_or_else(|| HttpError::Invalid(format!("`{}` is not an absolute URL", request.url)))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        other => {
            return Err(HttpError::Invalid(format!(
                "scheme `{other}` is not HTTP; use https://"
            )));
        }
    };
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    // The fragment never leaves the client.
    let path = path.split('#').next().unwrap_or("/");
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else if path.is_empty() {
        "/".to_owned()
    } else {
        path.to_owned()
    };

    let headers = Fields::new();
    for (name, value) in &request.headers {
        headers
            .append(name, value.as_bytes())
            .map_err(|e| HttpError::Invalid(format!("header `{name}`: {e:?}")))?;
    }
    let outgoing = OutgoingRequest::new(headers);
    outgoing
        .set_method(&method(&request.method))
        .map_err(|()| HttpError::Invalid(format!("method `{}`", request.method)))?;
    outgoing
        .set_scheme(Some(&scheme))
        .map_err(|()| HttpError::Invalid("scheme".into()))?;
    outgoing
        .set_authority(Some(authority))
        .map_err(|()| HttpError::Invalid(format!("authority `{authority}`")))?;
    outgoing
        .set_path_with_query(Some(&path))
        .map_err(|()| HttpError::Invalid(format!("path `{path}`")))?;
    let body = outgoing
        .body()
        .map_err(|()| HttpError::Failed("request body taken twice".into()))?;

    // The whole exchange ends by the deadline: the host's timeouts bound each wait (connect,
    // first byte, between two bytes), so a body that trickles in would otherwise run on.
    let deadline = request
        .timeout_ms
        .map(|ms| monotonic_clock::now().saturating_add(ms.saturating_mul(1_000_000)));
    let options = RequestOptions::new();
    if let Some(ms) = request.timeout_ms {
        let ns = ms.saturating_mul(1_000_000);
        // Timeouts the host does not support are simply not set; its own deadline still holds.
        let _ = options.set_connect_timeout(Some(ns));
        let _ = options.set_first_byte_timeout(Some(ns));
        let _ = options.set_between_bytes_timeout(Some(ns));
    }
    let pending = outgoing_handler::handle(outgoing, Some(options)).map_err(from_code)?;
    if let Some(bytes) = &request.body {
        let stream = body
            .write()
            .map_err(|()| HttpError::Failed("request body stream unavailable".into()))?;
        for chunk in bytes.chunks(4096) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(stream_error)?;
        }
        drop(stream);
    }
    OutgoingBody::finish(body, None).map_err(from_code)?;

    wait(&pending.subscribe(), deadline, request.timeout_ms)?;
    let response = pending
        .get()
        .ok_or_else(|| HttpError::Failed("no response".into()))?
        .map_err(|()| HttpError::Failed("response taken twice".into()))?
        .map_err(from_code)?;
    let status = response.status();
    let headers = response
        .headers()
        .entries()
        .into_iter()
        .map(|(n, v)| (n, String::from_utf8_lossy(&v).into_owned()))
        .collect();
    let incoming = response
        .consume()
        .map_err(|()| HttpError::Failed("response body taken twice".into()))?;
    let (body, total_bytes) = read_body(
        &incoming,
        request.max_body_bytes,
        deadline,
        request.timeout_ms,
    )?;
    drop(incoming);
    Ok(Response {
        status,
        headers,
        truncated: total_bytes > body.len() as u64,
        body,
        total_bytes,
    })
}

/// Wait until `ready` is, or fail once `deadline` (a monotonic-clock instant, from a timeout of
/// `timeout_ms`) has passed.
fn wait(ready: &Pollable, deadline: Option<u64>, timeout_ms: Option<u64>) -> Result<(), HttpError> {
    let Some(deadline) = deadline else {
        ready.block();
        return Ok(());
    };
    let timer = monotonic_clock::subscribe_instant(deadline);
    if poll(&[ready, &timer]).contains(&0) {
        return Ok(());
    }
    Err(HttpError::Timeout(format!(
        "the request took longer than its {} ms",
        timeout_ms.unwrap_or_default()
    )))
}

/// Read `incoming` to its end, keeping its first `max` bytes, by `deadline`; the total read.
fn read_body(
    incoming: &IncomingBody,
    max: usize,
    deadline: Option<u64>,
    timeout_ms: Option<u64>,
) -> Result<(Vec<u8>, u64), HttpError> {
    let stream = incoming
        .stream()
        .map_err(|()| HttpError::Failed("response body stream unavailable".into()))?;
    let mut body = Vec::new();
    let mut total: u64 = 0;
    loop {
        wait(&stream.subscribe(), deadline, timeout_ms)?;
        match stream.read(64 * 1024) {
            Ok(chunk) => {
                total += chunk.len() as u64;
                let room = max.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Err(StreamError::Closed) => return Ok((body, total)),
            Err(e) => return Err(stream_error(e)),
        }
    }
}

fn method(name: &str) -> Method {
    match name.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "PATCH" => Method::Patch,
        "OPTIONS" => Method::Options,
        "TRACE" => Method::Trace,
        "CONNECT" => Method::Connect,
        other => Method::Other(other.to_owned()),
    }
}

fn stream_error(e: StreamError) -> HttpError {
    match e {
        StreamError::LastOperationFailed(err) => match wasip2::http::types::http_error_code(&err) {
            Some(code) => from_code(code),
            None => HttpError::Failed(err.to_debug_string()),
        },
        StreamError::Closed => HttpError::Failed("the connection closed early".into()),
    }
}

/// The host's refusals arrive as `internal-error` with a `chitin <kind>: ` prefix.
fn from_code(code: ErrorCode) -> HttpError {
    match code {
        ErrorCode::InternalError(Some(message)) => match message.strip_prefix("chitin ") {
            Some(rest) if rest.starts_with("rate-limited") => HttpError::RateLimited(message),
            Some(rest) if rest.starts_with("invalid-url") => HttpError::Invalid(message),
            Some(_) => HttpError::Refused(message),
            None => HttpError::Failed(message),
        },
        ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => {
            HttpError::Refused(format!("{code:?}"))
        }
        ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::ConnectionWriteTimeout
        | ErrorCode::HttpResponseTimeout
        | ErrorCode::DnsTimeout => HttpError::Timeout(format!("{code:?}")),
        ErrorCode::HttpResponseBodySize(limit) => HttpError::Refused(format!(
            "chitin response-too-large: the response body exceeds the host's limit{}",
            limit.map(|l| format!(" of {l} bytes")).unwrap_or_default()
        )),
        ErrorCode::HttpRequestBodySize(limit) => HttpError::Refused(format!(
            "chitin request-too-large: the request body exceeds the host's limit{}",
            limit.map(|l| format!(" of {l} bytes")).unwrap_or_default()
        )),
        other => HttpError::Failed(format!("{other:?}")),
    }
}
