//! What a running call reports to whoever started it, while it runs: progress and log entries.
//! The MCP server forwards them as notifications; other callers pass no sink and they are
//! dropped. The channel is bounded and never blocks the guest: a report that does not fit is
//! dropped.

use tokio::sync::mpsc;

use crate::call_log::LogEntry;

/// Reports a call may have queued for forwarding before further ones are dropped.
pub const EVENT_BACKLOG: usize = 256;

/// One report from a running call.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEvent {
    /// `chitin:host/progress.report`.
    Progress {
        /// Units done.
        done: f64,
        /// Units in all, when known.
        total: Option<f64>,
        /// A short message for a person.
        message: Option<String>,
    },
    /// An entry the guest wrote through `chitin:host/log` (stdout and stderr are not forwarded).
    Log(LogEntry),
}

/// Where a call's reports go: nowhere, or a bounded channel.
#[derive(Debug, Clone, Default)]
pub struct CallEvents(Option<mpsc::Sender<CallEvent>>);

impl CallEvents {
    /// A sink that drops every report.
    pub fn none() -> Self {
        Self(None)
    }

    /// A sink and the receiver its reports arrive on.
    pub fn channel() -> (Self, mpsc::Receiver<CallEvent>) {
        let (tx, rx) = mpsc::channel(EVENT_BACKLOG);
        (Self(Some(tx)), rx)
    }

    /// Send a report if someone listens and there is room; never waits.
    pub fn emit(&self, event: CallEvent) {
        if let Some(tx) = &self.0 {
            let _ = tx.try_send(event);
        }
    }

    /// Whether anyone listens (so callers can skip building a report).
    pub fn is_listening(&self) -> bool {
        self.0.is_some()
    }
}
