//! Each call's scratch directory and the Landlock domain that names it, with the next one
//! prepared ahead on the blocking pool.
//!
//! Creating a directory and building a ruleset of ~45 rules costs a call ~0.1–0.2 ms before
//! its first process can start (a `mkdir` on an ext4 `/tmp` alone is ~40 µs). A grant keeps one
//! spare ready. The call that takes it re-checks that every rule still binds what its path names
//! now, so its domain is exactly what building it at that moment would give; a spare that fails
//! the check is dropped and the call builds its own.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::confine::{Confinement, Rlimits};
use super::{Mode, RunError};

/// One call's private scratch directory (`HOME`, `TMPDIR`), made on its first process and
/// removed with it, and the confinement that lets that call's processes, and no other's, reach
/// it.
#[derive(Debug)]
pub struct Scratch {
    dir: tempfile::TempDir,
    confinement: Confinement,
}

impl Scratch {
    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The confinement of this call's processes.
    pub(super) fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// Remove the directory and free the ruleset on the blocking pool, once the call's processes
    /// are gone: an `rmdir` on ext4 and freeing ~45 rules cost ~40 µs the call need not wait
    /// for. No other call's processes can reach the directory meanwhile (it is in no other
    /// domain). The hand-off itself waits until the call's task has answered (see
    /// [`off_the_call`]). Without a runtime it is removed at once, and a runtime that stops first
    /// removes it as it drops the hand-off.
    pub(super) fn retire(self) {
        off_the_call(move || drop(self));
    }
}

/// Run `work` on the blocking pool, handed over by a task of its own rather than by the caller:
/// waking a pool thread that has slept costs the waker 35–100 µs on the VM measured (`strace
/// -T`; a call after a pause woke one before its process started and another before it
/// answered). The task
/// runs once the calling task waits, on a current-thread runtime without waking anything.
/// Without a runtime `work` runs here; a task dropped unrun (the runtime stopping) drops `work`.
fn off_the_call(work: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => spawn_blocking_later(&runtime, work),
        Err(_) => work(),
    }
}

/// `work` on `runtime`'s blocking pool, from a task of its own (see [`off_the_call`]).
fn spawn_blocking_later(runtime: &tokio::runtime::Handle, work: impl FnOnce() + Send + 'static) {
    drop(runtime.spawn(async move {
        drop(tokio::task::spawn_blocking(work));
    }));
}

/// Makes the scratches of one grant, keeping one spare.
#[derive(Debug)]
pub(super) struct Scratches {
    mode: Result<Mode, String>,
    rlimits: Rlimits,
    spare: Mutex<Option<Scratch>>,
    /// Whether a spare is being prepared, so calls in a burst start one preparation, not many.
    preparing: AtomicBool,
}

impl Scratches {
    /// Scratches confined by `mode` (or refused with its reason).
    pub(super) fn new(mode: Result<Mode, String>, rlimits: Rlimits) -> Self {
        Self {
            mode,
            rlimits,
            spare: Mutex::new(None),
            preparing: AtomicBool::new(false),
        }
    }

    /// Whether processes run inside a Landlock domain.
    pub(super) fn is_confined(&self) -> bool {
        matches!(self.mode, Ok(Mode::Landlock(_)))
    }

    /// A scratch for one call: the spare if it still binds what every path names now, else a
    /// fresh one. Either way a new spare is prepared for the next call.
    pub(super) fn take(self: &Arc<Self>) -> Result<Scratch, RunError> {
        let mode = self
            .mode
            .as_ref()
            .map_err(|why| RunError::Unconfined(why.clone()))?;
        // A poisoned lock only means a preparation panicked; the slot is still an Option.
        let spare = self.spare.lock().unwrap_or_else(|p| p.into_inner()).take();
        let current = spare.filter(|s| match mode {
            Mode::Landlock(rules) => s.confinement.is_current(rules, s.path()),
            Mode::Unconfined => true,
        });
        let scratch = match current {
            Some(scratch) => scratch,
            None => self.make()?,
        };
        self.prepare_spare();
        Ok(scratch)
    }

    /// A fresh scratch directory and its confinement.
    fn make(&self) -> Result<Scratch, RunError> {
        let mode = self
            .mode
            .as_ref()
            .map_err(|why| RunError::Unconfined(why.clone()))?;
        let dir = tempfile::Builder::new()
            .prefix("chitin-call-")
            .tempdir()
            .map_err(|e| {
                RunError::SpawnFailed(format!("cannot create a scratch directory: {e}"))
            })?;
        let confinement = match mode {
            Mode::Landlock(rules) => Confinement::landlock(rules, dir.path(), self.rlimits)
                .map_err(|e| RunError::SpawnFailed(e.to_string()))?,
            Mode::Unconfined => Confinement::unconfined(self.rlimits),
        };
        Ok(Scratch { dir, confinement })
    }

    /// Make a spare on the blocking pool unless one is ready or being made, handed over once
    /// the call's task waits (its process started; see [`off_the_call`]). Without a runtime (or
    /// if making it fails) the next call makes its own, and reports any error itself.
    fn prepare_spare(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.preparing.swap(true, Ordering::AcqRel) {
            return;
        }
        let preparing = Preparing(Arc::clone(self));
        spawn_blocking_later(&runtime, move || {
            let scratches = &preparing.0;
            let missing = scratches
                .spare
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_none();
            if missing && let Ok(made) = scratches.make() {
                let mut slot = scratches.spare.lock().unwrap_or_else(|p| p.into_inner());
                if slot.is_none() {
                    *slot = Some(made);
                }
            }
        });
    }

    /// Where the spare is, once one is ready.
    #[cfg(test)]
    fn spare_path(&self) -> Option<std::path::PathBuf> {
        let slot = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref().map(|s| s.path().to_owned())
    }
}

/// A spare being prepared; dropped, prepared or not (its task dropped unrun), it lets the next
/// call start another.
struct Preparing(Arc<Scratches>);

impl Drop for Preparing {
    fn drop(&mut self) {
        self.0.preparing.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::caps::process::confine::{Plan, Rules, Support};

    /// Scratches confined to `workspace` (Landlock is required, as for every process).
    fn confined(workspace: &Path) -> Arc<Scratches> {
        let Support::Landlock(abi) = Support::detect() else {
            panic!("these tests need Landlock (ABI ≥ 4)");
        };
        let plan = Plan {
            workspace: workspace.to_owned(),
            workspace_writable: true,
            programs: vec!["/bin/sh".into()],
            network: false,
        };
        Arc::new(Scratches::new(
            Ok(Mode::Landlock(Rules::new(&plan, abi))),
            Rlimits::default(),
        ))
    }

    /// The spare once it is ready (bounded: 5 s).
    async fn spare(scratches: &Scratches) -> std::path::PathBuf {
        for _ in 0..500 {
            if let Some(path) = scratches.spare_path() {
                return path;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no spare was prepared within 5 s");
    }

    #[tokio::test]
    async fn a_call_takes_the_spare_and_the_next_one_is_prepared() {
        let root = tempfile::tempdir().expect("tempdir");
        let scratches = confined(root.path());
        let first = scratches.take().expect("first scratch");
        let ready = spare(&scratches).await;
        assert_ne!(ready, first.path(), "the spare is another directory");
        let second = scratches.take().expect("second scratch");
        assert_eq!(second.path(), ready, "the call took the spare");
        let next = spare(&scratches).await;
        assert!(next != first.path() && next != second.path(), "a new spare");
        let (first_path, second_path) = (first.path().to_owned(), second.path().to_owned());
        drop((first, second));
        assert!(
            !first_path.exists() && !second_path.exists(),
            "removed when dropped"
        );
        // Retired: removed on the blocking pool, soon after.
        let third = scratches.take().expect("third scratch");
        let third_path = third.path().to_owned();
        third.retire();
        for _ in 0..500 {
            if !third_path.exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("a retired scratch was not removed within 5 s");
    }

    #[tokio::test]
    async fn a_spare_no_longer_binding_what_a_path_names_is_dropped_not_used() {
        let root = tempfile::tempdir().expect("tempdir");
        let workspace = root.path().join("workspace");
        std::fs::create_dir(&workspace).expect("workspace");
        let scratches = confined(&workspace);
        let first = scratches.take().expect("first scratch");
        let stale = spare(&scratches).await;
        // The workspace is moved away and a new one takes its path: the spare's ruleset binds
        // the old one.
        std::fs::rename(&workspace, root.path().join("moved-away")).expect("rename");
        std::fs::create_dir(&workspace).expect("new workspace");
        let second = scratches.take().expect("second scratch");
        assert_ne!(second.path(), stale, "the stale spare was not used");
        assert!(!stale.exists(), "the stale spare was removed");
        assert!(second.confinement().is_current(
            match &scratches.mode {
                Ok(Mode::Landlock(rules)) => rules,
                _ => unreachable!("confined above"),
            },
            second.path()
        ));
        // A spare whose own directory was replaced is not used either.
        let replaced = spare(&scratches).await;
        std::fs::remove_dir(&replaced).expect("remove the spare's directory");
        std::fs::create_dir(&replaced).expect("a new directory at its path");
        let third = scratches.take().expect("third scratch");
        assert_ne!(third.path(), replaced, "the replaced spare was not used");
        drop(first);
    }

    #[test]
    fn hand_offs_the_runtime_never_ran_remove_the_scratch_and_free_the_spare_slot() {
        let root = tempfile::tempdir().expect("tempdir");
        let scratches = confined(root.path());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        // Neither hand-off runs: the task never waits before the runtime stops.
        let retired = runtime.block_on(async {
            let scratch = scratches.take().expect("scratch");
            let path = scratch.path().to_owned();
            scratch.retire();
            path
        });
        assert!(
            retired.exists(),
            "not removed while its hand-off is pending"
        );
        drop(runtime);
        assert!(
            !retired.exists(),
            "removed when the runtime dropped the hand-off"
        );
        assert!(
            !scratches.preparing.load(Ordering::Acquire),
            "the next call may prepare a spare again"
        );
    }

    #[tokio::test]
    async fn without_a_runtime_no_spare_is_prepared() {
        let root = tempfile::tempdir().expect("tempdir");
        let scratches = confined(root.path());
        let made = std::thread::spawn(move || {
            let scratch = scratches.take().map(|s| s.path().to_owned());
            (scratch, scratches.spare_path())
        })
        .join()
        .expect("thread");
        assert!(made.0.is_ok(), "a scratch is made inline");
        assert_eq!(made.1, None, "nothing prepares a spare outside a runtime");
    }
}
