//! The WIT implementation of `chitin:host/log`.

use super::{LogCtx, LogLevel, LogSource};
use crate::bindings::chitin::host::log::{Host, Level};
use crate::events::CallEvent;

impl From<Level> for LogLevel {
    fn from(level: Level) -> Self {
        match level {
            Level::Trace => Self::Trace,
            Level::Debug => Self::Debug,
            Level::Info => Self::Info,
            Level::Warn => Self::Warn,
            Level::Error => Self::Error,
        }
    }
}

impl Host for &mut LogCtx {
    fn log(&mut self, level: Level, message: String) {
        let (full, keep) = {
            let log = self.log.lock();
            (log.is_full(), log.entry_bytes())
        };
        // Secrets are redacted before the entry is kept or streamed to a client; an entry past
        // the count is only counted, and of a kept one only what can be kept is scanned.
        let message = if full {
            message
        } else {
            self.scanner
                .redact(crate::leak::scan_window(&message, keep), "log entry")
        };
        let mut log = self.log.lock();
        let kept = log.push(LogSource::Log, level.into(), &message);
        if let Some(entry) = kept
            && self.events.is_listening()
        {
            self.events.emit(CallEvent::Log(entry.clone()));
        }
    }
}
