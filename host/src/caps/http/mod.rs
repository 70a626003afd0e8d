//! Outbound HTTP: `wasi:http/outgoing-handler` (wasmtime-wasi-http) with the host's send hook
//! enforcing the component's grant (see [`outgoing`]). A grant of HTTP is never a grant of
//! `wasi:sockets`, which is not linked at all.
//!
//! Config from the manifest ([`HttpConfig`], resolved once at load against the policy),
//! per-call state ([`HttpCtx`]), linker wiring ([`add_to_linker`]).

pub mod address;
pub mod allowlist;
pub mod credentials;
pub mod error;
pub mod outgoing;
pub mod rate;
pub mod tls;

use std::sync::Arc;

use chitin_registry::manifest::HttpGrant;
use chitin_registry::manifest::credentials::CredentialMapping;
use wasmtime::component::Linker;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::policy::Policy;
use crate::state::HostState;

/// The interface prefix this module links.
pub const LINKED_PACKAGE: &str = "wasi:http/";

/// A component's outbound HTTP grant, resolved against the policy.
pub struct HttpConfig {
    /// Where it may send requests.
    pub allowlist: allowlist::Allowlist,
    /// Credentials the host injects into its requests.
    pub credentials: Vec<CredentialMapping>,
    /// Names of the secrets its requests can carry (their values are redacted from its output).
    pub secret_names: Vec<String>,
    /// Its rate limits, clamped by the policy.
    pub rate: rate::RateLimits,
    /// Which addresses it may reach (the SSRF rules and the policy's exceptions).
    pub addresses: Arc<address::AddressPolicy>,
    /// The TLS client configuration (public roots and the policy's CA files).
    pub tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("allowlist", &self.allowlist)
            .field("credentials", &self.credentials.len())
            .field("rate", &self.rate)
            .finish_non_exhaustive()
    }
}

/// The HTTP grant could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum HttpGrantError {
    /// The TLS configuration could not be built.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// A credential mapping names a secret outside the component's secrets grant.
    #[error(
        "capabilities.http.credentials: secret `{0}` is not covered by capabilities.secrets.names"
    )]
    SecretOutsideGrant(String),
}

/// Resolve `grant` (and the secrets globs it may draw on) against `policy`.
pub fn configure(
    grant: Option<&HttpGrant>,
    secret_globs: &[String],
    policy: &Policy,
) -> Result<Option<Arc<HttpConfig>>, HttpGrantError> {
    let Some(grant) = grant else {
        return Ok(None);
    };
    let http_policy = policy.http();
    let globs = crate::caps::secrets::glob_set(secret_globs);
    for mapping in &grant.credentials {
        if !globs.is_match(&mapping.secret) {
            return Err(HttpGrantError::SecretOutsideGrant(mapping.secret.clone()));
        }
    }
    Ok(Some(Arc::new(HttpConfig {
        allowlist: allowlist::Allowlist::new(Some(grant), &http_policy.plain_http_hosts),
        secret_names: grant.credentials.iter().map(|m| m.secret.clone()).collect(),
        credentials: grant.credentials.clone(),
        rate: rate::RateLimits::resolve(grant.rate_limit.as_ref(), http_policy.rate_ceiling()),
        addresses: Arc::new(http_policy.address_policy()),
        tls: tls::client_config(&http_policy.ca_files)?,
    })))
}

/// The per-call state of the HTTP capability.
pub struct HttpCtx {
    ctx: WasiHttpCtx,
    hooks: outgoing::Hooks,
}

impl HttpCtx {
    /// State for one call.
    pub fn new(call: Arc<outgoing::HttpCall>) -> Self {
        Self {
            ctx: WasiHttpCtx::new(),
            hooks: outgoing::Hooks(call),
        }
    }

    /// The call's outbound state (tool name, injected secrets).
    pub fn call(&self) -> &Arc<outgoing::HttpCall> {
        &self.hooks.0
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http.ctx,
            table: &mut self.table,
            hooks: &mut self.http.hooks,
        }
    }
}

/// Link `wasi:http/types` and `wasi:http/outgoing-handler` (async).
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
}
