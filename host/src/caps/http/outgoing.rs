//! The enforced send path behind `wasi:http/outgoing-handler`: every request a component makes
//! goes through [`HttpCall::send`], which applies the grant in a fixed order — per-call count,
//! rate limit, allowlist, request size, leak scan, address check (resolved once), credential
//! injection — and only then connects, to the checked addresses and nowhere else, or reuses a
//! kept-alive connection of the same component to one of them (see [`super::pool`]). Redirects
//! are never followed; the response body is cut off at the size cap while it streams, whatever
//! its Content-Length says; every timeout is clamped to the call's remaining deadline.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use wasmtime_wasi_http::{RequestOptions, WasiHttpHooks};

use super::HttpConfig;
use super::error::HttpRefusal;
use super::pool::{Connection, Lease, PoolKey};
use crate::call::Call;
use crate::call_log::{LogLevel, LogSource, SharedLog};
use crate::fault::Faults;
use crate::leak::LeakScanner;
use crate::services::Services;

/// Largest request body a component may send.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// Largest response body a component may receive.
pub const MAX_RESPONSE_BYTES: u64 = 5 * 1024 * 1024;
/// Requests one call may make.
pub const MAX_HTTP_REQUESTS_PER_CALL: u32 = 50;

type WasiBody = wasmtime_wasi_http::WasiBody;
type SendResult = wasmtime_wasi_http::Result<(
    http::Response<WasiBody>,
    Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
)>;

/// One call's outbound HTTP: its grant, who is calling, its deadline, and what it has sent.
pub struct HttpCall {
    config: Option<Arc<HttpConfig>>,
    services: Arc<Services>,
    scanner: Arc<LeakScanner>,
    user: Arc<str>,
    /// What its requests count under in the rate windows, per user: the tool called, or the
    /// library (see [`HttpConfig::as_library`]).
    counted: Arc<str>,
    deadline: Instant,
    sent: AtomicU32,
    log: SharedLog,
    faults: Faults,
}

impl HttpCall {
    /// The state of `call` under `config` (`None`: no HTTP grant): it must end by the call's
    /// deadline, its scanner knows the secrets the call could reach, and host faults (the rate
    /// windows or the secret store failing) are recorded in its faults.
    pub fn new(config: Option<Arc<HttpConfig>>, call: &Call<'_>) -> Self {
        // A call with no tool named runs a library for another component's call.
        let counted = match (call.target, &config) {
            (Some(target), _) => target.tool.clone(),
            (None, Some(config)) => config.as_library.clone(),
            (None, None) => Arc::from(""),
        };
        Self {
            config,
            services: call.services.clone(),
            scanner: call.scanner.clone(),
            user: call.context.user.clone(),
            counted,
            deadline: call.deadline,
            sent: AtomicU32::new(0),
            log: call.log.clone(),
            faults: call.faults.clone(),
        }
    }

    /// Send `request` under the grant, or say which rule refused it.
    async fn send(
        self: Arc<Self>,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> SendResult {
        match self.clone().enforce_and_send(request, options).await {
            Ok(sent) => Ok(sent),
            Err(Failure::Refused(refusal)) => {
                let message = refused(&self.log, &refusal);
                // The error handed to the component cannot trap it, so the fault is recorded
                // and the call ends as a host fault whatever the component makes of it.
                if refusal.is_host_fault() {
                    self.faults.record(refusal.to_string());
                }
                Err(wasmtime_wasi_http::Error::InternalError(Some(message)))
            }
            Err(Failure::Transport(e)) => Err(e),
        }
    }

    async fn enforce_and_send(
        self: Arc<Self>,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<
        (
            http::Response<WasiBody>,
            Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
        ),
        Failure,
    > {
        let config = self.config.clone().ok_or(HttpRefusal::NoGrant)?;
        let n = self.sent.fetch_add(1, Ordering::SeqCst) + 1;
        if n > MAX_HTTP_REQUESTS_PER_CALL {
            return Err(HttpRefusal::TooManyRequests {
                max: MAX_HTTP_REQUESTS_PER_CALL,
            }
            .into());
        }
        // Counting the request commits it durably (a disk sync): off the runtime's thread, so a
        // server on one thread keeps serving other calls meanwhile.
        let (rate, user, counted, limits) = (
            self.services.http_rate(),
            self.user.clone(),
            self.counted.clone(),
            config.rate,
        );
        // A slot this process reserved earlier is taken here, without a commit.
        if !rate.take_reserved(&user, &counted, limits, std::time::SystemTime::now()) {
            tokio::task::spawn_blocking(move || {
                rate.check(&user, &counted, limits, std::time::SystemTime::now())
            })
            .await
            .map_err(|e| HttpRefusal::RateStore {
                reason: format!("the rate check did not finish: {e}"),
            })??;
        }

        let (mut parts, body) = request.into_parts();
        let target = config
            .allowlist
            .check(parts.method.as_str(), &parts.uri.to_string())?;

        // The whole body is read before anything is sent: it must be scanned for leaks, and a
        // body over the cap is refused rather than cut.
        if let Some(len) = content_length(&parts.headers)
            && len > MAX_REQUEST_BYTES as u64
        {
            return Err(HttpRefusal::RequestTooLarge {
                max: MAX_REQUEST_BYTES,
            }
            .into());
        }
        let body = collect_capped(body, MAX_REQUEST_BYTES).await?;

        let scanner = &self.scanner;
        scanner
            .scan_outbound(target.url.as_str())
            .map_err(|leak| HttpRefusal::Leak {
                place: "URL".into(),
                what: leak.to_string(),
            })?;
        for (name, value) in &parts.headers {
            let value = String::from_utf8_lossy(value.as_bytes());
            scanner
                .scan_outbound(&format!("{name}: {value}"))
                .map_err(|leak| HttpRefusal::Leak {
                    place: format!("header `{name}`"),
                    what: leak.to_string(),
                })?;
        }
        scanner
            .scan_outbound(&String::from_utf8_lossy(&body))
            .map_err(|leak| HttpRefusal::Leak {
                place: "body".into(),
                what: leak.to_string(),
            })?;

        let addrs = super::address::resolve(&target.host, target.port, &config.addresses).await?;

        // Only now, with every check passed, do secret values enter the request.
        parts.uri = target
            .url
            .as_str()
            .parse()
            .map_err(|_| HttpRefusal::InvalidUrl {
                url: target.url.to_string(),
                reason: "cannot be sent as an HTTP request target".into(),
            })?;
        let store = if config.credentials.is_empty() {
            None
        } else {
            Some(
                self.services
                    .secrets()
                    .map_err(|e| HttpRefusal::SecretStore {
                        reason: e.to_string(),
                    })?,
            )
        };
        if let Some(store) = &store {
            let injected = super::credentials::inject(&mut parts, &config.credentials, store)
                .map_err(|e| match e {
                    super::credentials::CredentialError::Store(e) => HttpRefusal::SecretStore {
                        reason: e.to_string(),
                    },
                    other => HttpRefusal::Credentials {
                        reason: other.to_string(),
                    },
                })?;
            // The call's log names each secret a request carries, never its value.
            if !injected.secrets.is_empty() {
                self.note(
                    LogLevel::Info,
                    &format!(
                        "chitin credentials: {} added to the request to {}",
                        injected.secrets.join(", "),
                        target.host
                    ),
                );
            }
        }

        let remaining = self
            .deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(HttpRefusal::DeadlinePassed)?;
        let timeouts = Timeouts::clamped(options, remaining);

        let host_name = match &target.host {
            url::Host::Domain(d) => d.clone(),
            url::Host::Ipv4(ip) => ip.to_string(),
            url::Host::Ipv6(ip) => ip.to_string(),
        };
        // The request line carries the path and query only (as injection left them); the Host
        // header names the authority.
        let path = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        parts.uri = path.parse().map_err(|_| HttpRefusal::InvalidUrl {
            url: target.url.to_string(),
            reason: "the path cannot be sent".into(),
        })?;
        let authority = target.url[url::Position::BeforeHost..url::Position::AfterPort].to_owned();
        parts.headers.insert(
            http::header::HOST,
            http::HeaderValue::from_str(&authority).map_err(|_| HttpRefusal::InvalidUrl {
                url: target.url.to_string(),
                reason: "the host cannot be sent as a Host header".into(),
            })?,
        );
        let key = PoolKey {
            owner: config.owner,
            user: self.user.to_string(),
            https: target.scheme_is_https,
            host: host_name,
            port: target.port,
        };
        let method = parts.method.clone();
        let request = http::Request::from_parts(parts, Full::new(body));
        let (response, lease) = self
            .exchange(&config, key, &addrs, &target.url, timeouts, request)
            .await?;

        // A response to HEAD, a 204 or a 304 has no body, whatever length it declares.
        let may_have_body = method != http::Method::HEAD
            && !matches!(
                response.status(),
                http::StatusCode::NO_CONTENT | http::StatusCode::NOT_MODIFIED
            );
        if let Some(len) = content_length(response.headers())
            && may_have_body
            && len > MAX_RESPONSE_BYTES
        {
            return Err(HttpRefusal::ResponseTooLarge {
                max: MAX_RESPONSE_BYTES,
                declared: len,
            }
            .into());
        }
        let deadline = tokio::time::Instant::from_std(self.deadline);
        let response = response.map(|incoming| {
            CappedBody {
                inner: incoming,
                lease: Some(lease),
                seen: 0,
                max: MAX_RESPONSE_BYTES,
                between_bytes: timeouts.between_bytes,
                idle: Box::pin(tokio::time::sleep(timeouts.between_bytes)),
                deadline: Box::pin(tokio::time::sleep_until(deadline)),
            }
            .boxed_unsync()
        });
        // A server may send back a value the host injected; the component never sees one.
        let response = if self.scanner.has_values() {
            super::returned_values::redacted(response, &self.scanner, may_have_body)
        } else {
            response
        };
        // The connection runs as its own task (see `exchange`): there is no worker to hand over.
        Ok((response, Box::new(std::future::ready(Ok(())))))
    }

    /// Send `request` (every check passed) on a kept-alive connection under `key` to one of
    /// `addrs`, or else on a new connection to them; the response and the connection's lease.
    async fn exchange(
        &self,
        config: &HttpConfig,
        key: PoolKey,
        addrs: &[SocketAddr],
        url: &url::Url,
        timeouts: Timeouts,
        mut request: http::Request<Full<Bytes>>,
    ) -> Result<(http::Response<Incoming>, Lease), Failure> {
        let pool = self.services.http_pool();
        let method = request.method().clone();
        if let Some(mut kept) = pool.checkout(&key, addrs) {
            self.note(
                LogLevel::Info,
                &format!(
                    "{method} {} → {} (kept-alive connection)",
                    redacted_url(url),
                    kept.peer
                ),
            );
            let sent =
                tokio::time::timeout(timeouts.first_byte, kept.sender.try_send_request(request))
                    .await;
            match sent {
                Ok(Ok(response)) => return Ok((response, pool.lease(key, kept))),
                Err(_) => return Err(transport(wasmtime_wasi_http::Error::ConnectionReadTimeout)),
                // hyper hands the request back only when none of it was written (the server
                // closed the connection first): it goes once more, on a new connection. A
                // request that may have been written is never sent again.
                Ok(Err(mut e)) => match e.take_message() {
                    Some(unsent) => request = unsent,
                    None => return Err(transport(e.into_error().into())),
                },
            }
        }

        self.note(
            LogLevel::Info,
            &format!("{method} {} → {}", redacted_url(url), addrs[0]),
        );
        let (stream, peer) = connect(addrs, timeouts.connect).await?;
        let io: Box<dyn Io> = if key.https {
            let name = rustls::pki_types::ServerName::try_from(key.host.clone()).map_err(|_| {
                HttpRefusal::InvalidUrl {
                    url: url.to_string(),
                    reason: "the host is not a valid TLS server name".into(),
                }
            })?;
            let tls = tokio_rustls::TlsConnector::from(config.tls.clone());
            let stream = tokio::time::timeout(timeouts.connect, tls.connect(name, stream))
                .await
                .map_err(|_| transport(wasmtime_wasi_http::Error::ConnectionTimeout))?
                .map_err(|e| transport(wasmtime_wasi_http::Error::Tls(e)))?;
            Box::new(stream)
        } else {
            Box::new(stream)
        };
        let (mut sender, conn) = tokio::time::timeout(
            timeouts.connect,
            hyper::client::conn::http1::handshake(TokioIo::new(io)),
        )
        .await
        .map_err(|_| transport(wasmtime_wasi_http::Error::ConnectionTimeout))?
        .map_err(|e| transport(e.into()))?;
        // The connection is driven by its own task while a request uses it or the pool keeps
        // it; the task ends when the server closes it, or when the request's response is
        // dropped unread or the last handle to it goes. Its errors reach the request through
        // the response or its body.
        tokio::spawn(conn);
        // On a runtime of one thread (a lane of `serve --http`, `chitin call`) the task stays
        // on this thread; the pool hands it to this thread's requests first.
        let driver = std::thread::current().id();
        let response = tokio::time::timeout(timeouts.first_byte, sender.send_request(request))
            .await
            .map_err(|_| transport(wasmtime_wasi_http::Error::ConnectionReadTimeout))?
            .map_err(|e| transport(e.into()))?;
        let connection = Connection {
            sender,
            peer,
            driver,
        };
        Ok((response, pool.lease(key, connection)))
    }

    fn note(&self, level: LogLevel, message: &str) {
        self.log.lock().push(LogSource::Host, level, message);
    }
}

/// Note `refusal` in the call's `log`; the message, for the error handed to the component.
fn refused(log: &SharedLog, refusal: &HttpRefusal) -> String {
    let message = format!("chitin {}: {refusal}", refusal.kind());
    log.lock().push(LogSource::Host, LogLevel::Warn, &message);
    message
}

/// The hooks wasmtime-wasi-http calls for this call's requests.
pub enum Hooks {
    /// Requests go through the grant's checks.
    Granted(Arc<HttpCall>),
    /// No HTTP grant: every request is refused and the refusal noted in the call's log. Most
    /// components have none, and their calls skip building an [`HttpCall`].
    NoGrant(SharedLog),
}

impl WasiHttpHooks for Hooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        match self {
            Self::Granted(call) => Box::new(call.clone().send(request, options)),
            Self::NoGrant(log) => {
                let message = refused(log, &HttpRefusal::NoGrant);
                Box::new(std::future::ready(Err(
                    wasmtime_wasi_http::Error::InternalError(Some(message)),
                )))
            }
        }
    }
}

/// Why a request was not sent: a rule of the grant, or the network.
enum Failure {
    Refused(HttpRefusal),
    Transport(wasmtime_wasi_http::Error),
}

impl From<HttpRefusal> for Failure {
    fn from(r: HttpRefusal) -> Self {
        Self::Refused(r)
    }
}

fn transport(e: wasmtime_wasi_http::Error) -> Failure {
    Failure::Transport(e)
}

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

/// Connect to the first of `addrs` that answers; these are the addresses the SSRF check passed,
/// so the name is never resolved again. The stream and the address it reached.
async fn connect(
    addrs: &[SocketAddr],
    timeout: Duration,
) -> Result<(TcpStream, SocketAddr), Failure> {
    let mut last = None;
    for addr in addrs {
        match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                // A request or response in more than one segment must not wait for a delayed
                // ACK (Nagle), least of all on a kept-alive connection.
                stream
                    .set_nodelay(true)
                    .map_err(|e| transport(wasmtime_wasi_http::Error::Connect(e)))?;
                return Ok((stream, *addr));
            }
            Ok(Err(e)) => last = Some(wasmtime_wasi_http::Error::Connect(e)),
            Err(_) => last = Some(wasmtime_wasi_http::Error::ConnectionTimeout),
        }
    }
    Err(transport(
        last.unwrap_or(wasmtime_wasi_http::Error::DestinationNotFound),
    ))
}

/// Connect, first-byte and between-bytes timeouts: the component's, or the call's remaining
/// time, whichever is shorter.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    connect: Duration,
    first_byte: Duration,
    between_bytes: Duration,
}

impl Timeouts {
    fn clamped(options: Option<RequestOptions>, remaining: Duration) -> Self {
        let pick = |asked: Option<Duration>| asked.map_or(remaining, |d| d.min(remaining));
        let options = options.unwrap_or_default();
        Self {
            connect: pick(options.connect_timeout),
            first_byte: pick(options.first_byte_timeout),
            between_bytes: pick(options.between_bytes_timeout),
        }
    }
}

/// Read `body` whole, refusing it once it passes `max` bytes.
async fn collect_capped(mut body: WasiBody, max: usize) -> Result<Bytes, Failure> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(transport)?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > max {
                return Err(HttpRefusal::RequestTooLarge { max }.into());
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(out))
}

fn content_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The URL for the call's log, without its query (which may carry injected parameters).
fn redacted_url(url: &url::Url) -> String {
    url[..url::Position::AfterPath].to_owned()
}

/// A response body that fails once it has passed `max` bytes (whatever Content-Length said),
/// when no byte arrives within `between_bytes`, or at the call's deadline. Read to its end, it
/// releases its connection to the pool; cut short or failed, the connection is dropped.
struct CappedBody {
    inner: Incoming,
    lease: Option<Lease>,
    seen: u64,
    max: u64,
    between_bytes: Duration,
    idle: Pin<Box<tokio::time::Sleep>>,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl CappedBody {
    /// End the body with `e`; the connection, mid-response, is dropped.
    fn fail(
        &mut self,
        e: wasmtime_wasi_http::Error,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.lease = None;
        Poll::Ready(Some(Err(e)))
    }
}

type BodyError = wasmtime_wasi_http::Error;

impl Body for CappedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.seen += data.len() as u64;
                    if self.seen > self.max {
                        let max = self.max;
                        return self
                            .fail(wasmtime_wasi_http::Error::HttpResponseBodySize(Some(max)));
                    }
                }
                let next = tokio::time::Instant::now() + self.between_bytes;
                self.idle.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => self.fail(e.into()),
            Poll::Ready(None) => {
                if let Some(lease) = self.lease.take() {
                    lease.release();
                }
                Poll::Ready(None)
            }
            Poll::Pending => {
                if self.deadline.as_mut().poll(cx).is_ready() {
                    return self.fail(wasmtime_wasi_http::Error::HttpResponseTimeout);
                }
                if self.idle.as_mut().poll(cx).is_ready() {
                    return self.fail(wasmtime_wasi_http::Error::ConnectionReadTimeout);
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

impl Drop for CappedBody {
    /// A body whose end was never polled for (an empty one, say) was still read whole if hyper
    /// says it is at its end; anything else closes the connection.
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take()
            && self.inner.is_end_stream()
        {
            lease.release();
        }
    }
}
