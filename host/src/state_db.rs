//! The state shared by every chitin process that serves the same tools: key-value buckets,
//! secrets (sealed before they get here), remembered approvals, pins and HTTP rate windows.
//!
//! One seam, two backends. [`StateDb::Embedded`] is the default: a SQLite file in the data
//! directory, kept open by every process that uses it, writers queued on a cross-process lock,
//! for any number of processes on one machine. [`StateDb::Postgres`] is for replicas on several machines: the same
//! operations in PostgreSQL (`--state-url`). Callers see only the operations below, each one
//! transaction, durable before it returns.

mod embedded;
mod import;
mod postgres;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use embedded::EmbeddedState;
pub use postgres::{PgState, STATE_URL_ENV, StateUrl, StateUrlError};

use crate::file_lock::LockError;

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
        /// What SQLite or the OS said.
        reason: String,
    },
    /// The file is not a readable database.
    #[error(
        "database {path} is corrupt or not a chitin database ({reason}); move it aside to start \
         afresh (it holds memory, secrets, approvals and pins), or restore it from a backup",
        path = path.display()
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What the database said.
        reason: String,
    },
    /// The path names another file, or none, than the one this process opened: replaced,
    /// restored or removed under it. SQLite's write-ahead log beside it belongs to the file
    /// that was there, so opening the new one now would read the old file's pages into it.
    #[error(
        "database {path} was replaced or removed while this process had it open; stop every \
         chitin process on this data directory, remove {path}-wal and {path}-shm (SQLite's log \
         of the file that was there, which would otherwise be read into the new one), then \
         start again; replace, restore or remove the database only while no chitin process runs",
        path = path.display()
    )]
    Replaced {
        /// The database file.
        path: PathBuf,
    },
    /// A transaction failed after the database opened.
    #[error("database {path}: {reason}", path = path.display())]
    Storage {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        reason: String,
    },
    /// The PostgreSQL server cannot be reached or dropped the connection; chitin reconnects on
    /// the next call.
    #[error(
        "state database {target} cannot be reached: {reason}; check that PostgreSQL is running \
         and accepts this host, and that CHITIN_STATE_URL is right (chitin reconnects on its own)"
    )]
    Offline {
        /// The server and database, without credentials.
        target: String,
        /// What the client said.
        reason: String,
    },
    /// The PostgreSQL server refused a statement or a transaction failed.
    #[error("state database {target}: {reason}")]
    Remote {
        /// The server and database, without credentials.
        target: String,
        /// What the server said.
        reason: String,
    },
}

/// The string-keyed record tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Records {
    /// Remembered approvals: `component/tool` → JSON.
    Approvals,
    /// Pins: `namespace/name` → JSON.
    Pins,
    /// Secrets: name → sealed record (ciphertext only).
    Secrets,
    /// The secrets store's key-check record (ciphertext only).
    SecretsMeta,
}

impl Records {
    /// The table's name, as both backends store it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Approvals => "approvals",
            Self::Pins => "pins",
            Self::Secrets => "secrets",
            Self::SecretsMeta => "secrets_meta",
        }
    }
}

/// The key-value data inside one write transaction: what the store's quota and counter logic
/// runs on, the same on every backend.
pub trait KvTxn {
    /// The value at (component, bucket, key).
    fn get(&mut self, c: &str, b: &str, key: &str) -> Result<Option<Vec<u8>>, StateError>;
    /// Set the value at (component, bucket, key).
    fn put(&mut self, c: &str, b: &str, key: &str, value: &[u8]) -> Result<(), StateError>;
    /// Remove (component, bucket, key), if there.
    fn delete(&mut self, c: &str, b: &str, key: &str) -> Result<(), StateError>;
    /// Bytes `component` stores (keys plus values, all buckets); concurrent writers to the
    /// same component wait for this transaction from here on.
    fn usage(&mut self, component: &str) -> Result<u64, StateError>;
    /// Record the bytes `component` stores.
    fn set_usage(&mut self, component: &str, bytes: u64) -> Result<(), StateError>;
}

/// The shared state, in one of its backends.
#[derive(Debug)]
pub enum StateDb {
    /// A SQLite file in the data directory (the default; boxed: its connections are large).
    Embedded(Box<EmbeddedState>),
    /// A PostgreSQL database shared by replicas (boxed: its pool and TLS setup are large).
    Postgres(Box<PgState>),
}

impl StateDb {
    /// The embedded database at `path`, locked through `<path>.lock`; nothing is opened until
    /// the first transaction.
    pub fn new(path: &Path) -> Self {
        Self::Embedded(Box::new(EmbeddedState::new(path, None)))
    }

    /// As [`StateDb::new`], importing the state an earlier version kept in the redb file
    /// `earlier` when the database is first opened (then renaming that file
    /// `<name>.imported`).
    pub fn importing(path: &Path, earlier: &Path) -> Self {
        Self::Embedded(Box::new(EmbeddedState::new(path, Some(earlier))))
    }

    /// The backend for this invocation: PostgreSQL at `url` when given, else the SQLite file at
    /// `path` (importing `earlier`, as [`StateDb::importing`]).
    pub fn open(path: &Path, earlier: &Path, url: Option<&StateUrl>) -> Result<Self, StateError> {
        Ok(match url {
            Some(url) => Self::Postgres(Box::new(PgState::new(url)?)),
            None => Self::importing(path, earlier),
        })
    }

    /// What the state lives in, for messages: the file, or the server and database.
    pub fn describe(&self) -> String {
        match self {
            Self::Embedded(db) => db.path().display().to_string(),
            Self::Postgres(db) => format!("PostgreSQL {}", db.target()),
        }
    }

    /// The PostgreSQL backend, when this is one: it alone also holds the installed set that
    /// replicas share (the embedded store leaves that to the data directory's lockfile).
    pub fn postgres(&self) -> Option<&PgState> {
        match self {
            Self::Embedded(_) => None,
            Self::Postgres(db) => Some(db),
        }
    }

    /// Whether the database answers now (readiness); the embedded file always can be tried.
    pub fn ping(&self) -> Result<(), StateError> {
        match self {
            Self::Embedded(_) => Ok(()),
            Self::Postgres(db) => db.ping(),
        }
    }

    /// The record of `table` under `key`.
    pub fn record_get(&self, table: Records, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        match self {
            Self::Embedded(db) => db.record_get(table, key),
            Self::Postgres(db) => db.record_get(table, key),
        }
    }

    /// Every record of `table`, in key order (bytewise).
    pub fn record_all(&self, table: Records) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        match self {
            Self::Embedded(db) => db.record_all(table),
            Self::Postgres(db) => db.record_all(table),
        }
    }

    /// Put `value` at `key` of `table`, replacing any earlier record.
    pub fn record_put(&self, table: Records, key: &str, value: &[u8]) -> Result<(), StateError> {
        match self {
            Self::Embedded(db) => db.record_put(table, key, value, false).map(drop),
            Self::Postgres(db) => db.record_put(table, key, value, false).map(drop),
        }
    }

    /// Put `value` at `key` unless a record is there; the record stored afterwards (so two
    /// processes racing keep the first).
    pub fn record_put_if_absent(
        &self,
        table: Records,
        key: &str,
        value: &[u8],
    ) -> Result<Vec<u8>, StateError> {
        match self {
            Self::Embedded(db) => db.record_put(table, key, value, true),
            Self::Postgres(db) => db.record_put(table, key, value, true),
        }
    }

    /// Remove `keys` from `table` in one transaction; how many were there.
    pub fn record_remove(&self, table: Records, keys: &[&str]) -> Result<usize, StateError> {
        match self {
            Self::Embedded(db) => db.record_remove(table, keys),
            Self::Postgres(db) => db.record_remove(table, keys),
        }
    }

    /// Read the rate record of (user, tool) and replace it with what `f` returns, in one
    /// transaction that concurrent updates of the same record wait for; when `f` fails,
    /// nothing is written.
    pub fn rate_update<R: Send, E: From<StateError> + Send>(
        &self,
        user: &str,
        tool: &str,
        f: impl FnOnce(Option<&[u8]>) -> Result<(Vec<u8>, R), E> + Send,
    ) -> Result<R, E> {
        match self {
            Self::Embedded(db) => db.rate_update(user, tool, f),
            Self::Postgres(db) => db.rate_update(user, tool, f),
        }
    }

    /// Drop the rate records `idle` says are idle.
    pub fn rate_sweep(&self, idle: &(dyn Fn(&[u8]) -> bool + Sync)) -> Result<(), StateError> {
        match self {
            Self::Embedded(db) => db.rate_sweep(idle),
            Self::Postgres(db) => db.rate_sweep(idle),
        }
    }

    /// The values at `keys` of one component's bucket, in order.
    pub fn kv_get_many(
        &self,
        component: &str,
        bucket: &str,
        keys: &[&str],
    ) -> Result<Vec<Option<Vec<u8>>>, StateError> {
        match self {
            Self::Embedded(db) => db.kv_get_many(component, bucket, keys),
            Self::Postgres(db) => db.kv_get_many(component, bucket, keys),
        }
    }

    /// Up to `limit` keys of one component's bucket in bytewise order, skipping the first
    /// `skip`.
    pub fn kv_keys(
        &self,
        component: &str,
        bucket: &str,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<String>, StateError> {
        match self {
            Self::Embedded(db) => db.kv_keys(component, bucket, skip, limit),
            Self::Postgres(db) => db.kv_keys(component, bucket, skip, limit),
        }
    }

    /// Whether a write transaction's body runs exactly once (the embedded database); a
    /// PostgreSQL transaction is run again after a serialisation failure.
    pub fn runs_transactions_once(&self) -> bool {
        matches!(self, Self::Embedded(_))
    }

    /// Run `f` in one durable write transaction over the key-value data; when it fails,
    /// nothing is written. `f` may run more than once (PostgreSQL retries a transaction that
    /// lost a deadlock), so it must only act through the transaction.
    pub fn kv_write<R: Send, E: From<StateError> + Send>(
        &self,
        f: impl FnMut(&mut dyn KvTxn) -> Result<R, E> + Send,
    ) -> Result<R, E> {
        match self {
            Self::Embedded(db) => db.kv_write(f),
            Self::Postgres(db) => db.kv_write(f),
        }
    }

    /// How many (user, tool) rate records there are (for tests of the storage bound).
    #[cfg(test)]
    pub fn rate_len(&self) -> Result<usize, StateError> {
        match self {
            Self::Embedded(db) => db.rate_len(),
            Self::Postgres(db) => db.rate_len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn get(db: &StateDb, key: &str) -> Option<Vec<u8>> {
        db.record_get(Records::Secrets, key).expect("read")
    }

    fn put(db: &StateDb, key: &str, value: &[u8]) -> Result<(), StateError> {
        db.record_put(Records::Secrets, key, value)
    }

    #[test]
    fn two_handles_on_one_file_see_each_others_commits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("chitin.db");
        let (a, b) = (StateDb::new(&path), StateDb::new(&path));
        put(&a, "x", b"1").expect("write a");
        assert_eq!(get(&b, "x").as_deref(), Some(&b"1"[..]));
        put(&b, "x", b"2").expect("write b");
        assert_eq!(get(&a, "x").as_deref(), Some(&b"2"[..]));
        // A kept read connection runs each lookup as its own statement, outside any earlier
        // snapshot: it sees the other handle's later commits, a removal included.
        put(&a, "x", b"3").expect("write a again");
        assert_eq!(get(&b, "x").as_deref(), Some(&b"3"[..]));
        a.record_remove(Records::Secrets, &["x"]).expect("remove");
        assert_eq!(get(&b, "x"), None);
        put(&a, "y", b"4").expect("write y");
        let all = b.record_all(Records::Secrets).expect("all");
        assert_eq!(all, vec![("y".to_owned(), b"4".to_vec())]);
    }

    #[test]
    fn the_database_and_its_log_are_private_to_the_user() {
        let modes = |dir: &std::path::Path| {
            ["chitin.db", "chitin.db-wal", "chitin.db-shm"].map(|file| {
                std::fs::metadata(dir.join(file))
                    .expect(file)
                    .permissions()
                    .mode()
                    & 0o777
            })
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let db = StateDb::new(&dir.path().join("chitin.db"));
        put(&db, "x", b"1").expect("write");
        assert_eq!(modes(dir.path()), [0o600; 3], "a new file");

        // One an earlier version made readable by all is narrowed as it is opened.
        let earlier = tempfile::tempdir().expect("tempdir");
        let path = earlier.path().join("chitin.db");
        std::fs::write(&path, b"").expect("an empty database");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let db = StateDb::new(&path);
        put(&db, "x", b"1").expect("write");
        assert_eq!(modes(earlier.path()), [0o600; 3], "an earlier file");
    }

    #[test]
    fn a_file_replaced_or_removed_under_a_running_process_is_refused_until_it_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("chitin.db");
        let restore = dir.path().join("restore.db");
        put(&StateDb::new(&restore), "restored", b"1").expect("write the restore");
        let server = StateDb::new(&path);
        put(&server, "revoked-by-the-restore", b"1").expect("write");
        assert!(get(&server, "revoked-by-the-restore").is_some());
        // Another database moved over the path: its log at the path is the old file's.
        std::fs::rename(&restore, &path).expect("mv");
        let read = server.record_get(Records::Secrets, "restored").unwrap_err();
        assert!(matches!(read, StateError::Replaced { .. }), "{read}");
        assert!(
            read.to_string().contains("stop every chitin process"),
            "{read}"
        );
        let write = put(&server, "x", b"1").unwrap_err();
        assert!(matches!(write, StateError::Replaced { .. }), "{write}");
        // Once the process stops and the old file's log is removed, as the error says, the
        // restored file is read as it is.
        drop(server);
        for log in ["chitin.db-wal", "chitin.db-shm"] {
            let log = dir.path().join(log);
            if log.exists() {
                std::fs::remove_file(log).expect("remove the old file's log");
            }
        }
        let restarted = StateDb::new(&path);
        assert_eq!(get(&restarted, "restored").as_deref(), Some(&b"1"[..]));
        assert_eq!(get(&restarted, "revoked-by-the-restore"), None);
        // Removed under a running process: refused too, not created afresh beside the log.
        std::fs::remove_file(&path).expect("rm");
        let gone = restarted
            .record_get(Records::Secrets, "restored")
            .unwrap_err();
        assert!(matches!(gone, StateError::Replaced { .. }), "{gone}");
    }

    #[test]
    fn a_failed_transaction_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = StateDb::new(&dir.path().join("chitin.db"));
        let failed: Result<(), StateError> = db.kv_write(|txn| {
            txn.put("x/a", "b", "k", b"1")?;
            Err(StateError::Storage {
                path: PathBuf::new(),
                reason: "test".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(db.kv_get_many("x/a", "b", &["k"]).expect("read"), [None]);
    }

    #[test]
    fn unreadable_and_corrupt_files_are_named_with_what_to_do() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("chitin.db");
        std::fs::write(
            &path,
            b"this is not a database file, not even close to one....",
        )
        .expect("w");
        let err = put(&StateDb::new(&path), "x", b"1").unwrap_err();
        assert!(matches!(err, StateError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("move it aside"), "{err}");
        assert!(err.to_string().contains("chitin.db"), "{err}");

        let path = dir.path().join("locked.db");
        put(&StateDb::new(&path), "x", b"1").expect("create");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        // Root reads any file; the check only means something for an ordinary user.
        if std::fs::File::open(&path).is_err() {
            let err = put(&StateDb::new(&path), "x", b"1").unwrap_err();
            assert!(matches!(err, StateError::Unreachable { .. }), "{err}");
            assert!(err.to_string().contains("writable"), "{err}");
        }
    }
}
