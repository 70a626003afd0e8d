//! The per-call store state: one field per capability and one resource table.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::caps::log::{LogCtx, SharedLog};
use crate::caps::process::ProcessCtx;
use crate::caps::wasi;
use crate::limits::{Limits, MemoryLimiter};

/// Everything one call's store holds. Built fresh per call and dropped with the instance.
pub struct HostState {
    pub(crate) table: ResourceTable,
    pub(crate) wasi: WasiCtx,
    pub(crate) log: LogCtx,
    pub(crate) process: ProcessCtx,
    pub(crate) limiter: MemoryLimiter,
}

impl HostState {
    /// State for one call under `limits`.
    pub fn new(limits: &Limits) -> Self {
        let log = SharedLog::new(limits.log_entries, limits.log_entry_bytes);
        Self {
            table: ResourceTable::new(),
            wasi: wasi::ctx(&log),
            log: LogCtx { log },
            process: ProcessCtx::default(),
            limiter: MemoryLimiter::new(limits.memory_bytes),
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
