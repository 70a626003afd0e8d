//! Each call's scratch directory and the Landlock domain that names it, with the next one
//! prepared ahead on the blocking pool.
//!
//! Creating a directory and building a ruleset of ~45 rules costs a call ~0.1–0.2 ms before
//! its first process can start (a `mkdir` on an ext4 `/tmp` alone is ~40 µs). A grant keeps one
//! spare ready. The call that takes it re-checks that every rule still binds what its path names
//! now, so its domain is exactly what building it at that moment would give; a spare that fails
//! the check is dropped and the call builds its own. A call that finds the spare still being
//! made waits for it (briefly) rather than making a second one beside it.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

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

/// How long a call waits for a spare a pool thread is making before it makes its own. A make
/// takes ~0.1–0.3 ms; this bounds the wait should that thread be descheduled or stuck.
const SPARE_WAIT: Duration = Duration::from_millis(1);

/// The spare, and whether a pool thread is making one now.
#[derive(Debug, Default)]
struct Slot {
    spare: Option<Scratch>,
    making: bool,
}

/// Makes the scratches of one grant, keeping one spare.
#[derive(Debug)]
pub(super) struct Scratches {
    mode: Result<Mode, String>,
    rlimits: Rlimits,
    slot: Mutex<Slot>,
    /// Told when a pool thread's make ends, made or not.
    made: Condvar,
    /// How long a call waits for that ([`SPARE_WAIT`]).
    spare_wait: Duration,
    /// Whether a spare is being prepared (queued or being made), so calls in a burst start one
    /// preparation, not many.
    preparing: AtomicBool,
}

impl Scratches {
    /// Scratches confined by `mode` (or refused with its reason).
    pub(super) fn new(mode: Result<Mode, String>, rlimits: Rlimits) -> Self {
        Self {
            mode,
            rlimits,
            slot: Mutex::default(),
            made: Condvar::new(),
            spare_wait: SPARE_WAIT,
            preparing: AtomicBool::new(false),
        }
    }

    /// The slot; a poisoned lock only means a preparation panicked, and the slot is still whole.
    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
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
        let spare = self.spare_or_the_one_being_made();
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

    /// The spare; or, while a pool thread is making one, that one once made (waiting at most
    /// `spare_wait`): finishing a make under way is shorter than a second make beside it, which
    /// on a machine of few cores would also compete with it for a CPU.
    fn spare_or_the_one_being_made(&self) -> Option<Scratch> {
        let slot = self.slot();
        let mut slot = if slot.spare.is_none() && slot.making {
            self.made
                .wait_timeout_while(slot, self.spare_wait, |s| s.spare.is_none() && s.making)
                .map_or_else(|p| p.into_inner().0, |(slot, _)| slot)
        } else {
            slot
        };
        slot.spare.take()
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
            let Some(making) = Making::start(&preparing.0) else {
                return;
            };
            if let Ok(made) = making.0.make() {
                let mut slot = making.0.slot();
                if slot.spare.is_none() {
                    slot.spare = Some(made);
                }
            }
        });
    }

    /// Where the spare is, once one is ready.
    #[cfg(test)]
    fn spare_path(&self) -> Option<std::path::PathBuf> {
        self.slot().spare.as_ref().map(|s| s.path().to_owned())
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

/// A spare a pool thread is making now; dropped, made or not (or the make panicking), it tells
/// any call waiting for it.
struct Making<'a>(&'a Scratches);

impl<'a> Making<'a> {
    /// Start making, unless a spare is already there.
    fn start(scratches: &'a Scratches) -> Option<Self> {
        let mut slot = scratches.slot();
        if slot.spare.is_some() {
            return None;
        }
        slot.making = true;
        Some(Self(scratches))
    }
}

impl Drop for Making<'_> {
    fn drop(&mut self) {
        self.0.slot().making = false;
        self.0.made.notify_all();
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

    /// [`confined`], waiting up to `wait` for a spare being made.
    fn confined_waiting(workspace: &Path, wait: Duration) -> Scratches {
        let scratches = confined(workspace);
        let mut scratches = Arc::into_inner(scratches).expect("not shared yet");
        scratches.spare_wait = wait;
        scratches
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

    #[test]
    fn a_call_finding_the_spare_being_made_waits_for_it() {
        let root = tempfile::tempdir().expect("tempdir");
        let scratches = Arc::new(confined_waiting(root.path(), Duration::from_secs(5)));
        let making = Making::start(&scratches).expect("no spare yet");
        // Taken before the maker starts, so a busy machine that runs this thread late cannot
        // make the wait look shorter than the maker's sleep.
        let started = std::time::Instant::now();
        let (taken, made) = std::thread::scope(|scope| {
            let maker = scope.spawn(|| {
                let making = making;
                std::thread::sleep(Duration::from_millis(50));
                let made = making.0.make().expect("make");
                let path = made.path().to_owned();
                making.0.slot().spare = Some(made);
                path
            });
            let taken = scratches.take().expect("scratch");
            assert!(
                started.elapsed() >= Duration::from_millis(50),
                "it waited for the make under way"
            );
            (taken, maker.join().expect("maker"))
        });
        assert_eq!(taken.path(), made, "the call took the spare it waited for");
        assert!(!scratches.slot().making, "the make is over");
    }

    #[test]
    fn a_call_makes_its_own_scratch_when_the_spare_being_made_is_late() {
        let root = tempfile::tempdir().expect("tempdir");
        let scratches = Arc::new(confined_waiting(root.path(), Duration::from_millis(200)));
        let making = Making::start(&scratches).expect("no spare yet");
        let started = std::time::Instant::now();
        let taken = scratches.take().expect("scratch");
        assert!(
            started.elapsed() >= Duration::from_millis(200),
            "it waited its bound"
        );
        assert!(taken.path().is_dir(), "a scratch of its own");
        assert!(scratches.slot().making, "the late make is still under way");
        drop(making);
        assert!(!scratches.slot().making, "a make that ends says so");
        // With no make under way, a call does not wait.
        let started = std::time::Instant::now();
        let again = scratches.take().expect("scratch");
        assert!(
            started.elapsed() < Duration::from_millis(200),
            "no wait without a make under way"
        );
        assert_ne!(again.path(), taken.path());
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
