//! Logging into the call's log through the `chitin:host/log` import.
//!
//! The host bounds the log (entry count and bytes per entry), so logging never fails; entries past
//! the cap are dropped.

use crate::bindings::chitin::host::log::Level;

/// Logs `message` at trace level.
pub fn trace(message: &str) {
    emit(Level::Trace, message);
}

/// Logs `message` at debug level.
pub fn debug(message: &str) {
    emit(Level::Debug, message);
}

/// Logs `message` at info level.
pub fn info(message: &str) {
    emit(Level::Info, message);
}

/// Logs `message` at warn level.
pub fn warn(message: &str) {
    emit(Level::Warn, message);
}

/// Logs `message` at error level.
pub fn error(message: &str) {
    emit(Level::Error, message);
}

#[cfg(target_arch = "wasm32")]
fn emit(level: Level, message: &str) {
    crate::bindings::chitin::host::log::log(level, message);
}

// Natively there is no host to import from; stderr keeps native unit tests of tools working.
#[cfg(not(target_arch = "wasm32"))]
fn emit(level: Level, message: &str) {
    let label = match level {
        Level::Trace => "trace",
        Level::Debug => "debug",
        Level::Info => "info",
        Level::Warn => "warn",
        Level::Error => "error",
    };
    eprintln!("[{label}] {message}");
}
