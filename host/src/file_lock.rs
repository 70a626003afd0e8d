//! A lock on a file, held across chitin processes: flock(2) through `File::lock` (exclusive)
//! or `File::lock_shared` (any number of shared holders, no exclusive one).
//! The kernel releases it when the holder closes the file, exits or is killed, so a lock never
//! outlives its holder and a crashed process never blocks the others.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The lock could not be taken.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LockError {
    /// Another process held the lock for longer than the wait allowed.
    #[error(
        "{path} stayed locked by another chitin process for {waited_ms} ms; retry, and if it \
         persists, `fuser {path}` shows the process stuck holding it",
        path = path.display()
    )]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// How long this process waited.
        waited_ms: u128,
    },
    /// The lock file cannot be opened or locked.
    #[error(
        "lock file {path}: {reason}; check that the data directory belongs to you and is \
         writable",
        path = path.display()
    )]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What the OS said.
        reason: String,
    },
}

/// A held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Lock `path` exclusively (created with mode 0600 when missing), waiting at most `wait` (a
    /// zero wait only tries); returns the lock and how long it waited.
    pub fn acquire(path: &Path, wait: Duration) -> Result<(Self, Duration), LockError> {
        Self::take(path, wait, false)
    }

    /// As [`FileLock::acquire`], but shared with other shared holders (readers).
    pub fn acquire_shared(path: &Path, wait: Duration) -> Result<(Self, Duration), LockError> {
        Self::take(path, wait, true)
    }

    fn take(path: &Path, wait: Duration, shared: bool) -> Result<(Self, Duration), LockError> {
        let io = |e: std::io::Error| LockError::Io {
            path: path.to_owned(),
            reason: e.to_string(),
        };
        let started = Instant::now();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        let tried = if shared {
            file.try_lock_shared()
        } else {
            file.try_lock()
        };
        match tried {
            Ok(()) => return Ok((Self { _file: file }, started.elapsed())),
            // A zero wait only tries: no waiter to start.
            Err(TryLockError::WouldBlock) if wait.is_zero() => {
                return Err(LockError::Busy {
                    path: path.to_owned(),
                    waited_ms: 0,
                });
            }
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        // Contended: block in a helper thread so the kernel wakes us the moment the holder
        // lets go (no polling delay), while this thread keeps the bound. The clone shares the
        // open file description, so the lock it takes is this file's lock.
        let waiter = file.try_clone().map_err(io)?;
        let (tx, rx) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("chitin-lock-wait".into())
            .spawn(move || {
                let taken = if shared {
                    waiter.lock_shared()
                } else {
                    waiter.lock()
                };
                // When the receiver gave up, dropping `waiter` here closes the last handle and
                // so releases a lock taken too late.
                let _ = tx.send(taken.map(|()| waiter));
            })
            .map_err(io)?;
        match rx.recv_timeout(wait.saturating_sub(started.elapsed())) {
            Ok(Ok(_waiter)) => Ok((Self { _file: file }, started.elapsed())),
            Ok(Err(e)) => Err(io(e)),
            Err(_) => Err(LockError::Busy {
                path: path.to_owned(),
                waited_ms: started.elapsed().as_millis(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_makes_others_wait_then_pass_and_the_bound_holds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.lock");
        let (held, _) = FileLock::acquire(&path, Duration::from_secs(1)).expect("first");
        let err = FileLock::acquire(&path, Duration::from_millis(50)).unwrap_err();
        assert!(matches!(err, LockError::Busy { .. }), "{err}");
        assert!(err.to_string().contains("x.lock"), "{err}");
        let err = FileLock::acquire(&path, Duration::ZERO).unwrap_err();
        assert!(matches!(err, LockError::Busy { waited_ms: 0, .. }), "{err}");
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        let (_second, waited) =
            FileLock::acquire(&path, Duration::from_secs(10)).expect("taken once released");
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        releaser.join().expect("releaser");
    }

    #[test]
    fn shared_locks_coexist_and_exclude_an_exclusive_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.lock");
        let (a, _) = FileLock::acquire_shared(&path, Duration::from_secs(1)).expect("first");
        let (b, _) = FileLock::acquire_shared(&path, Duration::from_secs(1)).expect("second");
        let err = FileLock::acquire(&path, Duration::from_millis(50)).unwrap_err();
        assert!(matches!(err, LockError::Busy { .. }), "{err}");
        drop((a, b));
        let (_c, _) = FileLock::acquire(&path, Duration::from_secs(1)).expect("exclusive");
        let err = FileLock::acquire_shared(&path, Duration::from_millis(50)).unwrap_err();
        assert!(matches!(err, LockError::Busy { .. }), "{err}");
    }
}
