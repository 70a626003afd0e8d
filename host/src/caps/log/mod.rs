//! `chitin:host/log`: entries a component writes to the call's bounded log
//! ([`crate::call_log`]).

mod host;

use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

pub use crate::call_log::{CallLog, LogEntry, LogLevel, LogRecord, LogSource, SharedLog};
use crate::events::CallEvents;
use crate::leak::LeakScanner;

/// The per-call state of the log capability.
pub struct LogCtx {
    /// The call's log.
    pub log: SharedLog,
    /// Where entries from the log import are also reported while the call runs.
    pub events: CallEvents,
    /// Redacts the secrets the call could reach from each entry.
    pub scanner: Arc<LeakScanner>,
}

/// `HasData` marker for the log capability.
pub struct Log;

impl HasData for Log {
    type Data<'a> = &'a mut LogCtx;
}

/// The interface prefix this module links.
pub const LINKS: &[&str] = &["chitin:host/log@"];

/// Link `chitin:host/log`; `get` finds the call's [`LogCtx`] in the store state.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut LogCtx,
) -> wasmtime::Result<()> {
    crate::bindings::chitin::host::log::add_to_linker::<T, Log>(linker, get)
}
