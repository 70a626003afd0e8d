//! `chitin serve --http`: MCP over Streamable HTTP (rmcp's service mounted in axum), guarded by
//! a per-client rate limit and a bearer token, with Host/Origin checks against DNS rebinding and
//! a cap on request bodies. `/healthz` and `/readyz` answer probes without the token.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::mcp::token::BearerToken;
use crate::mcp::{McpServer, Served};

/// The path the MCP endpoint is served on.
pub const MCP_PATH: &str = "/mcp";
/// Liveness: 200 while the process serves.
pub const HEALTH_PATH: &str = "/healthz";
/// Readiness: 200 when components are loaded and the state database answers, else 503.
pub const READY_PATH: &str = "/readyz";

/// Largest request body accepted (JSON-RPC messages are small; tool arguments are capped too).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

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
    /// Requests per second one client address may make, sustained.
    pub rate_per_second: NonZeroU32,
    /// Requests one client address may make in a burst.
    pub burst: NonZeroU32,
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

struct Guard {
    /// `None` only for `--insecure-no-token` on a loopback address (conformance testing).
    token: Option<BearerToken>,
    limiter: DefaultKeyedRateLimiter<IpAddr>,
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

/// Serve MCP on `listener` until `shutdown` says stop. Requests must carry `token` unless it
/// is `None`.
pub async fn serve(
    listener: TcpListener,
    served: Arc<Served>,
    token: Option<BearerToken>,
    options: &HttpOptions,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let hosts = allowed_hosts(addr, &options.extra_hosts);
    // Browsers send Origin; only pages served from the accepted authorities may call in.
    let origins: Vec<String> = hosts.iter().map(|h| format!("http://{h}")).collect();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_cancellation_token(shutdown.sessions.child_token());
    let page_size = options.page_size;
    let probed = served.clone();
    let service = StreamableHttpService::new(
        move || Ok(McpServer::new(served.clone(), page_size)),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let guard = Arc::new(Guard {
        token,
        limiter: RateLimiter::keyed(
            Quota::per_second(options.rate_per_second).allow_burst(options.burst),
        ),
    });
    // Probes come from the orchestrator, without the token; they are added after the guard
    // layer, which therefore does not cover them.
    let app = Router::new()
        .route_service(MCP_PATH, service)
        .layer(middleware::from_fn_with_state(guard, check_request))
        .route(HEALTH_PATH, get(|| async { "ok\n" }))
        .route(READY_PATH, get(ready))
        .with_state(probed);
    // Without TCP_NODELAY a response written in more than one segment waits for the client's
    // delayed ACK (~40 ms) on every call after the first on a kept-alive connection.
    let listener = listener.tap_io(|stream| {
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on an accepted connection");
        }
    });
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown.accepting.cancelled_owned())
    .await
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

/// Rate limit first (so guessing tokens is throttled too), then the bearer token.
async fn check_request(
    State(guard): State<Arc<Guard>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    if guard.limiter.len() > RATE_KEYS_PRUNE_AT {
        guard.limiter.retain_recent();
    }
    if let Err(not_until) = guard.limiter.check_key(&peer.ip()) {
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let mut response = refusal(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "rate limited: {} sent more requests than this server allows per client; retry \
                 in {} ms",
                peer.ip(),
                wait.as_millis()
            ),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return response;
    }
    let Some(token) = &guard.token else {
        return next.run(request).await;
    };
    let presented = request.headers().get(header::AUTHORIZATION);
    let Some(presented) = presented else {
        return unauthorized(
            "missing bearer token: send `Authorization: Bearer <token>` (the token \
                             file's path is printed when `chitin serve --http` starts)",
        );
    };
    if !token.accepts(presented.as_bytes()) {
        return unauthorized("wrong bearer token");
    }
    next.run(request).await
}

fn unauthorized(message: &str) -> Response {
    let mut response = refusal(StatusCode::UNAUTHORIZED, message.to_owned());
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"chitin\""),
    );
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
    fn a_public_bind_accepts_only_its_address_and_named_hosts() {
        let hosts = allowed_hosts("10.0.0.5:80".parse().expect("addr"), &["tools.lan".into()]);
        assert_eq!(hosts, ["10.0.0.5:80", "tools.lan"]);
    }
}
