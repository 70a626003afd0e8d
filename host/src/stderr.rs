//! Diagnostics on stderr. `eprintln!` panics when stderr's reader has gone, and a panic before
//! a call ran lost the call (a `memory_write` that never happened, a server dying before it
//! answered `initialize`). These write the same text and drop it when it cannot be written:
//! diagnostics never stop the work they describe.

use std::io::Write;

/// Write `args` (and a newline when `newline`) to stderr, ignoring failure.
pub fn write(args: std::fmt::Arguments<'_>, newline: bool) {
    let mut err = std::io::stderr().lock();
    let _dropped = err.write_fmt(args).and_then(|()| {
        if newline {
            err.write_all(b"\n")
        } else {
            Ok(())
        }
    });
}
