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
        // Secrets are redacted before the entry is kept or streamed to a client.
        let message = self.scanner.redact(&message, "log entry");
        let mut log = self.log.lock();
        let kept = log.push(LogSource::Log, level.into(), &message);
        if let Some(entry) = kept
            && self.events.is_listening()
        {
            self.events.emit(CallEvent::Log(entry.clone()));
        }
    }
}
