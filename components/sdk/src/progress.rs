//! Reporting how far the running call got, through the `chitin:host/progress` import. The host
//! forwards reports to the agent while the call runs (over MCP, as `notifications/progress` when
//! the client asked for progress); reports nobody asked for are dropped, so reporting never
//! fails.

/// Reports that `done` units are finished, out of `total` when known, with an optional message.
pub fn report(done: f64, total: Option<f64>, message: Option<&str>) {
    emit(done, total, message);
}

#[cfg(target_arch = "wasm32")]
fn emit(done: f64, total: Option<f64>, message: Option<&str>) {
    crate::bindings::chitin::host::progress::report(done, total, message);
}

// Natively there is no host to import from; stderr keeps native unit tests of tools working.
#[cfg(not(target_arch = "wasm32"))]
fn emit(done: f64, total: Option<f64>, message: Option<&str>) {
    let total = total.map(|t| format!("/{t}")).unwrap_or_default();
    eprintln!("[progress] {done}{total} {}", message.unwrap_or_default());
}
