//! The call's bounded log: what `chitin:host/log` writes, guest stdout and stderr (see
//! `caps::wasi::stdio`) and the host's own notes about the call, so nothing a component prints
//! reaches the host's own streams.

use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

/// Where a log entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogSource {
    /// `chitin:host/log`.
    Log,
    /// The guest's stdout.
    Stdout,
    /// The guest's stderr.
    Stderr,
    /// The host, about what it did for the call (an outbound request sent or refused).
    Host,
}

/// Severity of an entry (the WIT `level`; stdout is `info`, stderr `warn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Fine detail.
    Trace,
    /// Diagnostics.
    Debug,
    /// Normal events.
    Info,
    /// Something looks wrong.
    Warn,
    /// Something failed.
    Error,
}

impl LogLevel {
    /// The level as a number, least severe first (to keep one in an atomic).
    pub fn rank(self) -> u8 {
        self as u8
    }

    /// The level of a [`LogLevel::rank`]; anything past the last is `Error`.
    pub fn from_rank(rank: u8) -> Self {
        match rank {
            0 => Self::Trace,
            1 => Self::Debug,
            2 => Self::Info,
            3 => Self::Warn,
            _ => Self::Error,
        }
    }
}

/// One entry of a call's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogEntry {
    /// Where it came from.
    pub source: LogSource,
    /// Its severity.
    pub level: LogLevel,
    /// The text, cut to the per-entry cap.
    pub message: String,
    /// Whether the text was cut.
    pub truncated: bool,
}

/// The log of one call, bounded in entries and bytes per entry; overflow is counted, not kept.
#[derive(Debug, Default)]
pub struct CallLog {
    entries: Vec<LogEntry>,
    dropped: u64,
    max_entries: usize,
    max_entry_bytes: usize,
    stdout_partial: Vec<u8>,
    stderr_partial: Vec<u8>,
}

/// What a finished call logged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LogRecord {
    /// The entries kept, in order.
    pub entries: Vec<LogEntry>,
    /// Entries dropped because the log was full.
    pub dropped: u64,
}

impl CallLog {
    /// An empty log with the given caps.
    pub fn new(max_entries: usize, max_entry_bytes: usize) -> Self {
        Self {
            max_entries,
            max_entry_bytes,
            ..Self::default()
        }
    }

    /// Whether the log holds all the entries it keeps (the next is counted, not kept).
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    /// Bytes kept of one entry.
    pub fn entry_bytes(&self) -> usize {
        self.max_entry_bytes
    }

    /// Append an entry, cutting it to the per-entry cap; drop it when the log is full. Returns
    /// the entry kept, if any.
    pub fn push(&mut self, source: LogSource, level: LogLevel, message: &str) -> Option<&LogEntry> {
        if self.entries.len() >= self.max_entries {
            self.dropped += 1;
            return None;
        }
        let truncated = message.len() > self.max_entry_bytes;
        let message = if truncated {
            message[..message.floor_char_boundary(self.max_entry_bytes)].to_owned()
        } else {
            message.to_owned()
        };
        self.entries.push(LogEntry {
            source,
            level,
            message,
            truncated,
        });
        self.entries.last()
    }

    /// Take bytes a guest wrote to stdout or stderr: each complete line becomes an entry; a line
    /// longer than the entry cap is cut into entries so the buffer stays bounded.
    pub fn write_stream(&mut self, source: LogSource, bytes: &[u8]) {
        let mut partial = std::mem::take(self.partial_mut(source));
        for &b in bytes {
            if b == b'\n' {
                self.push_stream_line(source, &partial);
                partial.clear();
            } else {
                partial.push(b);
                if partial.len() >= self.max_entry_bytes {
                    self.push_stream_line(source, &partial);
                    partial.clear();
                }
            }
        }
        *self.partial_mut(source) = partial;
    }

    /// Flush unterminated stream lines and hand over the record.
    pub fn finish(&mut self) -> LogRecord {
        for source in [LogSource::Stdout, LogSource::Stderr] {
            let partial = std::mem::take(self.partial_mut(source));
            if !partial.is_empty() {
                self.push_stream_line(source, &partial);
            }
        }
        LogRecord {
            entries: std::mem::take(&mut self.entries),
            dropped: self.dropped,
        }
    }

    fn partial_mut(&mut self, source: LogSource) -> &mut Vec<u8> {
        match source {
            LogSource::Stderr => &mut self.stderr_partial,
            _ => &mut self.stdout_partial,
        }
    }

    fn push_stream_line(&mut self, source: LogSource, line: &[u8]) {
        let level = match source {
            LogSource::Stderr => LogLevel::Warn,
            _ => LogLevel::Info,
        };
        self.push(source, level, &String::from_utf8_lossy(line));
    }
}

/// A call log shared by the log import and the captured stdio streams of one store.
#[derive(Debug, Clone)]
pub struct SharedLog(Arc<Mutex<CallLog>>);

impl SharedLog {
    /// A fresh log with the given caps.
    pub fn new(max_entries: usize, max_entry_bytes: usize) -> Self {
        Self(Arc::new(Mutex::new(CallLog::new(
            max_entries,
            max_entry_bytes,
        ))))
    }

    /// Lock the log. A panic while holding the lock cannot leave it inconsistent (every update
    /// is a push), so a poisoned lock is used as is.
    pub fn lock(&self) -> MutexGuard<'_, CallLog> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_entries_past_the_cap_and_counts_them() {
        let mut log = CallLog::new(2, 10);
        for _ in 0..5 {
            log.push(LogSource::Log, LogLevel::Info, "x");
        }
        let record = log.finish();
        assert_eq!(record.entries.len(), 2);
        assert_eq!(record.dropped, 3);
    }

    #[test]
    fn cuts_long_entries_on_a_char_boundary() {
        let mut log = CallLog::new(10, 5);
        log.push(LogSource::Log, LogLevel::Info, "ééééé");
        let record = log.finish();
        assert_eq!(record.entries[0].message, "éé");
        assert!(record.entries[0].truncated);
    }

    #[test]
    fn splits_stream_output_into_lines_and_flushes_the_rest() {
        let mut log = CallLog::new(10, 100);
        log.write_stream(LogSource::Stdout, b"one\ntw");
        log.write_stream(LogSource::Stdout, b"o\nthree");
        let record = log.finish();
        let lines: Vec<_> = record.entries.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(lines, ["one", "two", "three"]);
    }

    #[test]
    fn bounds_a_line_without_newlines() {
        let mut log = CallLog::new(3, 4);
        log.write_stream(LogSource::Stderr, &[b'a'; 100]);
        let record = log.finish();
        assert_eq!(record.entries.len(), 3);
        assert!(record.dropped > 0);
    }
}
