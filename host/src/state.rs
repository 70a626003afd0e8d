//! The per-call store state: one field per capability and one resource table.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::approval::CallContext;
use crate::caps::approval::ApprovalCtx;
use crate::caps::client::ClientCtx;
use crate::caps::http::HttpCtx;
use crate::caps::http::outgoing::HttpCall;
use crate::caps::invoke::{InvokeCtx, InvokeScope};
use crate::caps::kv::KvCtx;
use crate::caps::log::{LogCtx, SharedLog};
use crate::caps::process::ProcessCtx;
use crate::caps::progress::ProgressCtx;
use crate::caps::secrets::SecretsCtx;
use crate::caps::wasi;
use crate::fault::Faults;
use crate::grant::Grant;
use crate::leak::LeakScanner;
use crate::limits::MemoryLimiter;
use crate::services::Services;

/// What one call's state is built from: the component's grant, the host's services, and who is
/// calling.
#[derive(Clone, Copy)]
pub struct CallEnv<'a> {
    /// The component's effective grant.
    pub grant: &'a Grant,
    /// The host's workspace, data directory and database.
    pub services: &'a Arc<Services>,
    /// The caller and their approver.
    pub ctx: &'a CallContext,
    /// Where the call sits in a chain of invocations (`None` while loading).
    pub invoke: Option<&'a InvokeScope>,
}

/// Everything one call's store holds. Built fresh per call and dropped with the instance.
pub struct HostState {
    pub(crate) table: ResourceTable,
    pub(crate) wasi: WasiCtx,
    pub(crate) log: LogCtx,
    pub(crate) process: ProcessCtx,
    pub(crate) approval: ApprovalCtx,
    pub(crate) client: ClientCtx,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) progress: ProgressCtx,
    pub(crate) kv: KvCtx,
    pub(crate) invoke: InvokeCtx,
    pub(crate) secrets: SecretsCtx,
    pub(crate) http: HttpCtx,
    /// The host faults the call's capabilities met.
    pub(crate) faults: Faults,
}

/// A call's state could not be built (a granted directory vanished, say).
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the call's capabilities: {0}")]
pub struct StateError(#[from] pub std::io::Error);

impl HostState {
    /// State for one call under the grant in `env`.
    pub fn new(env: &CallEnv<'_>) -> Result<Self, StateError> {
        let limits = &env.grant.limits;
        let faults = Faults::default();
        let log = SharedLog::new(limits.log_entries, limits.log_entry_bytes);
        // The values of the secrets this call could reach: looked for in its requests before
        // credentials are injected, and redacted from what it returns.
        let reachable = env
            .grant
            .secrets
            .reachable()
            .map_err(std::io::Error::other)?;
        let scanner = Arc::new(LeakScanner::new(
            reachable
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str())),
        ));
        let http = HttpCtx::new(Arc::new(HttpCall::new(
            env.grant.http.clone(),
            env.services.clone(),
            scanner.clone(),
            env.ctx.user.clone(),
            std::time::Instant::now() + limits.timeout(),
            log.clone(),
            faults.clone(),
        )));
        Ok(Self {
            http,
            table: ResourceTable::new(),
            wasi: wasi::ctx(&log, env.grant)?,
            log: LogCtx {
                log,
                events: env.ctx.events.clone(),
                scanner: scanner.clone(),
            },
            process: ProcessCtx {
                config: env.grant.process.clone(),
                events: env.ctx.events.clone(),
                scratch: None,
            },
            approval: ApprovalCtx::new(
                env.ctx.approver.clone(),
                scanner.clone(),
                env.grant.id().unwrap_or_else(|| "(no manifest)".into()),
            ),
            client: ClientCtx::new(
                env.ctx.client.clone(),
                env.grant.client.clone(),
                scanner.clone(),
            ),
            limiter: MemoryLimiter::new(limits.memory_bytes),
            progress: ProgressCtx {
                events: env.ctx.events.clone(),
                scanner: scanner.clone(),
            },
            kv: KvCtx::new(&env.grant.kv, faults.clone()),
            invoke: InvokeCtx {
                aliases: env.grant.invoke.clone(),
                scope: env.invoke.cloned(),
                faults: faults.clone(),
            },
            secrets: SecretsCtx {
                config: env.grant.secrets.clone(),
                faults: faults.clone(),
            },
            faults,
        })
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
