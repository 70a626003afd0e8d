//! Compiling a component into the compile cache ahead of its first call, with elapsed time
//! shown on a terminal. A large component (a Python interpreter is ~19 MB) takes Cranelift tens
//! of seconds on a small machine; paying that at install, where a person is already waiting for
//! the audit, keeps it off the first call.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::cache::{CacheOutcome, CompileCache, LoadOrCompileError};
use crate::runtime::Runtime;

/// How often the elapsed time is redrawn on a terminal.
const TICK: Duration = Duration::from_millis(200);

/// Compile `bytes` (already verified) into `runtime`'s cache unless it is there, telling the
/// person on stderr what is happening and how long it took. `label` names the component.
pub fn precompile(
    runtime: &Runtime,
    bytes: &[u8],
    label: &str,
) -> Result<CacheOutcome, LoadOrCompileError> {
    let (artifact, _) = runtime.cache().entry_paths(&CompileCache::key(bytes)?);
    if artifact.exists() {
        return Ok(CacheOutcome::Hit);
    }
    let what = format!(
        "compiling {label} ({:.1} MB) ahead of its first call",
        bytes.len() as f64 / 1e6
    );
    let started = Instant::now();
    let terminal = std::io::stderr().is_terminal();
    // wasmtime reports no progress while it compiles, so the honest indicator is elapsed time;
    // one redrawn line does not warrant a progress-bar dependency.
    let done = Arc::new(AtomicBool::new(false));
    let ticker = terminal.then(|| {
        let (done, what) = (done.clone(), what.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                err!("\r{what}… {:.0} s", started.elapsed().as_secs_f64());
                let _ = std::io::stderr().flush();
                std::thread::sleep(TICK);
            }
        })
    });
    if !terminal {
        errln!("{what}…");
    }
    let result = runtime
        .cache()
        .load_or_compile(runtime.engine(), bytes, None)
        .map(|(_, outcome)| outcome);
    done.store(true, Ordering::Relaxed);
    if let Some(ticker) = ticker {
        // The ticker only prints; if it panicked there is nothing to recover.
        let _ = ticker.join();
        err!("\r\x1b[2K");
    }
    let took = started.elapsed().as_secs_f64();
    match &result {
        Ok(_) => errln!("{what}: done in {took:.1} s"),
        Err(_) => errln!("{what}: failed after {took:.1} s"),
    }
    result
}
