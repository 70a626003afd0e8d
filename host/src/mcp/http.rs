//! `chitin serve --http`: MCP over Streamable HTTP (rmcp's service mounted in axum), guarded by
//! a per-client rate limit and a bearer token (the static one, and OAuth access tokens when an
//! issuer is configured, with their protected-resource metadata), with Host/Origin checks
//! against DNS rebinding, a cap on request bodies, a deadline for request headers and a bound on
//! the connections one client holds (a client is an address or an IPv6 /64, and for a peer on
//! this machine the user owning its socket: [`PeerClient`]).
//! `/healthz` and `/readyz` answer probes without a token.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::serve::Listener;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use crate::mcp::access::{Access, ClientId};
use crate::mcp::direct::{Direct, Passed};
use crate::mcp::lanes::{self, LaneListener};
use crate::mcp::oauth::{ResourceServer, metadata};
use crate::mcp::peer_client::PeerClient;
use crate::mcp::sessions::{self, Sessions};
use crate::mcp::token::{self, BearerToken};
use crate::mcp::{McpServer, Served};

/// The path the MCP endpoint is served on.
pub const MCP_PATH: &str = "/mcp";
/// Liveness: 200 while the process serves.
pub const HEALTH_PATH: &str = "/healthz";
/// Readiness: 200 when components are loaded and the state database answers, else 503.
pub const READY_PATH: &str = "/readyz";

/// rmcp's `Mcp-Session-Id`.
const SESSION_ID_HEADER: &str = "mcp-session-id";

/// Largest request body accepted (JSON-RPC messages are small; tool arguments are capped too).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long a connection may take to send a request's headers, counted from when it opened or
/// its last response was written; past it the connection is closed. A peer that trickles its
/// headers, or opens connections and sends nothing, holds none for longer.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections one client ([`PeerClient`]) may hold open by default.
pub const MAX_CONNECTIONS_PER_CLIENT: NonZeroUsize = NonZeroUsize::new(256).expect("not zero");

/// Clients tracked by the rate limiter before idle ones are forgotten.
const RATE_KEYS_PRUNE_AT: usize = 10_000;

/// How the HTTP endpoint is exposed.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Tools per `tools/list` page.
    pub page_size: usize,
    /// Host names (with or without port) accepted in the `Host` header, besides the bound
    /// address itself; `localhost` is added for a loopback address.
    pub extra_hosts: Vec<String>,
    /// Requests per second one client ([`PeerClient`]) may make, sustained.
    pub rate_per_second: NonZeroU32,
    /// Requests one client may make in a burst.
    pub burst: NonZeroU32,
    /// How long a connection may take to send a request's headers ([`HEADER_TIMEOUT`]).
    pub header_timeout: Duration,
    /// Connections one client may hold open; more are closed as they come.
    pub max_connections_per_client: NonZeroUsize,
}

/// The `Host` authorities accepted for a server bound to `addr`: the address itself and, for a
/// loopback address, `localhost` — each with the bound port — plus `extra`.
pub fn allowed_hosts(addr: SocketAddr, extra: &[String]) -> Vec<String> {
    let port = addr.port();
    let ip = match addr.ip() {
        IpAddr::V6(v6) => format!("[{v6}]"),
        v4 => v4.to_string(),
    };
    let mut hosts = vec![format!("{ip}:{port}")];
    if addr.ip().is_loopback() {
        hosts.push(format!("localhost:{port}"));
    }
    hosts.extend(extra.iter().cloned());
    hosts
}

/// How requests are authenticated. With neither, requests are not authenticated
/// (`--insecure-no-token`, loopback only).
pub struct Auth {
    /// The static bearer token kept in the data directory; it reaches every offered tool.
    pub token: Option<BearerToken>,
    /// OAuth access tokens from an issuer, reaching the tools their scopes cover.
    pub oauth: Option<Arc<ResourceServer>>,
}

struct Guard {
    auth: Auth,
    served: Arc<Served>,
    limiter: DefaultKeyedRateLimiter<PeerClient>,
    /// The paths served without a token: the probes and the protected-resource metadata.
    public: Vec<String>,
    /// The MCP sessions each client keeps open.
    sessions: Sessions,
}

/// When the server stops: `accepting` cancelled stops taking connections and lets requests in
/// flight finish; `sessions` cancelled ends the MCP sessions (and their streams) too.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    /// Stop accepting connections.
    pub accepting: CancellationToken,
    /// End every session now.
    pub sessions: CancellationToken,
}

/// Serve MCP on `listener` until `shutdown` says stop, authenticating requests by `auth`.
pub async fn serve(
    listener: TcpListener,
    served: Arc<Served>,
    auth: Auth,
    options: &HttpOptions,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let hosts = allowed_hosts(addr, &options.extra_hosts);
    // Browsers send Origin; only pages served from the accepted authorities may call in.
    let origins: Vec<String> = hosts.iter().map(|h| format!("http://{h}")).collect();
    let direct = Arc::new(Direct::new(
        McpServer::new(served.clone(), options.page_size),
        hosts.clone(),
        MAX_BODY_BYTES,
        shutdown.sessions.clone(),
    ));
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        // A stateless call that sends nothing before its result is answered as one JSON body
        // (less framing than an event stream); progress or log messages switch it to a stream.
        .with_json_response(true)
        .with_cancellation_token(shutdown.sessions.child_token());
    let page_size = options.page_size;
    let for_sessions = served.clone();
    let probed = served.clone();
    // Behind an `Arc`: axum clones a route's handler for every request, and rmcp's own clone
    // copies its whole configuration, which a call the direct path answers never uses.
    let manager = Arc::new(LocalSessionManager::default());
    let rmcp = Arc::new(StreamableHttpService::new(
        move || Ok(McpServer::new(for_sessions.clone(), page_size)),
        manager.clone(),
        config,
    ));
    let metadata_paths = auth
        .oauth
        .as_ref()
        .map(|oauth| metadata::paths(oauth.resource_url()))
        .unwrap_or_default();
    let mut public = vec![HEALTH_PATH.to_owned(), READY_PATH.to_owned()];
    public.extend(metadata_paths.iter().cloned());
    let guard = Arc::new(Guard {
        auth,
        served,
        limiter: RateLimiter::keyed(
            Quota::per_second(options.rate_per_second).allow_burst(options.burst),
        ),
        public,
        sessions: Sessions::new(manager, sessions::MAX_PER_CLIENT),
    });
    let mut router = Router::new().route(
        MCP_PATH,
        any(move |request: Request| async move { rmcp.handle(request).await }),
    );
    // The protected-resource metadata is what a client reads before it has a token.
    for path in metadata_paths {
        router = router.route(&path, get(resource_metadata).with_state(guard.clone()));
    }
    let router = router
        .route(HEALTH_PATH, get(|| async { "ok\n" }))
        .route(READY_PATH, get(ready).with_state(probed));
    let fronts = Fronts {
        guard,
        direct,
        router,
    };
    let accepting = shutdown.accepting;
    let lanes_stop = accepting.clone();
    let header_timeout = options.header_timeout;
    lanes::serve(
        listener,
        lanes::default_count(),
        options.max_connections_per_client,
        accepting,
        move |lane| serve_lane(lane, fronts.clone(), header_timeout, lanes_stop.clone()),
    )
    .await
}

/// Serve one lane's connections until `stop`, then let the requests in flight finish. Not
/// `axum::serve`: it gives hyper no timer, and without one hyper's header deadline never runs,
/// so a connection that sends nothing is held for ever.
async fn serve_lane(
    mut lane: LaneListener,
    fronts: Fronts,
    header_timeout: Duration,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = lane.accept() => accepted,
        };
        // Without TCP_NODELAY a response written in more than one segment waits for the
        // client's delayed ACK (~40 ms) on every call after the first on a kept-alive
        // connection.
        if let Err(e) = stream.get_ref().set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on an accepted connection");
        }
        let front = fronts.front(stream.client());
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let front = front.clone();
            async move { Ok::<_, Infallible>(front.serve(request.map(Body::new)).await) }
        });
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::trace!(error = %e, %peer, "connection ended with an error");
            }
        });
    }
    graceful.shutdown().await;
    Ok(())
}

/// Makes each accepted connection its [`Front`].
#[derive(Clone)]
struct Fronts {
    guard: Arc<Guard>,
    direct: Arc<Direct>,
    router: Router,
}

impl Fronts {
    /// The front of a connection from `client`.
    fn front(&self, client: PeerClient) -> Front {
        Front {
            guard: self.guard.clone(),
            direct: self.direct.clone(),
            router: self.router.clone(),
            client,
            by_peer: Arc::from(format!("peer:{client}")),
        }
    }
}

/// One connection's requests, each taken in turn through the rate limit, then (off the public
/// paths) the credentials, then, on the MCP path, the direct path; what is left goes to the
/// router. One service where there were three middleware layers: each layer boxed the rest of
/// the stack and its own future again for every request.
#[derive(Clone)]
struct Front {
    guard: Arc<Guard>,
    direct: Arc<Direct>,
    router: Router,
    /// The client the connection's peer address is counted as.
    client: PeerClient,
    /// The client a request without an OAuth token is counted as.
    by_peer: Arc<str>,
}

impl Front {
    async fn serve(mut self, request: Request) -> Response {
        // Every request is rate limited first, so guessing tokens is throttled too.
        if let Some(refused) = self.guard.over_rate(self.client) {
            return refused;
        }
        // Two `Host` or `Origin` headers: the checks below read one, another part the other
        // (RFC 9112 §3.2 answers such a request 400).
        if let Some(refused) = repeated_header(&request) {
            return refused;
        }
        // Probes and the metadata a client reads before it has a token are all that is open.
        if self.guard.public.iter().any(|p| p == request.uri().path()) {
            return self.route(request).await;
        }
        // The header is taken out: a borrowed request cannot be held across the token check.
        let presented = request.headers().get(header::AUTHORIZATION).cloned();
        let (access, client) = match self.guard.credentials(presented, &self.by_peer).await {
            Ok(found) => found,
            Err(refused) => return refused,
        };
        let mut request = request;
        if let Access::Scopes(_) = &access {
            request = match self.guard.within_scopes(request, &access).await {
                Ok(request) => request,
                Err(refused) => return refused,
            };
        }
        if let Some(refused) = self.foreign_session(&request, &client) {
            return refused;
        }
        let Passed {
            mut request,
            access,
            client,
        } = if request.uri().path() == MCP_PATH {
            match self.direct.take(request, access, client).await {
                Ok(answered) => return answered,
                Err(passed) => passed,
            }
        } else {
            Passed {
                request,
                access,
                client,
            }
        };
        // A request without a session that comes back with one began a session.
        let may_begin =
            request.uri().path() == MCP_PATH && !request.headers().contains_key(SESSION_ID_HEADER);
        request.extensions_mut().insert(access);
        request.extensions_mut().insert(client.clone());
        let response = self.route(request).await;
        let begun = response
            .headers()
            .get(SESSION_ID_HEADER)
            .and_then(|id| id.to_str().ok());
        if let Some(session) = begun.filter(|_| may_begin)
            && let Err(refused) = self.guard.sessions.admit(&client, session.into()).await
        {
            return refusal(StatusCode::TOO_MANY_REQUESTS, refused.to_string());
        }
        response
    }

    /// The refusal of a request on an MCP session this client did not begin (another client's,
    /// or one that does not exist): 404, the spec's answer, after which a client begins a new
    /// one; the same answer either way.
    fn foreign_session(&self, request: &Request, client: &ClientId) -> Option<Response> {
        if request.uri().path() != MCP_PATH {
            return None;
        }
        let session = request.headers().get(SESSION_ID_HEADER)?.to_str().ok()?;
        let refused = self.guard.sessions.check_owner(client, session).err()?;
        tracing::info!(
            client = %client.owner,
            method = %request.method(),
            "a request on an MCP session this client did not begin is refused"
        );
        Some(refusal(StatusCode::NOT_FOUND, refused.to_string()))
    }

    async fn route(&mut self, request: Request) -> Response {
        match self.router.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

/// `/readyz`: components loaded and the state database reachable.
async fn ready(State(served): State<Arc<Served>>) -> Response {
    let host = served.host();
    if host.components().is_empty() {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no component is loaded\n".into(),
        );
    }
    let state = host.services().state().clone();
    // The check may connect to PostgreSQL, which blocks.
    let checked = tokio::task::spawn_blocking(move || state.ping()).await;
    match checked {
        Ok(Ok(())) => (StatusCode::OK, "ready\n").into_response(),
        Ok(Err(e)) => refusal(StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {e}\n")),
        Err(e) => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: the database check failed: {e}\n"),
        ),
    }
}

/// The RFC 9728 protected-resource metadata, naming the scopes the policy defines.
async fn resource_metadata(State(guard): State<Arc<Guard>>) -> Response {
    let Some(oauth) = &guard.auth.oauth else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let host = guard.served.host();
    let scopes: Vec<&str> = host
        .policy()
        .oauth
        .scopes
        .keys()
        .map(String::as_str)
        .collect();
    let document = metadata::document(oauth.resource(), oauth.issuer(), &scopes);
    (
        [(header::CONTENT_TYPE, "application/json")],
        document.to_string(),
    )
        .into_response()
}

impl Guard {
    /// A 429 naming when to retry, if `client` sent more requests than the server allows.
    fn over_rate(&self, client: PeerClient) -> Option<Response> {
        if self.limiter.len() > RATE_KEYS_PRUNE_AT {
            self.limiter.retain_recent();
        }
        let not_until = self.limiter.check_key(&client).err()?;
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let mut response = refusal(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "rate limited: {client} sent more requests than this server allows per client \
                 (one address, one /64 for IPv6, and one user on this machine); \
                 retry in {} ms",
                wait.as_millis()
            ),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        Some(response)
    }

    /// The request's credentials decide its access (the static token: everything offered; an
    /// OAuth token: what its scopes reach) and who it counts as (the token's application and
    /// user, else `by_peer`).
    async fn credentials(
        &self,
        presented: Option<HeaderValue>,
        by_peer: &str,
    ) -> Result<(Access, ClientId), Response> {
        let by_peer = ClientId::own(by_peer);
        let Auth { token, oauth } = &self.auth;
        if token.is_none() && oauth.is_none() {
            return Ok((Access::All, by_peer));
        }
        let Some(presented) = presented else {
            return Err(match oauth {
                Some(oauth) => challenge(
                    StatusCode::UNAUTHORIZED,
                    metadata::missing_token(oauth.metadata_url()),
                    format!(
                        "missing access token: send `Authorization: Bearer <token>` with a token \
                         from {} (its metadata: {})",
                        oauth.issuer(),
                        oauth.metadata_url()
                    ),
                ),
                None => unauthorized(
                    "missing bearer token: send `Authorization: Bearer <token>` (the token \
                     file's path is printed when `chitin serve --http` starts)",
                ),
            });
        };
        if token
            .as_ref()
            .is_some_and(|t| t.accepts(presented.as_bytes()))
        {
            return Ok((Access::All, by_peer));
        }
        let Some(oauth) = oauth else {
            let bearer = token::scheme_and_credentials(presented.as_bytes())
                .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case(b"bearer"));
            return Err(unauthorized(if bearer {
                "wrong bearer token"
            } else {
                "the Authorization header is not `Bearer <token>`: send the token file's \
                 token as `Authorization: Bearer <token>`"
            }));
        };
        let invalid = |message: String| {
            challenge(
                StatusCode::UNAUTHORIZED,
                metadata::invalid_token(oauth.metadata_url(), &message),
                message,
            )
        };
        // RFC 6750 §2.1: the scheme name is case-insensitive.
        let bearer = presented
            .to_str()
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        let Some(bearer) = bearer else {
            return Err(invalid(
                "the Authorization header is not `Bearer <token>`".into(),
            ));
        };
        match oauth.check(bearer).await {
            Ok(grant) => {
                let client = ClientId {
                    owner: grant.holder(),
                    person: grant.person(),
                };
                Ok((Access::Scopes(Arc::new(grant.scopes)), client))
            }
            // Fail closed: without the issuer's keys no token is taken.
            Err(e) if e.is_unavailable() => Err(refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{e}; retry later"),
            )),
            Err(e) => Err(invalid(e.to_string())),
        }
    }

    /// The request, when every tool it calls is within `access`; else a 403 naming the scopes
    /// that would reach the tool.
    async fn within_scopes(&self, request: Request, access: &Access) -> Result<Request, Response> {
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
            .await
            .map_err(|e| {
                refusal(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("cannot read the request body (at most {MAX_BODY_BYTES} bytes): {e}"),
                )
            })?;
        let host = self.served.host();
        let policy = host.policy();
        if let Some(tool) = called_tools(&bytes)
            .into_iter()
            .find(|tool| !access.reaches(policy, tool))
        {
            let scopes = policy.scopes_reaching(&tool);
            let metadata_url = self.auth.oauth.as_ref().map_or("", |o| o.metadata_url());
            let message = if scopes.is_empty() {
                format!("insufficient scope: no scope of this server reaches `{tool}`")
            } else {
                format!(
                    "insufficient scope: calling `{tool}` needs a token with the scope {}",
                    scopes.join(" or ")
                )
            };
            return Err(challenge(
                StatusCode::FORBIDDEN,
                metadata::insufficient_scope(metadata_url, &scopes),
                message,
            ));
        }
        Ok(Request::from_parts(parts, Body::from(bytes)))
    }
}

/// The tools a JSON-RPC message (or batch) calls. Anything that does not parse calls none here;
/// the MCP service refuses it.
fn called_tools(body: &[u8]) -> Vec<String> {
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let messages = match message {
        Value::Array(batch) => batch,
        single => vec![single],
    };
    messages
        .iter()
        .filter(|m| m.get("method").and_then(Value::as_str) == Some("tools/call"))
        .filter_map(|m| m.pointer("/params/name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// The 400 of a request with more than one `Host` or `Origin` header.
fn repeated_header(request: &Request) -> Option<Response> {
    let name = [header::HOST, header::ORIGIN]
        .into_iter()
        .find(|name| request.headers().get_all(name).iter().nth(1).is_some())?;
    Some(refusal(
        StatusCode::BAD_REQUEST,
        format!("more than one `{name}` header: send exactly one"),
    ))
}

fn unauthorized(message: &str) -> Response {
    challenge(
        StatusCode::UNAUTHORIZED,
        "Bearer realm=\"chitin\"".to_owned(),
        message.to_owned(),
    )
}

fn challenge(status: StatusCode, www_authenticate: String, message: String) -> Response {
    let mut response = refusal(status, message);
    if let Ok(value) = HeaderValue::from_str(&www_authenticate) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

fn refusal(status: StatusCode, message: String) -> Response {
    (status, Body::from(message)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_bind_accepts_its_address_and_localhost_on_its_port() {
        let v4 = allowed_hosts("127.0.0.1:8080".parse().expect("addr"), &[]);
        assert_eq!(v4, ["127.0.0.1:8080", "localhost:8080"]);
        let v6 = allowed_hosts("[::1]:9000".parse().expect("addr"), &[]);
        assert_eq!(v6, ["[::1]:9000", "localhost:9000"]);
    }

    #[test]
    fn the_tools_a_message_or_batch_calls_are_found() {
        let one = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell"}}"#;
        assert_eq!(called_tools(one), ["shell"]);
        let batch = br#"[{"method":"tools/list"},{"method":"tools/call","params":{"name":"a"}}]"#;
        assert_eq!(called_tools(batch), ["a"]);
        assert!(called_tools(b"not json").is_empty());
    }

    #[test]
    fn a_public_bind_accepts_only_its_address_and_named_hosts() {
        let hosts = allowed_hosts("10.0.0.5:80".parse().expect("addr"), &["tools.lan".into()]);
        assert_eq!(hosts, ["10.0.0.5:80", "tools.lan"]);
    }
}
