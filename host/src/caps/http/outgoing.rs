//! The enforced send path behind `wasi:http/outgoing-handler`: every request a component makes
//! goes through [`HttpCall::send`], which applies the grant in a fixed order — per-call count,
//! rate limit, allowlist, request size, leak scan, address check (resolved once), credential
//! injection — and only then connects, to the checked addresses and nowhere else. Redirects are
//! never followed; the response body is cut off at the size cap while it streams, whatever its
//! Content-Length says; every timeout is clamped to the call's remaining deadline.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use wasmtime_wasi_http::{RequestOptions, WasiHttpHooks};

use super::HttpConfig;
use super::error::HttpRefusal;
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
    user: String,
    tool: Mutex<String>,
    deadline: Instant,
    sent: AtomicU32,
    injected: Mutex<BTreeSet<String>>,
    log: SharedLog,
    faults: Faults,
}

impl HttpCall {
    /// The state of one call under `config` (`None`: no HTTP grant), which must end by
    /// `deadline`; `scanner` knows the secrets the call could reach; host faults (the rate
    /// windows or the secret store failing) are recorded in `faults`.
    pub fn new(
        config: Option<Arc<HttpConfig>>,
        services: Arc<Services>,
        scanner: Arc<LeakScanner>,
        user: String,
        deadline: Instant,
        log: SharedLog,
        faults: Faults,
    ) -> Self {
        Self {
            config,
            services,
            scanner,
            user,
            tool: Mutex::new(String::new()),
            deadline,
            sent: AtomicU32::new(0),
            injected: Mutex::new(BTreeSet::new()),
            log,
            faults,
        }
    }

    /// Name the tool being called (rate limits are per user and tool).
    pub fn set_tool(&self, tool: &str) {
        *lock(&self.tool) = tool.to_owned();
    }

    /// The scanner for this call's secrets.
    pub fn scanner(&self) -> &LeakScanner {
        &self.scanner
    }

    /// Names of the secrets injected into this call's requests so far.
    pub fn injected(&self) -> BTreeSet<String> {
        lock(&self.injected).clone()
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
                let message = format!("chitin {}: {refusal}", refusal.kind());
                self.note(LogLevel::Warn, &message);
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
        let tool = lock(&self.tool).clone();
        self.services.http_rate().check(
            &self.user,
            &tool,
            config.rate,
            std::time::SystemTime::now(),
        )?;

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
            lock(&self.injected).extend(injected.secrets);
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
        self.note(
            LogLevel::Info,
            &format!(
                "{} {} → {}",
                parts.method,
                redacted_url(&target.url),
                addrs[0]
            ),
        );
        let stream = connect(&addrs, timeouts.connect).await?;
        let io: Box<dyn Io> = if target.scheme_is_https {
            let name =
                rustls::pki_types::ServerName::try_from(host_name.clone()).map_err(|_| {
                    HttpRefusal::InvalidUrl {
                        url: target.url.to_string(),
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

        // The request line carries the path only; the Host header names the authority.
        let path = target.url[url::Position::BeforePath..url::Position::AfterQuery].to_owned();
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
        // The connection must be driven while the request is sent and the body read; it runs
        // as its own task, aborted when wasmtime-wasi-http drops the response's worker.
        let driver = wasmtime_wasi::runtime::spawn(async move {
            conn.await.map_err(wasmtime_wasi_http::Error::from)
        });
        let request = http::Request::from_parts(
            parts,
            http_body_util::Full::new(body)
                .map_err(|never| match never {})
                .boxed_unsync(),
        );
        let response = tokio::time::timeout(timeouts.first_byte, sender.send_request(request))
            .await
            .map_err(|_| transport(wasmtime_wasi_http::Error::ConnectionReadTimeout))?
            .map_err(|e| transport(e.into()))?;

        if let Some(len) = content_length(response.headers())
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
                seen: 0,
                max: MAX_RESPONSE_BYTES,
                between_bytes: timeouts.between_bytes,
                idle: Box::pin(tokio::time::sleep(timeouts.between_bytes)),
                deadline: Box::pin(tokio::time::sleep_until(deadline)),
            }
            .boxed_unsync()
        });
        Ok((response, Box::new(driver)))
    }

    fn note(&self, level: LogLevel, message: &str) {
        self.log.lock().push(LogSource::Host, level, message);
    }
}

/// The hooks wasmtime-wasi-http calls for this call's requests.
pub struct Hooks(pub Arc<HttpCall>);

impl WasiHttpHooks for Hooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        Box::new(self.0.clone().send(request, options))
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
/// so the name is never resolved again.
async fn connect(addrs: &[SocketAddr], timeout: Duration) -> Result<TcpStream, Failure> {
    let mut last = None;
    for addr in addrs {
        match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A response body that fails once it has passed `max` bytes (whatever Content-Length said),
/// when no byte arrives within `between_bytes`, or at the call's deadline.
struct CappedBody {
    inner: hyper::body::Incoming,
    seen: u64,
    max: u64,
    between_bytes: Duration,
    idle: Pin<Box<tokio::time::Sleep>>,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl Body for CappedBody {
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.seen += data.len() as u64;
                    if self.seen > self.max {
                        return Poll::Ready(Some(Err(
                            wasmtime_wasi_http::Error::HttpResponseBodySize(Some(self.max)),
                        )));
                    }
                }
                let next = tokio::time::Instant::now() + self.between_bytes;
                self.idle.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                if self.deadline.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Some(Err(wasmtime_wasi_http::Error::HttpResponseTimeout)));
                }
                if self.idle.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Some(Err(
                        wasmtime_wasi_http::Error::ConnectionReadTimeout,
                    )));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}
