//! The state database shared by every chitin process on one data directory: key-value buckets,
//! secrets, remembered approvals, pins and HTTP rate windows, each in its own redb tables.
//!
//! redb lets one process at a time open a file, so the database is opened per transaction
//! under a cross-process [`FileLock`] on `chitin.redb.lock` and closed before the lock is
//! released. Every transaction therefore reads what any process committed before it, a commit
//! is durable (`Durability::Immediate`) before it returns, and a process killed mid-transaction
//! leaves the last commit intact and its lock released by the kernel (redb repairs the file on
//! the next open). Threads of one process queue on a local mutex first, so only one of them
//! contends for the file lock. Callers see transactions over named tables; nothing else of
//! the storage, so another backend can stand behind the same calls.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::file_lock::{FileLock, LockError};

/// How long a transaction waits for other processes' transactions before failing as busy.
/// Transactions are short (milliseconds), so reaching this means a holder is stuck.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The database could not be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StateError {
    /// Other processes kept it locked for longer than [`LOCK_WAIT`].
    #[error("database {}: {lock}", path.display())]
    Busy {
        /// The database file.
        path: PathBuf,
        /// The lock's own error, naming the lock file and the wait.
        lock: LockError,
    },
    /// The file or its directory cannot be opened or created (permissions, a full disk).
    #[error(
        "database {path} cannot be opened: {reason}; check that the file and the data directory \
         belong to you and are writable, or pass another --data-dir",
        path = path.display()
    )]
    Unreachable {
        /// The database file.
        path: PathBuf,
        /// What redb or the OS said.
        reason: String,
    },
    /// The file is not a readable redb database.
    #[error(
        "database {path} is corrupt or not a chitin database ({reason}); move it aside to start \
         afresh (it holds memory, secrets, approvals and pins), or restore it from a backup",
        path = path.display()
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What redb said.
        reason: String,
    },
    /// A transaction failed after the database opened.
    #[error("database {path}: {reason}", path = path.display())]
    Storage {
        /// The database file.
        path: PathBuf,
        /// What redb said.
        reason: String,
    },
}

/// One database file shared across processes; cheap to create (nothing is opened until the
/// first transaction).
#[derive(Debug)]
pub struct StateDb {
    path: PathBuf,
    lock_path: PathBuf,
    local: Mutex<()>,
}

impl StateDb {
    /// The database at `path`, locked through `<path>.lock`.
    pub fn new(path: &Path) -> Self {
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        Self {
            path: path.to_owned(),
            lock_path: PathBuf::from(lock_path),
            local: Mutex::new(()),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Run `f` in a read transaction.
    pub fn read<R, E: From<StateError>>(
        &self,
        f: impl FnOnce(&redb::ReadTransaction) -> Result<R, E>,
    ) -> Result<R, E> {
        self.with_db(|db| {
            let txn = redb::ReadableDatabase::begin_read(db).map_err(|e| self.storage(e))?;
            f(&txn)
        })
    }

    /// Run `f` in a write transaction, committed durably when `f` succeeds and dropped (nothing
    /// written) when it fails.
    pub fn write<R, E: From<StateError>>(
        &self,
        f: impl FnOnce(&redb::WriteTransaction) -> Result<R, E>,
    ) -> Result<R, E> {
        self.with_db(|db| {
            let txn = db.begin_write().map_err(|e| self.storage(e))?;
            let out = f(&txn)?;
            txn.commit().map_err(|e| self.storage(e))?;
            Ok(out)
        })
    }

    /// A redb failure inside a transaction, as a [`StateError::Storage`] naming the file.
    pub fn storage(&self, e: impl Into<redb::Error>) -> StateError {
        StateError::Storage {
            path: self.path.clone(),
            reason: e.into().to_string(),
        }
    }

    /// Open the database under both locks, run `f`, close it, release the locks.
    fn with_db<R, E: From<StateError>>(
        &self,
        f: impl FnOnce(&redb::Database) -> Result<R, E>,
    ) -> Result<R, E> {
        // A poisoned mutex only means another thread panicked mid-transaction; redb rolled
        // that transaction back, so carry on.
        let _local = self.local.lock().unwrap_or_else(|p| p.into_inner());
        let (_lock, waited) =
            FileLock::acquire(&self.lock_path, LOCK_WAIT).map_err(|lock| StateError::Busy {
                path: self.path.clone(),
                lock,
            })?;
        tracing::debug!(
            target: "chitin::state_db",
            lock_wait_us = waited.as_micros() as u64,
            "database lock taken"
        );
        let db = self.open()?;
        let out = f(&db);
        // Closed before the lock guard drops, so the next holder can open the file.
        drop(db);
        out
    }

    fn open(&self) -> Result<redb::Database, StateError> {
        redb::Database::create(&self.path).map_err(|e| self.open_error(e))
    }

    fn open_error(&self, e: redb::DatabaseError) -> StateError {
        let path = self.path.clone();
        let reason = e.to_string();
        match e {
            // redb reports a file that is not a database (or is cut short) as invalid data.
            redb::DatabaseError::Storage(redb::StorageError::Io(io))
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
                ) =>
            {
                StateError::Corrupt { path, reason }
            }
            redb::DatabaseError::Storage(redb::StorageError::Io(_)) => {
                StateError::Unreachable { path, reason }
            }
            redb::DatabaseError::Storage(redb::StorageError::Corrupted(_))
            | redb::DatabaseError::RepairAborted => StateError::Corrupt { path, reason },
            redb::DatabaseError::DatabaseAlreadyOpen => StateError::Busy {
                lock: LockError::Busy {
                    path: path.clone(),
                    waited_ms: 0,
                },
                path,
            },
            _ => StateError::Storage { path, reason },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use redb::TableDefinition;

    use super::*;

    const T: TableDefinition<&str, u64> = TableDefinition::new("t");

    fn get(db: &StateDb, key: &str) -> Option<u64> {
        db.read(|txn| match txn.open_table(T) {
            Ok(t) => Ok::<_, StateError>(t.get(key).map_err(|e| db.storage(e))?.map(|v| v.value())),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(db.storage(e)),
        })
        .expect("read")
    }

    fn put(db: &StateDb, key: &str, value: u64) -> Result<(), StateError> {
        db.write(|txn| {
            txn.open_table(T)
                .map_err(|e| db.storage(e))?
                .insert(key, value)
                .map_err(|e| db.storage(e))?;
            Ok(())
        })
    }

    #[test]
    fn two_handles_on_one_file_see_each_others_commits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("chitin.redb");
        let (a, b) = (StateDb::new(&path), StateDb::new(&path));
        put(&a, "x", 1).expect("write a");
        assert_eq!(get(&b, "x"), Some(1));
        put(&b, "x", 2).expect("write b");
        assert_eq!(get(&a, "x"), Some(2));
    }

    #[test]
    fn a_failed_transaction_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = StateDb::new(&dir.path().join("chitin.redb"));
        let failed: Result<(), StateError> = db.write(|txn| {
            txn.open_table(T)
                .map_err(|e| db.storage(e))?
                .insert("x", 1)
                .map_err(|e| db.storage(e))?;
            Err(db.storage(redb::Error::TransactionInProgress))
        });
        assert!(failed.is_err());
        assert_eq!(get(&db, "x"), None);
    }

    #[test]
    fn unreadable_and_corrupt_files_are_named_with_what_to_do() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("chitin.redb");
        std::fs::write(&path, b"this is not a redb file, not even close to one....").expect("w");
        let err = put(&StateDb::new(&path), "x", 1).unwrap_err();
        assert!(matches!(err, StateError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("move it aside"), "{err}");
        assert!(err.to_string().contains("chitin.redb"), "{err}");

        let path = dir.path().join("locked.redb");
        put(&StateDb::new(&path), "x", 1).expect("create");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        // Root reads any file; the check only means something for an ordinary user.
        if std::fs::File::open(&path).is_err() {
            let err = put(&StateDb::new(&path), "x", 1).unwrap_err();
            assert!(matches!(err, StateError::Unreachable { .. }), "{err}");
            assert!(err.to_string().contains("writable"), "{err}");
        }
    }
}
