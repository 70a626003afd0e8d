//! The wasmtime engine: component model, async, fuel, epochs, and the instance allocator.
//!
//! The tuned pooling settings come from measurements on this kind of machine
//! (`shared/reference/perf-notes.md`, `docs/performance-log.md`): with `PAGEMAP_SCAN` (Linux
//! ≥ 6.7) and memory kept resident, a fresh instance per call costs ~9 µs and two threads scale
//! ~1.9×; without it, default pooling scales negatively (madvise takes the mm lock) and a
//! smaller keep-resident size is better.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch ticker advances: the granularity of deadlines and cancellation.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Keep-resident size with `PAGEMAP_SCAN`: only dirty pages are reset, so keeping memory
/// resident avoids page faults without paying for a full memset. 4 MiB covers a Rust
/// component's 1 MiB stack and the heap of a 1 MiB result (`read_file` of 1 MiB: 2.5 → 1.9 ms,
/// no change to a small call); a slot keeps at most what its calls touched, so it costs memory
/// only in slots that ran large calls.
const KEEP_RESIDENT_PAGEMAP: usize = 4 * 1024 * 1024;
/// Keep-resident size without `PAGEMAP_SCAN`: the whole region is memset, so keep it small.
const KEEP_RESIDENT_MEMSET: usize = 64 * 1024;

/// Which instance allocator the engine uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocatorProfile {
    /// Pooling, tuned as measured: `PAGEMAP_SCAN` where the kernel has it, keep-resident sized for it.
    #[default]
    Tuned,
    /// Pooling with wasmtime's defaults (for comparison in benchmarks).
    PoolingDefault,
    /// No pooling: every instance maps fresh memory (the fallback where pooling cannot reserve).
    OnDemand,
}

/// Engine settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOptions {
    /// The instance allocator.
    pub allocator: AllocatorProfile,
    /// How many calls may be live at once (pool slots).
    pub max_live_instances: u32,
    /// Override of the tuned keep-resident size (bytes of memory and table kept resident per slot
    /// between calls); `None` uses the measured default. For benchmarks.
    pub keep_resident: Option<usize>,
}

impl Default for EngineOptions {
    /// Tuned pooling with 1000 slots (wasmtime's own pool default), measured keep-resident size.
    fn default() -> Self {
        Self {
            allocator: AllocatorProfile::Tuned,
            max_live_instances: 1000,
            keep_resident: None,
        }
    }
}

/// What the engine ended up with, for the start banner and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineReport {
    /// The allocator in use (may differ from the request after a fallback).
    pub allocator: AllocatorProfile,
    /// Whether `PAGEMAP_SCAN` is in use.
    pub pagemap_scan: bool,
    /// How many calls the pool has room for at once; `None` without a pool.
    pub instance_slots: Option<u32>,
}

/// Build the engine. If the pooling allocator cannot reserve its address space (a restricted
/// environment), fall back to on-demand allocation and say so.
pub fn build(options: &EngineOptions) -> anyhow::Result<(Engine, EngineReport)> {
    let pagemap = PoolingAllocationConfig::is_pagemap_scan_available();
    let result = match options.allocator {
        AllocatorProfile::OnDemand => None,
        AllocatorProfile::PoolingDefault => Some((pooling(options, None), false)),
        AllocatorProfile::Tuned => {
            let measured = if pagemap {
                KEEP_RESIDENT_PAGEMAP
            } else {
                KEEP_RESIDENT_MEMSET
            };
            let keep = options.keep_resident.unwrap_or(measured);
            Some((pooling(options, Some((keep, pagemap))), pagemap))
        }
    };
    if let Some((pool, pagemap_used)) = result {
        let mut config = base_config();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        match Engine::new(&config) {
            Ok(engine) => {
                let report = EngineReport {
                    allocator: options.allocator,
                    pagemap_scan: pagemap_used,
                    instance_slots: Some(options.max_live_instances),
                };
                return Ok((engine, report));
            }
            Err(e) => {
                tracing::warn!(error = %e, "pooling allocator unavailable; falling back to on-demand allocation");
            }
        }
    }
    let engine = Engine::new(&base_config())?;
    let report = EngineReport {
        allocator: AllocatorProfile::OnDemand,
        pagemap_scan: false,
        instance_slots: None,
    };
    Ok((engine, report))
}

/// An engine to compile on and then drop: the same settings as [`build`]'s, so its artifacts load
/// in that engine, without the pooling allocator's reservations.
pub fn compile_only() -> wasmtime::Result<Engine> {
    Engine::new(&base_config())
}

fn base_config() -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .cranelift_opt_level(wasmtime::OptLevel::Speed);
    config
}

fn pooling(options: &EngineOptions, tuned: Option<(usize, bool)>) -> PoolingAllocationConfig {
    let n = options.max_live_instances;
    let mut pool = PoolingAllocationConfig::default();
    // A Rust wasm32-wasip2 component instantiates a few core modules (the program plus the
    // canonical-ABI shims), each possibly with a table; size the pools so `n` calls fit.
    pool.total_component_instances(n)
        .total_core_instances(n.saturating_mul(4))
        .total_memories(n.saturating_mul(2))
        .total_tables(n.saturating_mul(4))
        .total_stacks(n)
        // Every slot can hold the largest memory a policy's ceiling can allow; the reservation
        // is address space, not memory, and the per-call cap is the store's limiter.
        .max_memory_size(crate::limits::MAX_MEMORY_BYTES);
    if let Some((keep_resident, pagemap)) = tuned {
        pool.linear_memory_keep_resident(keep_resident)
            .table_keep_resident(keep_resident)
            .pagemap_scan(if pagemap { Enabled::Yes } else { Enabled::No });
    }
    pool
}

/// The one epoch ticker of an engine: a thread that advances the epoch every [`EPOCH_TICK`] so
/// running calls notice their deadline. It stops when dropped or when the engine is gone.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Start ticking `engine`.
    pub fn start(engine: &Engine) -> std::io::Result<Self> {
        let weak = engine.weak();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("chitin-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            // The thread wakes within one tick; a panic in it has nothing to report here.
            let _ = thread.join();
        }
    }
}
