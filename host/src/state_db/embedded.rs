//! The embedded backend: one SQLite file in the data directory, shared by every chitin process
//! on it.
//!
//! The file is in write-ahead-log mode with `synchronous = FULL`: a commit appends its pages to
//! `<file>-wal` and syncs that file once, and a read sees every commit any process made before
//! it began, without waiting for writers. redb, the store before this one, committed in two
//! phases (two syncs) whenever several processes shared its file; one sync is about half the
//! time of a durable write (docs/performance-log.md, "One sync a commit").
//!
//! Writers queue on a cross-process [`FileLock`] on `<file>.lock` first: it bounds the wait (a
//! typed Busy error, never a hang) and measures it for the benchmark. Every commit is durable
//! before it returns, and a process killed mid-transaction leaves the last commit intact (its
//! pages in the log are not committed) and its locks released by the kernel. Threads of one
//! process queue on a local lock first, so only one writer of them contends for the file lock.
//! Each process keeps its connections open, one for writing and a few for reading.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};

use super::import;
use super::{KvTxn, LOCK_WAIT, Records, StateError};
use crate::file_lock::{FileLock, LockError};

/// The tables, created on every connection's first use (a no-op once they exist). Text
/// compares bytewise (SQLite's BINARY collation), so key order is the bytes' order, as
/// PostgreSQL's `C` collation gives the other backend.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kv (
    component TEXT NOT NULL, bucket TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (component, bucket, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kv_usage (
    component TEXT NOT NULL PRIMARY KEY, bytes INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS http_rate (
    user TEXT NOT NULL, tool TEXT NOT NULL, record BLOB NOT NULL,
    PRIMARY KEY (user, tool)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS approvals (key TEXT NOT NULL PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pins (key TEXT NOT NULL PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS secrets (key TEXT NOT NULL PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS secrets_meta (key TEXT NOT NULL PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
";

/// Read connections kept open per process; more readers at once open more and close them.
const KEPT_READERS: usize = 4;

/// One SQLite file shared across processes; cheap to create (the file is opened at the first
/// transaction and kept open).
#[derive(Debug)]
pub struct EmbeddedState {
    path: PathBuf,
    lock_path: PathBuf,
    /// A redb file of an earlier version to import state from, once, when it exists.
    earlier: Option<PathBuf>,
    /// The write connection, under this process's writer lock; dropped after a failure, or
    /// when the path no longer names its file, so the next transaction opens the file afresh.
    writer: Mutex<Option<Open>>,
    /// Idle read connections.
    readers: Mutex<Vec<Open>>,
    /// The file this process first opened; it uses no other (see [`StateError::Replaced`]).
    opened: OnceLock<FileId>,
}

/// A connection and the file it opened.
#[derive(Debug)]
struct Open {
    conn: Connection,
    id: FileId,
    /// The same file, read on its own for [`EmbeddedState::intact`].
    file: std::fs::File,
}

impl EmbeddedState {
    /// The database at `path`, locked through `<path>.lock`, importing what an earlier version
    /// kept in `earlier` (a redb file) the first time it is opened.
    pub fn new(path: &Path, earlier: Option<&Path>) -> Self {
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        Self {
            path: path.to_owned(),
            lock_path: PathBuf::from(lock_path),
            // Never the file itself, whose lock the import would then wait for.
            earlier: earlier.filter(|e| *e != path).map(Path::to_owned),
            writer: Mutex::new(None),
            readers: Mutex::new(Vec::new()),
            opened: OnceLock::new(),
        }
    }

    /// What the path names now, refused unless it is the file this process opened first (or
    /// it opened none yet). Checked on every transaction.
    fn current(&self) -> Result<Option<FileId>, StateError> {
        let now = FileId::of(&self.path);
        match self.opened.get() {
            Some(first) if now != Some(*first) => Err(StateError::Replaced {
                path: self.path.clone(),
            }),
            _ => Ok(now),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A failure inside a transaction, as a [`StateError`] naming the file.
    fn storage(&self, e: rusqlite::Error) -> StateError {
        let reason = e.to_string();
        let path = self.path.clone();
        match e.sqlite_error_code() {
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
                StateError::Corrupt { path, reason }
            }
            Some(ErrorCode::CannotOpen | ErrorCode::PermissionDenied | ErrorCode::ReadOnly) => {
                StateError::Unreachable { path, reason }
            }
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StateError::Busy {
                lock: LockError::Busy {
                    path: path.clone(),
                    waited_ms: LOCK_WAIT.as_millis(),
                },
                path,
            },
            _ => StateError::Storage { path, reason },
        }
    }

    /// Open the file and make it ready: log mode, sync level, tables, and the import of an
    /// earlier version's state. Called under the file lock, so two processes opening a new
    /// file do not race on its set-up.
    fn open(&self) -> Result<Open, StateError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        // The file is private (SQLite would make it 0644, and its log and index take the
        // file's mode): memory, approvals and rate windows are the user's, in a backup too. One
        // an earlier version made is narrowed; the data directory (0700) kept others out of it.
        {
            use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&self.path)
                .map_err(|e| StateError::Unreachable {
                    path: self.path.clone(),
                    reason: e.to_string(),
                })?;
            let mode = file.metadata().map(|m| m.permissions().mode()).unwrap_or(0);
            if mode & 0o077 != 0
                && let Err(e) = file.set_permissions(std::fs::Permissions::from_mode(0o600))
            {
                tracing::warn!(path = %self.path.display(), error = %e, "the database stays readable by others");
            }
        }
        let mut conn =
            Connection::open_with_flags(&self.path, flags).map_err(|e| self.storage(e))?;
        conn.busy_timeout(LOCK_WAIT).map_err(|e| self.storage(e))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(|e| self.storage(e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StateError::Storage {
                path: self.path.clone(),
                reason: format!("the file stays in journal mode {mode}, not the write-ahead log"),
            });
        }
        // FULL: every commit syncs the log, so it is durable when it returns. An 8 MiB page
        // cache (2 MiB by default) holds what a memory search reads (its group and block
        // records, some 0.4 MiB at 10,000 documents) from one search to the next.
        conn.execute_batch(
            "PRAGMA synchronous = FULL; PRAGMA trusted_schema = OFF; PRAGMA foreign_keys = OFF; \
             PRAGMA cache_size = -8192;",
        )
        .map_err(|e| self.storage(e))?;
        conn.execute_batch(SCHEMA).map_err(|e| self.storage(e))?;
        if let Some(earlier) = &self.earlier {
            import::from_redb(earlier, &self.path, &mut conn)?;
        }
        // Known once the file exists; opening created it.
        let id = FileId::of(&self.path).ok_or_else(|| StateError::Unreachable {
            path: self.path.clone(),
            reason: "the file vanished as it was opened".into(),
        })?;
        let file = std::fs::File::open(&self.path).map_err(|e| StateError::Unreachable {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        // Another thread may have opened it first, under the same file lock: the same file.
        if *self.opened.get_or_init(|| id) != id {
            return Err(StateError::Replaced {
                path: self.path.clone(),
            });
        }
        Ok(Open { conn, id, file })
    }

    /// Whether the open file still begins as a SQLite database does. A file overwritten in
    /// place keeps its inode, and SQLite would go on serving and writing pages from its log;
    /// this refuses it as corrupt instead. It cannot tell another SQLite database (a backup
    /// copied over it, say) from the file itself: that is the operator's to do with every
    /// chitin process stopped, as the error for a replaced file says.
    fn intact(&self, open: &Open) -> Result<(), StateError> {
        use std::os::unix::fs::FileExt;
        const HEADER: &[u8; 16] = b"SQLite format 3\0";
        let mut head = [0u8; 16];
        let mut read = 0;
        while read < head.len() {
            match open.file.read_at(&mut head[read..], read as u64) {
                Ok(0) => break,
                Ok(n) => read += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(StateError::Unreachable {
                        path: self.path.clone(),
                        reason: e.to_string(),
                    });
                }
            }
        }
        // Empty until SQLite first writes it.
        if read == 0 || head == *HEADER {
            return Ok(());
        }
        Err(StateError::Corrupt {
            path: self.path.clone(),
            reason: "the file no longer begins with SQLite's header: something overwrote it \
                     while chitin had it open"
                .into(),
        })
    }

    /// The file lock, for setting up or writing the file.
    fn lock(&self) -> Result<FileLock, StateError> {
        let (lock, waited) =
            FileLock::acquire(&self.lock_path, LOCK_WAIT).map_err(|lock| StateError::Busy {
                path: self.path.clone(),
                lock,
            })?;
        log_wait(waited);
        Ok(lock)
    }

    /// Run `f`, which makes one statement, on a read connection: the statement is its own read
    /// transaction (SQLite's autocommit), so it sees the latest commit as it began without the
    /// `BEGIN` and `COMMIT` that an explicit transaction parses and runs each time (a fifth of
    /// a remembered-approval lookup). No lock: the log serves readers without waiting.
    fn read<R>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, StateError>,
    ) -> Result<R, StateError> {
        self.with_reader(|conn| f(conn))
    }

    /// Run `f`, which may make several statements, in one read transaction, so they all see
    /// the same commit.
    fn read_snapshot<R>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<R, StateError>,
    ) -> Result<R, StateError> {
        self.with_reader(|conn| {
            let txn = conn
                .transaction_with_behavior(TransactionBehavior::Deferred)
                .map_err(|e| self.storage(e))?;
            let out = f(&txn)?;
            txn.finish().map_err(|e| self.storage(e))?;
            Ok(out)
        })
    }

    /// Run `f` on an idle read connection to the file the path names now (a new one when none
    /// is idle), checked intact first, and keep the connection for the next read.
    fn with_reader<R>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<R, StateError>,
    ) -> Result<R, StateError> {
        let now = self.current()?;
        let kept = {
            let mut readers = self.readers.lock().unwrap_or_else(|p| p.into_inner());
            // Connections to a file that is no longer at the path are closed.
            readers.retain(|open| Some(open.id) == now);
            readers.pop()
        };
        let mut open = match kept {
            Some(open) => open,
            None => {
                let _lock = self.lock()?;
                self.open()?
            }
        };
        self.intact(&open)?;
        let out = f(&mut open.conn)?;
        let mut readers = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        if readers.len() < KEPT_READERS {
            readers.push(open);
        }
        Ok(out)
    }

    /// Run `f` in a write transaction under both locks, committed durably when `f` succeeds and
    /// rolled back (nothing written) when it fails.
    fn write<R, E: From<StateError>>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<R, E>,
    ) -> Result<R, E> {
        // A poisoned mutex only means another thread panicked mid-transaction; dropping its
        // transaction rolled it back, so carry on.
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let _lock = self.lock()?;
        // The path is checked against the open file on every transaction: a file moved,
        // deleted or replaced under a running process must not take writes into an inode
        // nobody will read again, nor be opened anew beside the old file's log.
        let now = self.current()?;
        // Taken out while in use: a failure to begin or commit leaves it out, so the next
        // transaction opens the file afresh.
        let mut open = match writer.take() {
            Some(open) if Some(open.id) == now => open,
            _ => self.open()?,
        };
        self.intact(&open)?;
        let txn = open
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.storage(e))?;
        let out = match f(&txn) {
            Ok(out) => out,
            Err(e) => {
                drop(txn);
                *writer = Some(open);
                return Err(e);
            }
        };
        txn.commit().map_err(|e| self.storage(e))?;
        *writer = Some(open);
        Ok(out)
    }

    /// The record of `table` under `key`.
    pub fn record_get(&self, table: Records, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        self.read(|conn| {
            let sql = format!("SELECT value FROM {} WHERE key = ?1", table.name());
            let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.storage(e))?;
            stmt.query_row([key], |row| row.get(0))
                .optional()
                .map_err(|e| self.storage(e))
        })
    }

    /// Every record of `table`, in key order.
    pub fn record_all(&self, table: Records) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        self.read(|conn| {
            let sql = format!("SELECT key, value FROM {} ORDER BY key", table.name());
            let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.storage(e))?;
            let rows = stmt
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(|e| self.storage(e))?;
            rows.collect::<Result<_, _>>().map_err(|e| self.storage(e))
        })
    }

    /// Put `value` at `key`; when `only_if_absent`, an existing record stays. The record stored
    /// afterwards.
    pub fn record_put(
        &self,
        table: Records,
        key: &str,
        value: &[u8],
        only_if_absent: bool,
    ) -> Result<Vec<u8>, StateError> {
        if matches!(table, Records::Approvals | Records::Pins)
            && let Err(e) = std::str::from_utf8(value)
        {
            return Err(StateError::Storage {
                path: self.path.clone(),
                reason: format!("record is not UTF-8: {e}"),
            });
        }
        self.write(|txn| {
            if only_if_absent {
                let sql = format!("SELECT value FROM {} WHERE key = ?1", table.name());
                let old: Option<Vec<u8>> = txn
                    .prepare_cached(&sql)
                    .and_then(|mut stmt| stmt.query_row([key], |row| row.get(0)).optional())
                    .map_err(|e| self.storage(e))?;
                if let Some(old) = old {
                    return Ok(old);
                }
            }
            let sql = format!(
                "INSERT OR REPLACE INTO {} (key, value) VALUES (?1, ?2)",
                table.name()
            );
            txn.prepare_cached(&sql)
                .and_then(|mut stmt| stmt.execute(rusqlite::params![key, value]))
                .map_err(|e| self.storage(e))?;
            Ok(value.to_vec())
        })
    }

    /// Remove `keys` in one transaction; how many were there.
    pub fn record_remove(&self, table: Records, keys: &[&str]) -> Result<usize, StateError> {
        self.write(|txn| {
            let sql = format!("DELETE FROM {} WHERE key = ?1", table.name());
            let mut stmt = txn.prepare_cached(&sql).map_err(|e| self.storage(e))?;
            let mut removed = 0;
            for key in keys {
                removed += stmt.execute([key]).map_err(|e| self.storage(e))?;
            }
            Ok(removed)
        })
    }

    /// Read and replace the rate record of (user, tool) in one transaction.
    pub fn rate_update<R, E: From<StateError>>(
        &self,
        user: &str,
        tool: &str,
        f: impl FnOnce(Option<&[u8]>) -> Result<(Vec<u8>, R), E>,
    ) -> Result<R, E> {
        self.write(|txn| {
            let old: Option<Vec<u8>> = txn
                .prepare_cached("SELECT record FROM http_rate WHERE user = ?1 AND tool = ?2")
                .and_then(|mut stmt| stmt.query_row([user, tool], |row| row.get(0)).optional())
                .map_err(|e| self.storage(e))?;
            let (new, out) = f(old.as_deref())?;
            txn.prepare_cached(
                "INSERT OR REPLACE INTO http_rate (user, tool, record) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut stmt| stmt.execute(rusqlite::params![user, tool, new]))
            .map_err(|e| self.storage(e))?;
            Ok(out)
        })
    }

    /// Drop the rate records `idle` says are idle.
    pub fn rate_sweep(&self, idle: &dyn Fn(&[u8]) -> bool) -> Result<(), StateError> {
        self.write(|txn| {
            let mut gone: Vec<(String, String)> = Vec::new();
            {
                let mut stmt = txn
                    .prepare_cached("SELECT user, tool, record FROM http_rate")
                    .map_err(|e| self.storage(e))?;
                let mut rows = stmt.query([]).map_err(|e| self.storage(e))?;
                while let Some(row) = rows.next().map_err(|e| self.storage(e))? {
                    let record = row.get_ref(2).map_err(|e| self.storage(e))?;
                    let record = record.as_blob().map_err(|e| StateError::Storage {
                        path: self.path.clone(),
                        reason: format!("a rate record is not bytes: {e}"),
                    })?;
                    if idle(record) {
                        gone.push((
                            row.get(0).map_err(|e| self.storage(e))?,
                            row.get(1).map_err(|e| self.storage(e))?,
                        ));
                    }
                }
            }
            let mut stmt = txn
                .prepare_cached("DELETE FROM http_rate WHERE user = ?1 AND tool = ?2")
                .map_err(|e| self.storage(e))?;
            for (user, tool) in &gone {
                stmt.execute([user, tool]).map_err(|e| self.storage(e))?;
            }
            Ok(())
        })
    }

    /// How many (user, tool) rate records there are.
    #[cfg(test)]
    pub fn rate_len(&self) -> Result<usize, StateError> {
        self.read(|conn| {
            let n: i64 = conn
                .query_row("SELECT count(*) FROM http_rate", [], |row| row.get(0))
                .map_err(|e| self.storage(e))?;
            Ok(usize::try_from(n).unwrap_or(0))
        })
    }

    /// The values at `keys` of one bucket, in order.
    pub fn kv_get_many(
        &self,
        component: &str,
        bucket: &str,
        keys: &[&str],
    ) -> Result<Vec<Option<Vec<u8>>>, StateError> {
        self.read_snapshot(|txn| {
            let mut stmt = txn.prepare_cached(KV_GET).map_err(|e| self.storage(e))?;
            keys.iter()
                .map(|key| {
                    stmt.query_row([component, bucket, *key], |row| row.get(0))
                        .optional()
                        .map_err(|e| self.storage(e))
                })
                .collect()
        })
    }

    /// Up to `limit` keys of one bucket in order, skipping the first `skip`.
    pub fn kv_keys(
        &self,
        component: &str,
        bucket: &str,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<String>, StateError> {
        // Beyond i64's range both mean "all": SQLite's limits are signed.
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT key FROM kv WHERE component = ?1 AND bucket = ?2 \
                     ORDER BY key LIMIT ?3 OFFSET ?4",
                )
                .map_err(|e| self.storage(e))?;
            let rows = stmt
                .query_map(rusqlite::params![component, bucket, limit, skip], |row| {
                    row.get(0)
                })
                .map_err(|e| self.storage(e))?;
            rows.collect::<Result<_, _>>().map_err(|e| self.storage(e))
        })
    }

    /// Run `f` over the key-value tables in one durable write transaction.
    pub fn kv_write<R, E: From<StateError>>(
        &self,
        f: impl FnOnce(&mut dyn KvTxn) -> Result<R, E>,
    ) -> Result<R, E> {
        self.write(|txn| f(&mut SqliteKv { db: self, txn }))
    }
}

/// One key-value pair's value.
const KV_GET: &str = "SELECT value FROM kv WHERE component = ?1 AND bucket = ?2 AND key = ?3";

/// Which file a path named: device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The file `path` names now, if it names one.
    fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        meta.is_file().then(|| Self {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
}

/// The lock wait, for the benchmark (`chitin::state_db=debug`).
fn log_wait(waited: std::time::Duration) {
    tracing::debug!(
        target: "chitin::state_db",
        lock_wait_us = waited.as_micros() as u64,
        "database lock taken"
    );
}

/// The key-value tables inside one write transaction.
struct SqliteKv<'a, 't> {
    db: &'a EmbeddedState,
    txn: &'a rusqlite::Transaction<'t>,
}

impl KvTxn for SqliteKv<'_, '_> {
    fn get(&mut self, c: &str, b: &str, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        self.txn
            .prepare_cached(KV_GET)
            .and_then(|mut stmt| stmt.query_row([c, b, key], |row| row.get(0)).optional())
            .map_err(|e| self.db.storage(e))
    }

    fn put(&mut self, c: &str, b: &str, key: &str, value: &[u8]) -> Result<(), StateError> {
        self.txn
            .prepare_cached(
                "INSERT OR REPLACE INTO kv (component, bucket, key, value) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut stmt| stmt.execute(rusqlite::params![c, b, key, value]))
            .map_err(|e| self.db.storage(e))?;
        Ok(())
    }

    fn delete(&mut self, c: &str, b: &str, key: &str) -> Result<(), StateError> {
        self.txn
            .prepare_cached("DELETE FROM kv WHERE component = ?1 AND bucket = ?2 AND key = ?3")
            .and_then(|mut stmt| stmt.execute([c, b, key]))
            .map_err(|e| self.db.storage(e))?;
        Ok(())
    }

    fn usage(&mut self, component: &str) -> Result<u64, StateError> {
        let recorded: Option<i64> = self
            .txn
            .prepare_cached("SELECT bytes FROM kv_usage WHERE component = ?1")
            .and_then(|mut stmt| stmt.query_row([component], |row| row.get(0)).optional())
            .map_err(|e| self.db.storage(e))?;
        // Data imported from a version that did not record usage: the sum over its keys (in
        // bytes: text is cast to a blob to count bytes, not characters).
        let bytes = match recorded {
            Some(bytes) => bytes,
            None => self
                .txn
                .prepare_cached(
                    "SELECT coalesce(sum(length(CAST(key AS BLOB)) + length(value)), 0) \
                     FROM kv WHERE component = ?1",
                )
                .and_then(|mut stmt| stmt.query_row([component], |row| row.get(0)))
                .map_err(|e| self.db.storage(e))?,
        };
        Ok(u64::try_from(bytes).unwrap_or(0))
    }

    fn set_usage(&mut self, component: &str, bytes: u64) -> Result<(), StateError> {
        let bytes = i64::try_from(bytes).map_err(|_| StateError::Storage {
            path: self.db.path.clone(),
            reason: format!("usage of {component} ({bytes} bytes) is beyond what can be stored"),
        })?;
        self.txn
            .prepare_cached("INSERT OR REPLACE INTO kv_usage (component, bytes) VALUES (?1, ?2)")
            .and_then(|mut stmt| stmt.execute(rusqlite::params![component, bytes]))
            .map_err(|e| self.db.storage(e))?;
        Ok(())
    }
}
