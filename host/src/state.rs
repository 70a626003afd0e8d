//! The per-call store state: one field per capability and one resource table.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::caps::log::{LogCtx, SharedLog};
use crate::caps::progress::ProgressCtx;
use crate::caps::wasi;
use crate::events::CallEvents;
use crate::limits::{Limits, MemoryLimiter};

/// Everything one call's store holds. Built fresh per call and dropped with the instance.
pub struct HostState {
    pub(crate) table: ResourceTable,
    pub(crate) wasi: WasiCtx,
    pub(crate) log: LogCtx,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) progress: ProgressCtx,
}

impl HostState {
    /// State for one call under `limits`.
    pub fn new(limits: &Limits) -> Self {
        Self::with_events(limits, CallEvents::none())
    }

    /// State for one call under `limits` whose progress and log reports go to `events`.
    pub fn with_events(limits: &Limits, events: CallEvents) -> Self {
        let log = SharedLog::new(limits.log_entries, limits.log_entry_bytes);
        Self {
            table: ResourceTable::new(),
            wasi: wasi::ctx(&log),
            log: LogCtx {
                log,
                events: events.clone(),
            },
            limiter: MemoryLimiter::new(limits.memory_bytes),
            progress: ProgressCtx { events },
        }
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
