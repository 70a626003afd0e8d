//! Following the installed set replicas share (`--state-url`): every command that loads tools
//! first brings the data directory's copy up to the shared lockfile, and `chitin serve` polls
//! the set's generation while it runs, reloading and telling clients `tools/list_changed` when
//! it moved.
//!
//! Polling rather than PostgreSQL's LISTEN/NOTIFY: a notification sent while a replica's
//! connection is down is lost, so a replica has to poll after every reconnect anyway; one
//! primary-key read every [`POLL`] per replica costs the database nothing, survives restarts
//! of either side, and needs no connection held open outside the pool.

use std::sync::Arc;
use std::time::Duration;

use crate::installed::Installed;
use crate::installed::shared::{self, SharedSet, SyncError};
use crate::mcp::Served;
use crate::services::Services;

use super::{Cli, open_host_with, registry};

/// How often a serving replica reads the shared set's generation.
pub(super) const POLL: Duration = Duration::from_secs(2);

/// Bring the installed copy in the data directory up to the shared set: the generation
/// applied and whether the copy changed, or `None` when the state is not shared (or nothing
/// was ever installed into it, and each replica keeps its own installed folder).
pub(crate) async fn sync(services: &Services) -> Result<Option<(u64, bool)>, SyncError> {
    let Some(db) = services.state().postgres() else {
        return Ok(None);
    };
    let (generation, lock) = SharedSet::new(db).lock()?;
    if generation == 0 {
        return Ok(None);
    }
    let installed = Installed::new(&services.data_dir().components());
    let open = |name: &str| registry::open(services, Some(name)).map_err(|e| format!("{e:#}"));
    let changed = shared::sync(&lock, &installed, open, services.trust()).await?;
    Ok(Some((generation, changed)))
}

/// At the start of a command: sync, or say why the copy this data directory has is used.
pub(super) async fn sync_at_start(services: &Services) {
    if let Err(e) = sync(services).await {
        errln!(
            "warning: the shared installed set could not be fetched, so the installed copy in \
             {} is used as it is: {e}",
            services.data_dir().components().display()
        );
    }
}

/// While serving: poll the shared set and serve each new generation once this replica holds
/// it verified; until then, and whenever fetching or verifying fails, the previous set stays
/// served. Stops with the server (the task is aborted when the handle drops).
pub(super) fn follow(
    setup: Arc<Cli>,
    served: Arc<Served>,
    services: Arc<Services>,
) -> Option<AbortOnDrop> {
    services.state().postgres()?;
    let task = tokio::spawn(async move {
        let mut applied = 0;
        let mut reload_due = false;
        let mut last_error = String::new();
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // Off the runtime's workers: with the database down, connecting waits for its
            // timeout, and the workers are answering calls meanwhile.
            let polled = {
                let services = services.clone();
                tokio::task::spawn_blocking(move || {
                    services
                        .state()
                        .postgres()
                        .map(|db| SharedSet::new(db).generation())
                })
                .await
            };
            let moved = match polled {
                Ok(Some(Ok(generation))) => generation != applied,
                Ok(Some(Err(e))) => {
                    report(&mut last_error, &e.to_string());
                    continue;
                }
                Ok(None) | Err(_) => return,
            };
            if !moved && !reload_due {
                continue;
            }
            let generation = match sync(&services).await {
                Ok(Some((generation, changed))) => {
                    reload_due |= changed;
                    generation
                }
                Ok(None) => 0,
                Err(e) => {
                    report(
                        &mut last_error,
                        &format!("{e}; still serving the previous set"),
                    );
                    continue;
                }
            };
            if reload_due {
                match open_host_with(&setup, Some(services.clone())).await {
                    Ok(host) => {
                        errln!(
                            "chitin: installed set generation {generation} fetched and verified; \
                             now serving {} tools",
                            host.tools().count()
                        );
                        served.replace(host);
                        reload_due = false;
                    }
                    Err(e) => {
                        report(
                            &mut last_error,
                            &format!(
                                "installed set generation {generation}: reloading failed, still \
                                 serving the previous set: {e:#}"
                            ),
                        );
                        continue;
                    }
                }
            }
            applied = generation;
            last_error.clear();
        }
    });
    Some(AbortOnDrop(task))
}

/// Say `message` on stderr unless it is the one said last (a registry down for an hour is one
/// line, not one every poll).
fn report(last: &mut String, message: &str) {
    if last != message {
        errln!("chitin: shared installed set: {message}");
        message.clone_into(last);
    }
}

/// A task that ends when this is dropped.
pub(super) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
