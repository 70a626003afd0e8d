//! `chitin serve`: serve the tools over MCP, on stdio (default) or Streamable HTTP (`--http`).

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use url::Url;

use super::{Cli, Command, Exit, open_host, open_host_with, shared_set};
use crate::data_dir::DataDir;
use crate::host::Host;
use crate::mcp::http::{self, Auth, HttpOptions};
use crate::mcp::oauth::{OAuthOptions, ResourceServer};
use crate::mcp::token::BearerToken;
use crate::mcp::{McpServer, Served, stdio, watch};

/// Arguments of `chitin serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Serve MCP over Streamable HTTP on this address (e.g. 127.0.0.1:8765) at path /mcp,
    /// instead of stdio. Clients must send the bearer token kept in the data directory.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,

    /// With --http: also accept this Host header (name or name:port); repeatable. By default
    /// only the bound address (and `localhost` for a loopback bind) is accepted, against DNS
    /// rebinding.
    #[arg(long, value_name = "HOST", requires = "http")]
    pub allow_host: Vec<String>,

    /// With --http: requests per second one client may make (bursts of twice that); a client
    /// is an address, or for IPv6 a /64 (of which one host may use any address), and on this
    /// machine also the user owning the peer's socket.
    #[arg(long, value_name = "N", default_value = "200", requires = "http")]
    pub rate_limit: NonZeroU32,

    /// With --http: connections one client (as --rate-limit counts one) may hold open; more
    /// are closed as they come. Raise it behind a reverse proxy, where every client has the
    /// proxy's address.
    #[arg(
        long,
        value_name = "N",
        default_value_t = http::MAX_CONNECTIONS_PER_CLIENT,
        requires = "http"
    )]
    pub max_connections_per_client: NonZeroUsize,

    /// With --http: seconds a connection may take to send a request's headers (counted from
    /// when it opened or was last answered) before it is closed.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = http::HEADER_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..),
        requires = "http"
    )]
    pub header_timeout: u64,

    /// With --http on a loopback address: accept requests without the bearer token. Only for
    /// test clients that cannot send one (the MCP conformance suite); any local process can
    /// then call the tools.
    #[arg(long, requires = "http", conflicts_with = "oauth_issuer")]
    pub insecure_no_token: bool,

    /// With --http: also accept OAuth 2.1 access tokens (JWTs) from this authorization server
    /// (an https:// issuer URL). A token reaches the tools its scopes cover (`[oauth] scopes` in
    /// the policy); the bearer token in the data directory keeps working.
    #[arg(long, value_name = "URL", requires = "http")]
    pub oauth_issuer: Option<String>,

    /// With --oauth-issuer: this server's resource URI, the audience tokens must name (default:
    /// http://ADDR/mcp for the bound address).
    #[arg(long, value_name = "URI", requires = "oauth_issuer")]
    pub oauth_resource: Option<String>,

    /// With --oauth-issuer: the issuer's JWK set URL (https://), when its metadata does not name
    /// one (default: the `jwks_uri` of its RFC 8414 or OpenID Connect metadata).
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub oauth_jwks_uri: Option<Url>,

    /// With --oauth-issuer: a PEM file of CA certificates trusted for the issuer's HTTPS besides
    /// the public roots; repeatable.
    #[arg(long, value_name = "FILE", requires = "oauth_issuer")]
    pub oauth_ca_file: Vec<PathBuf>,

    /// Tools per `tools/list` page.
    #[arg(long, value_name = "N", default_value_t = crate::mcp::PAGE_SIZE)]
    pub page_size: usize,

    /// Do not watch component directories; by default a `*.wasm` added to, replaced in or
    /// removed from a served directory reloads the tools and notifies clients.
    #[arg(long)]
    pub no_watch: bool,
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let host = open_host(cli).await?;
    let banner = banner(cli, &host);
    let served = Served::new(host);
    let _watcher = if args.no_watch {
        None
    } else {
        watch_components(cli, args, &served)?
    };
    let _following = shared_set::follow(
        reload_setup(cli, args),
        served.clone(),
        served.host().services().clone(),
    );
    match args.http {
        Some(addr) => serve_http(cli, args, addr, served, &banner).await,
        None => serve_stdio(McpServer::new(served, args.page_size), &banner).await,
    }
}

async fn serve_stdio(server: McpServer, banner: &str) -> anyhow::Result<Exit> {
    // The banner goes to stderr: stdout carries nothing but the protocol.
    errln!(
        "chitin {} serving MCP on stdio\n{banner}",
        env!("CARGO_PKG_VERSION")
    );
    let (reader, writer) = stdio_transport();
    if !stdio::serve(server, reader, writer).await? {
        tracing::debug!("the client hung up before the session began");
    }
    Ok(Exit::Ok)
}

/// An async reader and writer for the stdio transport.
type StdioTransport = (
    Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
);

/// stdin and stdout as the MCP transport. Pipes (how MCP clients start a server) are read and
/// written non-blocking on the runtime's own thread: tokio's stdin and stdout hand every read and
/// write to its blocking pool, a thread hand-off each way per message. Anything else (a
/// terminal, a file, a socket) keeps tokio's.
fn stdio_transport() -> StdioTransport {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let reader: Box<dyn tokio::io::AsyncRead + Send + Unpin> = match std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd)
    {
        Ok(pipe) => Box::new(pipe),
        Err(e) => {
            tracing::debug!(error = %e, "stdin is not a pipe; reading it through tokio's blocking pool");
            Box::new(tokio::io::stdin())
        }
    };
    let writer: Box<dyn tokio::io::AsyncWrite + Send + Unpin> = match std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Sender::from_owned_fd)
    {
        Ok(pipe) => Box::new(pipe),
        Err(e) => {
            tracing::debug!(error = %e, "stdout is not a pipe; writing it through tokio's blocking pool");
            Box::new(tokio::io::stdout())
        }
    };
    (reader, writer)
}

async fn serve_http(
    cli: &Cli,
    args: &Args,
    addr: SocketAddr,
    served: Arc<Served>,
    banner: &str,
) -> anyhow::Result<Exit> {
    if args.insecure_no_token && !addr.ip().is_loopback() {
        anyhow::bail!(
            "--insecure-no-token is refused on {addr}: it is only allowed on a loopback address \
             (127.0.0.1 or ::1)"
        );
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    let token = if args.insecure_no_token {
        errln!("WARNING: --insecure-no-token: requests are not authenticated");
        None
    } else {
        let token_path = DataDir::resolve(cli.data_dir.as_deref())?.http_token();
        let loaded = BearerToken::load_or_create(&token_path)?;
        if loaded.created {
            errln!(
                "new bearer token (shown only now; kept in {}):\n  {}",
                token_path.display(),
                loaded.token.reveal()
            );
        } else {
            errln!("bearer token: in {}", token_path.display());
        }
        Some(loaded.token)
    };
    let oauth = match &args.oauth_issuer {
        Some(issuer) => {
            let resource = match &args.oauth_resource {
                Some(resource) => resource.clone(),
                None => format!("http://{bound}{}", http::MCP_PATH),
            };
            let server = ResourceServer::new(OAuthOptions {
                issuer: issuer.clone(),
                resource,
                jwks_uri: args.oauth_jwks_uri.clone(),
                ca_files: args.oauth_ca_file.clone(),
            })?;
            errln!(
                "OAuth access tokens: from {} for the resource {} (metadata: {})",
                server.issuer(),
                server.resource(),
                server.metadata_url()
            );
            Some(Arc::new(server))
        }
        None => None,
    };
    // Announced once a client can use it: the token file is written (a client reads it as soon
    // as it sees the address) and the OAuth issuer checked.
    errln!(
        "chitin {} serving MCP over HTTP at http://{bound}{}\n{banner}",
        env!("CARGO_PKG_VERSION"),
        http::MCP_PATH
    );
    errln!(
        "accepted Host headers: {}",
        http::allowed_hosts(bound, &args.allow_host).join(", ")
    );
    let burst = args
        .rate_limit
        .saturating_mul(NonZeroU32::MIN.saturating_add(1));
    let options = HttpOptions {
        page_size: args.page_size,
        extra_hosts: args.allow_host.clone(),
        rate_per_second: args.rate_limit,
        burst,
        header_timeout: std::time::Duration::from_secs(args.header_timeout),
        max_connections_per_client: args.max_connections_per_client,
    };
    let shutdown = http::Shutdown::default();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot listen for SIGTERM")?;
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            // Ctrl-C: a person at the terminal wants it stopped now.
            _ = tokio::signal::ctrl_c() => {}
            // SIGTERM (an orchestrator draining the replica): stop accepting, let calls in
            // flight finish, end the sessions at the deadline.
            _ = terminate.recv() => {
                on_signal.accepting.cancel();
                errln!(
                    "SIGTERM: no longer accepting; finishing calls in flight (at most {} s)",
                    DRAIN.as_secs()
                );
                tokio::time::sleep(DRAIN).await;
            }
        }
        on_signal.accepting.cancel();
        on_signal.sessions.cancel();
    });
    http::serve(listener, served, Auth { token, oauth }, &options, shutdown).await?;
    Ok(Exit::Ok)
}

/// How long SIGTERM lets calls in flight run before the sessions are ended.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(20);

/// What the operator sees on stderr when serving starts.
fn banner(cli: &Cli, host: &Host) -> String {
    let policy = cli
        .policy
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "built-in policies/default.toml".into());
    let components: Vec<String> = host.components().iter().map(|c| c.name()).collect();
    let tools: Vec<&str> = host.tools().map(|t| t.name.as_str()).collect();
    format!(
        "components ({}): {}\ntools ({}): {}\nworkspace: {}\npolicy: {policy}",
        components.len(),
        components.join(", "),
        tools.len(),
        tools.join(", "),
        host.services().workspace().display()
    )
}

/// The options a reload reopens the host with: exactly those of the start, owned.
fn reload_setup(cli: &Cli, args: &Args) -> Arc<Cli> {
    Arc::new(Cli {
        data_dir: cli.data_dir.clone(),
        cache_dir: cli.cache_dir.clone(),
        components: cli.components.clone(),
        workspace: cli.workspace.clone(),
        policy: cli.policy.clone(),
        trusted_keys: cli.trusted_keys.clone(),
        state_url: cli.state_url.clone(),
        state_url_on_argv: cli.state_url_on_argv,
        verbose: cli.verbose,
        command: Command::Serve(args.clone()),
    })
}

/// Watch the served component directories and reload on change.
fn watch_components(
    cli: &Cli,
    args: &Args,
    served: &Arc<Served>,
) -> anyhow::Result<Option<notify::RecommendedWatcher>> {
    // The directories served: those named, or by default the folders the components came from
    // and the installed-components folder (created, so a first install is seen). A component
    // named as a file is served as it was at start.
    let dirs: Vec<PathBuf> = if cli.components.is_empty() {
        let installed = served.host().services().data_dir().components();
        std::fs::create_dir_all(&installed)
            .with_context(|| format!("cannot create {}", installed.display()))?;
        // A shared installed set is followed through the database, not the folder.
        let shared = cli.state_url.is_some();
        served
            .host()
            .components()
            .iter()
            .filter_map(|c| c.path.parent().map(|p| p.to_owned()))
            .chain(std::iter::once(installed.clone()))
            .filter(|dir| !(shared && dir == &installed))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    } else {
        cli.components
            .iter()
            .filter(|p| p.is_dir())
            .cloned()
            .collect()
    };
    if dirs.is_empty() {
        return Ok(None);
    }
    let setup = reload_setup(cli, args);
    // The reloaded host shares this one's services: the database allows one opener per
    // process, and the workspace and trust store stay those the server started with.
    let services = served.host().services().clone();
    let watcher = watch::spawn(&dirs, served.clone(), move || {
        let setup = setup.clone();
        let services = services.clone();
        async move { open_host_with(&setup, Some(services)).await }
    })
    .context("cannot watch the component directories")?;
    Ok(Some(watcher))
}
