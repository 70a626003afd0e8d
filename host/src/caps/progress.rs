//! `chitin:host/progress`: a call reports how far it got; the reports go to the call's event
//! sink (see [`crate::events`]) and from there, over MCP, to the agent. Messages pass the
//! call's redactor first, like everything else a component sends out.

use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

use crate::bindings::chitin::host::progress::Host;
use crate::events::{CallEvent, CallEvents};
use crate::leak::LeakScanner;

/// Longest progress message forwarded, in bytes; longer ones are cut.
const MAX_MESSAGE_BYTES: usize = 1024;

/// The per-call state of the progress capability.
pub struct ProgressCtx {
    /// Where the call's reports go.
    pub events: CallEvents,
    /// The call's redactor.
    pub scanner: Arc<LeakScanner>,
}

impl Host for &mut ProgressCtx {
    fn report(&mut self, done: f64, total: Option<f64>, message: Option<String>) {
        if !self.events.is_listening() {
            return;
        }
        let message = message.map(|m| {
            let window = crate::leak::scan_window(&m, MAX_MESSAGE_BYTES);
            let mut m = self.scanner.redact(window, "progress message");
            m.truncate(m.floor_char_boundary(MAX_MESSAGE_BYTES));
            m
        });
        self.events.emit(CallEvent::Progress {
            done,
            total,
            message,
        });
    }
}

/// `HasData` marker for the progress capability.
pub struct Progress;

impl HasData for Progress {
    type Data<'a> = &'a mut ProgressCtx;
}

/// The interface prefix this module links.
pub const LINKS: &[&str] = &["chitin:host/progress@"];

/// Link `chitin:host/progress`; `get` finds the call's [`ProgressCtx`] in the store state.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut ProgressCtx,
) -> wasmtime::Result<()> {
    crate::bindings::chitin::host::progress::add_to_linker::<T, Progress>(linker, get)
}
