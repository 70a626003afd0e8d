//! One call in a fresh sandbox: a new store and instance with fuel, an epoch deadline, a
//! wall-clock timeout and a memory cap; whatever stops it becomes a typed [`ToolError`], and the
//! store is dropped with the instance so nothing carries over to the next call.

use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, ComponentExportIndex, InstancePre, TypedFunc, Val};
use wasmtime::{Engine, PoolConcurrencyLimitError, Store, Trap, UpdateDeadline};

use crate::bindings::ToolComponentPre;
use crate::bindings::chitin::tool::types::ToolError as WitToolError;
use crate::caps::log::{LogRecord, LogSource};
use crate::caps::wasi::open_files::OpenFilesError;
use crate::limits::{Limits, MIB};
use crate::state::HostState;
use crate::tool_error::ToolError;

/// Raised from the epoch callback when the wall-clock deadline has passed.
#[derive(Debug, thiserror::Error)]
#[error("deadline exceeded")]
struct DeadlineExceeded;

/// What one sandboxed run produced.
pub struct RunReport<T> {
    /// The outcome.
    pub result: Result<T, ToolError>,
    /// The call's log.
    pub log: LogRecord,
    /// Fuel the call burned.
    pub fuel_used: u64,
    /// Wall-clock time from the call's state being built to the end of the call.
    pub duration: Duration,
    /// The sandbox stopped the instance (a trap, its memory or fuel spent): the tool crashed
    /// rather than reported an error.
    pub crashed: bool,
}

/// A fresh store for one call holding `state`, under `limits`.
fn new_store(
    engine: &Engine,
    state: HostState,
    limits: &Limits,
) -> wasmtime::Result<Store<HostState>> {
    let deadline = state.deadline;
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_fuel(limits.fuel)?;
    // Every tick: stop at the deadline, otherwise yield so timers and cancellation get to run
    // even while the guest computes without calling the host. tokio's `yield_now` defers the
    // wake-up until the runtime has polled its I/O driver: on the one-thread runtime of stdio
    // serving, a plain yield would be polled again at once, and the client's
    // `notifications/cancelled` would wait up to 61 polls (over half a second) to be read.
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Err(DeadlineExceeded.into())
        } else {
            Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(tokio::task::yield_now()),
            ))
        }
    });
    store.set_epoch_deadline(1);
    Ok(store)
}

/// `body`'s output, or `None` if `deadline` passes first. The timer is only set once `body`
/// waits: most calls never wait on the host and end in their first poll, without one.
async fn until<F: Future>(deadline: Instant, body: F) -> Option<F::Output> {
    let mut body = pin!(body);
    let mut timer = None;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = body.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        // Unconstrained: a body that spends the task's cooperative budget must not keep the
        // timer from firing.
        let timer = timer.get_or_insert_with(|| {
            Box::pin(tokio::task::unconstrained(tokio::time::sleep_until(
                deadline.into(),
            )))
        });
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// Run `body` (which instantiates and calls) in a fresh store holding `state`; `body` gets the
/// store and evaluates to a future of the call's outcome.
macro_rules! run_in_sandbox {
    ($engine:expr, $state:expr, $limits:expr, |$store:ident| $body:expr) => {{
        let limits: &Limits = $limits;
        let state: HostState = $state;
        let (started, deadline) = (state.started, state.deadline);
        match new_store($engine, state, limits) {
            Err(e) => RunReport {
                result: Err(ToolError::ExecutionFailed(format!(
                    "cannot create a sandbox: {e:#}"
                ))),
                log: LogRecord::default(),
                fuel_used: 0,
                duration: started.elapsed(),
                crashed: false,
            },
            Ok(mut store) => {
                let outcome = {
                    let $store = &mut store;
                    until(deadline, $body).await
                };
                // Writes the call made are committed (or their failure recorded as its fault)
                // before anyone sees its result.
                store.data_mut().caps.settle().await;
                let fuel_used = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
                let log = store.data().log.log.lock().finish();
                let (result, crashed) = match outcome {
                    None => (Err(timeout_error(limits)), false),
                    Some(Err(trap)) => {
                        let trap: wasmtime::Error = trap;
                        // Neither a deadline nor a full pool is the component's doing.
                        let crashed = trap.downcast_ref::<DeadlineExceeded>().is_none()
                            && trap.downcast_ref::<PoolConcurrencyLimitError>().is_none();
                        (Err(trap_to_error(&trap, &store, limits, &log)), crashed)
                    }
                    Some(Ok(value)) => (Ok(value), false),
                };
                RunReport {
                    result,
                    log,
                    fuel_used,
                    duration: started.elapsed(),
                    crashed,
                }
            }
        }
    }};
}

/// Ask a component for its tool specs.
pub async fn specs(
    engine: &Engine,
    pre: &ToolPre,
    state: HostState,
    limits: &Limits,
) -> RunReport<Vec<crate::bindings::exports::chitin::tool::tool::ToolSpec>> {
    run_in_sandbox!(engine, state, limits, |store| async {
        let instance = pre.bindings.instantiate_async(&mut *store).await?;
        pre.checked.store(true, Ordering::Release);
        instance.chitin_tool_tool().call_specs(&mut *store).await
    })
}

/// A `chitin:tool` component pre-instantiated, with its `call` export found once at load.
pub struct ToolPre {
    bindings: ToolComponentPre<HostState>,
    call: ComponentExportIndex,
    /// Set once an instance of this component passed the bindings' check of every export's
    /// type (when its specs were asked for, at load): `call`'s type is then known to match.
    checked: AtomicBool,
}

/// What a `chitin:tool` component's `call` takes and returns.
type CallFunc<'a> = TypedFunc<(&'a str, &'a str), (Result<String, WitToolError>,)>;

impl ToolPre {
    /// Find the contract's exports in `pre`; an error names what is missing.
    pub fn new(pre: InstancePre<HostState>) -> wasmtime::Result<Self> {
        // The bindings look up the interface under the name this host was built against, which
        // a compatible (0.1.x) export also answers to; `call` is looked up the same way.
        let bindings = ToolComponentPre::new(pre)?;
        let component = bindings.instance_pre().component();
        let missing = || wasmtime::format_err!("no `call` in the exported `{TOOL_EXPORT}`");
        let (_, interface) = component
            .get_export(None, TOOL_EXPORT)
            .ok_or_else(missing)?;
        let (_, call) = component
            .get_export(Some(&interface), "call")
            .ok_or_else(missing)?;
        Ok(Self {
            bindings,
            call,
            checked: AtomicBool::new(false),
        })
    }

    /// The pre-instantiated component.
    pub fn instance_pre(&self) -> &InstancePre<HostState> {
        self.bindings.instance_pre()
    }
}

/// The contract's interface as the host's bindings name it.
const TOOL_EXPORT: &str = "chitin:tool/tool@0.1.0";

/// Call tool `name` with `args_json` (already validated).
pub async fn call(
    engine: &Engine,
    pre: &ToolPre,
    state: HostState,
    limits: &Limits,
    name: &str,
    args_json: &str,
) -> RunReport<String> {
    let report = run_in_sandbox!(engine, state, limits, |store| async {
        let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
        // The bindings would type-check every export of the contract on every instance; a
        // component's types never change, so `call`'s is checked until one check has passed.
        let call: CallFunc<'_> = if pre.checked.load(Ordering::Acquire) {
            let func = instance
                .get_func(&mut *store, pre.call)
                .ok_or_else(|| wasmtime::format_err!("the component lacks its `call` export"))?;
            // SAFETY: `checked` is set only after an instance of this same component passed
            // the bindings' type check, which checks `call` against this very signature, and
            // every instance of `pre` has the types of that component.
            unsafe { TypedFunc::new_unchecked(func) }
        } else {
            instance.get_typed_func(&mut *store, pre.call)?
        };
        let (result,) = call.call_async(&mut *store, (name, args_json)).await?;
        Ok(result)
    });
    RunReport {
        result: report.result.and_then(|r| r.map_err(from_wit)),
        log: report.log,
        fuel_used: report.fuel_used,
        duration: report.duration,
        crashed: report.crashed,
    }
}

/// Call the typed export `index` with `params` in a fresh instance of `pre`; the results are
/// `results` values long.
pub async fn call_typed(
    engine: &Engine,
    pre: &InstancePre<HostState>,
    state: HostState,
    limits: &Limits,
    index: ComponentExportIndex,
    params: &[Val],
    results: usize,
) -> RunReport<Vec<Val>> {
    run_in_sandbox!(engine, state, limits, |store| async {
        let instance = pre.instantiate_async(&mut *store).await?;
        let func = instance
            .get_func(&mut *store, index)
            .ok_or_else(|| wasmtime::format_err!("the component lacks the function it exports"))?;
        let mut out = vec![Val::Bool(false); results];
        func.call_async(&mut *store, params, &mut out).await?;
        Ok(out)
    })
}

/// An instance kept alive without running a call, with its store.
pub struct LiveInstance {
    _store: Store<HostState>,
    _instance: wasmtime::component::Instance,
}

/// Instantiate `pre` in a fresh store and keep it alive (to measure what a live call costs).
pub async fn hold(
    engine: &Engine,
    pre: &InstancePre<HostState>,
    state: HostState,
    limits: &Limits,
) -> wasmtime::Result<LiveInstance> {
    let mut store = new_store(engine, state, limits)?;
    let instance = pre.instantiate_async(&mut store).await?;
    Ok(LiveInstance {
        _store: store,
        _instance: instance,
    })
}

/// Pre-link a component against `linker`.
pub fn pre_instantiate(
    linker: &wasmtime::component::Linker<HostState>,
    component: &Component,
) -> wasmtime::Result<InstancePre<HostState>> {
    linker.instantiate_pre(component)
}

/// Call the library function `index` in a fresh instance of `pre` under `limits`: how a tool's
/// call into a host-linked library runs, apart from the tool's own store.
pub async fn call_library(
    engine: &Engine,
    pre: &InstancePre<HostState>,
    state: HostState,
    limits: &Limits,
    index: ComponentExportIndex,
    params: &[Val],
    results: &mut [Val],
) -> wasmtime::Result<()> {
    let deadline = state.deadline;
    let mut store = new_store(engine, state, limits)?;
    let run = async {
        let instance = pre.instantiate_async(&mut store).await?;
        let func = instance
            .get_func(&mut store, index)
            .ok_or_else(|| wasmtime::format_err!("the library lacks the function it exports"))?;
        func.call_async(&mut store, params, results).await
    };
    let outcome = until(deadline, run).await;
    store.data_mut().caps.settle().await;
    match outcome {
        None => Err(timeout_error(limits).into()),
        Some(result) => result,
    }
}

fn timeout_error(limits: &Limits) -> ToolError {
    ToolError::Timeout(format!(
        "the call exceeded its {} ms deadline and was stopped",
        limits.timeout_ms
    ))
}

fn trap_to_error(
    err: &wasmtime::Error,
    store: &Store<HostState>,
    limits: &Limits,
    log: &LogRecord,
) -> ToolError {
    if err.downcast_ref::<DeadlineExceeded>().is_some() {
        return timeout_error(limits);
    }
    if let Some(full) = err.downcast_ref::<PoolConcurrencyLimitError>() {
        return ToolError::RateLimited(format!(
            "this host is running as many calls as its engine has room for ({full}); retry when \
             one ends"
        ));
    }
    if let Some(refused) = err.downcast_ref::<OpenFilesError>() {
        return ToolError::ExecutionFailed(refused.to_string());
    }
    if let Some(asked) = store.data().limiter.refused() {
        return ToolError::ExecutionFailed(format!(
            "memory limit exceeded: the component tried to grow its memory to {} but may use at \
             most {}",
            human_bytes(asked),
            human_bytes(limits.memory_bytes)
        ));
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => ToolError::ExecutionFailed(format!(
            "CPU budget exhausted: the call used all {} units of fuel",
            limits.fuel
        )),
        Some(Trap::StackOverflow) => ToolError::ExecutionFailed(
            "stack overflow: the component recursed too deeply and was stopped".into(),
        ),
        Some(trap) => ToolError::ExecutionFailed(format!(
            "the component trapped: {trap}{}",
            panic_message(log)
        )),
        None => ToolError::ExecutionFailed(format!("{err:#}")),
    }
}

/// A Rust guest's panic message from its stderr: the `panicked at` line and the line after it,
/// which holds the message itself.
fn panic_message(log: &LogRecord) -> String {
    let stderr: Vec<&str> = log
        .entries
        .iter()
        .filter(|e| e.source == LogSource::Stderr)
        .map(|e| e.message.as_str())
        .collect();
    match stderr.iter().rposition(|line| line.contains("panicked at")) {
        Some(i) => format!(" ({})", stderr[i..stderr.len().min(i + 2)].join(" ")),
        None => String::new(),
    }
}

fn human_bytes(n: usize) -> String {
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= MIB {
        format!("{:.1} MiB", n as f64 / MIB as f64)
    } else {
        format!("{n} bytes")
    }
}

fn from_wit(e: WitToolError) -> ToolError {
    match e {
        WitToolError::InvalidArgs(m) => ToolError::InvalidArgs(m),
        WitToolError::NotFound(m) => ToolError::NotFound(m),
        WitToolError::PermissionDenied(m) => ToolError::PermissionDenied(m),
        WitToolError::InvalidPath(m) => ToolError::InvalidPath(m),
        WitToolError::ExecutionFailed(m) => ToolError::ExecutionFailed(m),
        WitToolError::Timeout => ToolError::Timeout("the tool reported a timeout".into()),
        WitToolError::RateLimited(m) => ToolError::RateLimited(m),
        WitToolError::ExternalService(m) => ToolError::ExternalService(m),
    }
}
