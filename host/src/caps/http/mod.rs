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
pub mod pool;
pub mod rate;
pub mod returned_values;
pub mod tls;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use chitin_registry::manifest::CredentialMapping;
use chitin_registry::manifest::HttpGrant;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi_http::p2::bindings::{LinkOptions, http as wit};
use wasmtime_wasi_http::{WasiHttp, WasiHttpCtx, WasiHttpCtxView};

use crate::call::Call;
use crate::capability::{Capability, CapabilityError, Cut, Holds, Load};
use crate::policy::Policy;

/// The outbound HTTP capability.
pub struct Http;

impl Capability for Http {
    type Section = HttpGrant;
    type Config = Option<Arc<HttpConfig>>;
    type Ctx = HttpCtx;
    const LINKS: &'static [&'static str] = &["wasi:http/"];

    fn configure(
        section: Option<&HttpGrant>,
        load: &Load<'_>,
        cuts: &mut Vec<Cut>,
    ) -> Result<Self::Config, CapabilityError> {
        let credentials = credentials::configure(section, load.granted.secrets.as_ref(), cuts);
        configure(section, credentials, load.id, load.policy).map_err(CapabilityError::new::<Self>)
    }

    fn ctx(config: &Self::Config, call: &Call<'_>) -> HttpCtx {
        let hooks = match config {
            Some(_) => {
                outgoing::Hooks::Granted(Arc::new(outgoing::HttpCall::new(config.clone(), call)))
            }
            None => outgoing::Hooks::NoGrant(call.log.clone()),
        };
        HttpCtx::new(hooks)
    }

    /// Link `wasi:http/types` and `wasi:http/outgoing-handler` (async).
    fn add_to_linker<T: Holds<Self>>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        fn view<T: Holds<Http>>(state: &mut T) -> WasiHttpCtxView<'_> {
            let (ctx, table) = state.parts();
            ctx.view(table)
        }
        wit::outgoing_handler::add_to_linker::<T, WasiHttp>(linker, view)?;
        wit::types::add_to_linker::<T, WasiHttp>(linker, &LinkOptions::default().into(), view)
    }
}

/// The HTTP grant cannot be resolved at load.
#[derive(Debug, thiserror::Error)]
#[error("http grant: policy http.ca_files: {0}")]
pub struct HttpGrantError(#[from] tls::TlsError);

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
    /// This load of this grant, unique in the process: kept-alive connections are reused only
    /// under the same owner, so never between components, publishers or reloads.
    pub owner: u64,
    /// What its requests count under in the rate windows when it runs as a library, called by
    /// another component rather than by name: `library:namespace/name`, which no tool's name
    /// can be (tool names have no `:`), so each library has windows of its own.
    pub as_library: Arc<str>,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("credentials", &self.credentials.len())
            .field("rate", &self.rate)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

/// Resolve the `grant` of component `id` against `policy`; `credentials` are the grant's
/// mappings that survived the secrets grant (see `credentials::configure`).
pub fn configure(
    grant: Option<&HttpGrant>,
    credentials: Arc<[CredentialMapping]>,
    id: &str,
    policy: &Policy,
) -> Result<Option<Arc<HttpConfig>>, HttpGrantError> {
    static LOADS: AtomicU64 = AtomicU64::new(0);
    let Some(grant) = grant else {
        return Ok(None);
    };
    Ok(Some(Arc::new(HttpConfig {
        allowlist: allowlist::Allowlist::new(Some(grant), policy.plain_http_hosts()),
        credentials,
        rate: rate::RateLimits::resolve(grant.rate_limit.as_ref(), policy.http_rate_ceiling()),
        addresses: policy.address_policy(),
        tls: tls::client_config(&policy.http.ca_files)?,
        owner: LOADS.fetch_add(1, Ordering::Relaxed),
        as_library: Arc::from(format!("library:{id}")),
    })))
}

/// The per-call state of the HTTP capability.
pub struct HttpCtx {
    ctx: WasiHttpCtx,
    hooks: outgoing::Hooks,
}

impl HttpCtx {
    /// State for one call, whose requests go to `hooks`.
    pub fn new(hooks: outgoing::Hooks) -> Self {
        Self {
            ctx: WasiHttpCtx::new(),
            hooks,
        }
    }

    /// What wasmtime-wasi-http's host functions see: the context, the hooks that enforce the
    /// grant, and the call's resource table.
    pub fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiHttpCtxView<'a> {
        WasiHttpCtxView {
            ctx: &mut self.ctx,
            table,
            hooks: &mut self.hooks,
        }
    }
}

/// A lock, through poisoning: another caller's panic leaves the names, counts and times it
/// guards whole.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
