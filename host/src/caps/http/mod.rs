//! Outbound HTTP: `wasi:http/outgoing-handler` (wasmtime-wasi-http) with the host's send hook
//! enforcing the component's grant (see [`outgoing`]). A grant of HTTP is never a grant of
//! `wasi:sockets`, which is linked deny-all for every component (see `caps::wasi`).
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

use chitin_registry::manifest::CredentialMapping;
use chitin_registry::manifest::HttpGrant;
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
    /// Credentials the host injects into its requests (each names a granted secret).
    pub credentials: Arc<[CredentialMapping]>,
    /// Its rate limits, clamped by the policy.
    pub rate: rate::RateLimits,
    /// Which addresses it may reach (the SSRF rules and the policy's exceptions).
    pub addresses: address::AddressPolicy,
    /// The TLS client configuration (public roots and the policy's CA files).
    pub tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("credentials", &self.credentials.len())
            .field("rate", &self.rate)
            .finish_non_exhaustive()
    }
}

/// Resolve `grant` against `policy`; `credentials` are the grant's mappings that survived the
/// secrets grant (see `credentials::configure`).
pub fn configure(
    grant: Option<&HttpGrant>,
    credentials: Arc<[CredentialMapping]>,
    policy: &Policy,
) -> Result<Option<Arc<HttpConfig>>, tls::TlsError> {
    let Some(grant) = grant else {
        return Ok(None);
    };
    Ok(Some(Arc::new(HttpConfig {
        allowlist: allowlist::Allowlist::new(Some(grant), policy.plain_http_hosts()),
        credentials,
        rate: rate::RateLimits::resolve(grant.rate_limit.as_ref(), policy.http_rate_ceiling()),
        addresses: policy.address_policy(),
        tls: tls::client_config(&policy.http.ca_files)?,
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
