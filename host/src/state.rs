//! The per-call store state: one field per capability and one resource table.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::approver::{CallContext, Consenter};
use crate::call::Position;
use crate::call::{Call, CallTarget};
use crate::call_log::SharedLog;
use crate::caps::approval::ApprovalCtx;
use crate::caps::log::LogCtx;
use crate::caps::progress::ProgressCtx;
use crate::caps::wasi::open_files::{CountsOpenFiles, OpenFiles, Share};
use crate::caps::{CallStore, Contexts, wasi};
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
    pub invoke: Option<Position<'a>>,
    /// The tool called and its arguments (`None` while loading).
    pub target: Option<CallTarget<'a>>,
}

/// Everything one call's store holds. Built fresh per call and dropped with the instance.
pub struct HostState {
    pub(crate) table: ResourceTable,
    pub(crate) wasi: WasiCtx,
    pub(crate) log: LogCtx,
    pub(crate) approval: ApprovalCtx,
    pub(crate) limiter: MemoryLimiter,
    /// The files the call holds open, within its bound and the process's.
    pub(crate) open_files: OpenFiles,
    pub(crate) progress: ProgressCtx,
    /// The granted capabilities' contexts (see `caps::capability_table!`).
    pub(crate) caps: Contexts,
    /// The host faults the call's capabilities met.
    pub(crate) faults: Faults,
    /// When the state was built: the call's start, from which its duration is measured.
    pub(crate) started: Instant,
    /// When the call must end (its timeout after `started`).
    pub(crate) deadline: Instant,
    /// The caller: a library the call uses runs for the same user.
    pub(crate) user: Arc<str>,
    /// Whose call it is: a library the call uses runs under the same holder's bounds.
    pub(crate) consenter: Consenter,
}

/// A call's state could not be built (a granted directory vanished, say).
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the call's capabilities: {0}")]
pub struct StateError(#[from] pub std::io::Error);

impl HostState {
    /// State for one call under the grant in `env`.
    pub fn new(env: &CallEnv<'_>) -> Result<Self, StateError> {
        let limits = &env.grant.limits;
        let granted = &env.grant.capabilities;
        let faults = Faults::default();
        let started = Instant::now();
        let deadline = limits.deadline(started);
        let log = SharedLog::new(limits.log_entries, limits.log_entry_bytes);
        // The values of the secrets this call could reach: looked for in its requests before
        // credentials are injected, and redacted from what it returns.
        let reachable = granted.secrets.reachable().map_err(std::io::Error::other)?;
        let scanner = if reachable.is_empty() {
            LeakScanner::patterns_only()
        } else {
            Arc::new(
                LeakScanner::new(
                    reachable
                        .iter()
                        .map(|(name, value)| (name.as_str(), value.as_str())),
                )
                .map_err(std::io::Error::other)?,
            )
        };
        let call = Call {
            services: env.services,
            context: env.ctx,
            invoke: env.invoke,
            target: env.target,
            log: &log,
            scanner: &scanner,
            faults: &faults,
            deadline,
        };
        let caps = granted.contexts(&call);
        let mut wasi = wasi::builder(&log, limits.output_bytes);
        granted.wasi(&mut wasi)?;
        Ok(Self {
            caps,
            table: ResourceTable::new(),
            wasi: wasi.build(),
            approval: ApprovalCtx::new(
                env.ctx.approver.clone(),
                scanner.clone(),
                env.grant
                    .id()
                    .cloned()
                    .unwrap_or_else(|| "(no manifest)".into()),
                env.target,
            ),
            limiter: MemoryLimiter::new(limits.memory_bytes),
            open_files: OpenFiles::new(Share::of_this_process()),
            progress: ProgressCtx {
                events: env.ctx.events.clone(),
                scanner: scanner.clone(),
            },
            log: LogCtx {
                log,
                events: env.ctx.events.clone(),
                scanner,
            },
            faults,
            started,
            deadline,
            user: env.ctx.user.clone(),
            consenter: env.ctx.consenter.clone(),
        })
    }
}

impl CallStore for HostState {
    fn contexts(&mut self) -> (&mut Contexts, &mut ResourceTable) {
        (&mut self.caps, &mut self.table)
    }

    fn log(&mut self) -> &mut LogCtx {
        &mut self.log
    }

    fn progress(&mut self) -> &mut ProgressCtx {
        &mut self.progress
    }

    fn approval(&mut self) -> &mut ApprovalCtx {
        &mut self.approval
    }
}

impl CountsOpenFiles for HostState {
    fn open_files(&mut self) -> &mut OpenFiles {
        &mut self.open_files
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
