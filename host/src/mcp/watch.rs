//! Reload the served tools when a watched components directory changes (a component file added,
//! replaced or removed, or the lockfile of installed components rewritten), so sessions see
//! `notifications/tools/list_changed`.

use std::fmt::Display;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::host::Host;
use crate::mcp::Served;

/// Quiet time after the last file event before reloading: copying a component in is several
/// events, and one reload should see the finished file.
const SETTLE: Duration = Duration::from_millis(250);

/// Watch `dirs` and, after each settled burst of changes to `*.wasm` files, build a new host
/// with `reload` and serve it. A failed reload keeps the current host and is reported on stderr.
/// Watching stops when the returned watcher is dropped.
pub fn spawn<F, Fut, E>(
    dirs: &[PathBuf],
    served: Arc<Served>,
    reload: F,
) -> notify::Result<notify::RecommendedWatcher>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Result<Host, E>> + Send,
    E: Display,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let relevant = matches!(
            event.kind,
            EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_)
        ) && event.paths.iter().any(|p| {
            p.extension().is_some_and(|e| e == "wasm")
                || p.file_name()
                    .is_some_and(|n| n == chitin_registry::lockfile::LOCK_FILE)
        });
        if relevant {
            let _ = tx.send(());
        }
    })?;
    for dir in dirs {
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
    }
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            // Wait until events stop arriving for SETTLE.
            while let Ok(Some(())) = tokio::time::timeout(SETTLE, rx.recv()).await {}
            match reload().await {
                Ok(host) => {
                    errln!(
                        "chitin: components changed; now serving {} tools",
                        host.tools().count()
                    );
                    served.replace(host);
                }
                Err(e) => errln!(
                    "chitin: components changed but reloading failed, still serving the previous set: {e}"
                ),
            }
        }
    });
    Ok(watcher)
}
