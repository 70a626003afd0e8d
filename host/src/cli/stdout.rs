//! The command line's standard output. Rust ignores SIGPIPE, so `println!` panics when the
//! reader has gone (`chitin list | head -1`). These write the same text and end the process
//! quietly instead, with the status a shell reports for a tool that SIGPIPE ended. SIGPIPE
//! itself stays ignored: a child's closed stdin must not end the host.

use std::io::Write;

/// The exit status when stdout's reader has gone: 128 + SIGPIPE, as shells report it.
pub const BROKEN_PIPE_EXIT: i32 = 141;

/// Write `args` (and a newline when `newline`) to stdout.
pub fn write(args: std::fmt::Arguments<'_>, newline: bool) {
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| {
        if newline {
            out.write_all(b"\n")
        } else {
            Ok(())
        }
    });
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        errln!("error: cannot write to standard output: {e}");
        std::process::exit(super::Exit::Host as i32);
    }
}
