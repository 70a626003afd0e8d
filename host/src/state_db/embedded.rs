//! The embedded backend: one redb file in the data directory, shared by every chitin process
//! on it.
//!
//! Every process keeps the file open in redb's multi-writer mode
//! (`ConcurrencyMode::MultiWriter`, redb's `experimental-multiprocess` feature): a read
//! transaction sees every commit any process made durable before it began, and a write
//! transaction begins from the file as the last writer, in any process, committed it. Opening
//! and closing the file per transaction cost five fsyncs under the lock (redb records its
//! allocator state and a clean-shutdown header on every close); a multi-writer commit costs the
//! two of its two-phase commit, so a writer holds the lock for a fraction of the time.
//!
//! Writers still queue on a cross-process [`FileLock`] on `chitin.redb.lock` first: it bounds
//! the wait (a typed Busy error, never a hang) and measures it for the benchmark. Every commit
//! is durable (`Durability::Immediate`, two-phase) before it returns, and a process killed
//! mid-transaction leaves the last commit intact and its locks released by the kernel; redb
//! recovers the file on the next write. Threads of one process queue on a local lock first, so
//! only one writer of them contends for the file lock.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use super::{KvTxn, LOCK_WAIT, Records, StateError};
use crate::file_lock::{FileLock, LockError};

/// Key-value data: (component id, bucket, key) → value.
const KV: TableDefinition<(&str, &str, &str), &[u8]> = TableDefinition::new("kv");
/// Bytes stored per component (keys plus values, all buckets).
const KV_USAGE: TableDefinition<&str, u64> = TableDefinition::new("kv_usage");
/// (user, tool) → request times, as the rate limiter encodes them.
const HTTP_RATE: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("http_rate");
/// Remembered approvals: `component/tool` → JSON.
const APPROVALS: TableDefinition<&str, &str> = TableDefinition::new("approvals");
/// Pins: `namespace/name` → JSON.
const PINS: TableDefinition<&str, &str> = TableDefinition::new("pins");
/// Secrets: name → sealed record.
const SECRETS: TableDefinition<&str, &[u8]> = TableDefinition::new("secrets");
/// The secrets store's key-check record.
const SECRETS_META: TableDefinition<&str, &[u8]> = TableDefinition::new("secrets_meta");

/// One redb file shared across processes; cheap to create (the file is opened at the first
/// transaction and kept open).
#[derive(Debug)]
pub struct RedbState {
    path: PathBuf,
    lock_path: PathBuf,
    /// The open database and the identity of the file it opened, once a transaction opened it;
    /// dropped after a failure, or when the path no longer names that file, so the next
    /// transaction opens the file afresh.
    db: Mutex<Option<(Arc<redb::Database>, FileId)>>,
    /// Serialises this process's writers before they contend for the file lock.
    writer: Mutex<()>,
}

impl RedbState {
    /// The database at `path`, locked through `<path>.lock`.
    pub fn new(path: &Path) -> Self {
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        Self {
            path: path.to_owned(),
            lock_path: PathBuf::from(lock_path),
            db: Mutex::new(None),
            writer: Mutex::new(()),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A redb failure inside a transaction, as a [`StateError::Storage`] naming the file.
    fn storage(&self, e: impl Into<redb::Error>) -> StateError {
        StateError::Storage {
            path: self.path.clone(),
            reason: e.into().to_string(),
        }
    }

    /// Run `f` in a read transaction: no lock, since a multi-writer read sees the latest
    /// durable commit and writes nothing.
    fn read<R, E: From<StateError>>(
        &self,
        f: impl FnOnce(&redb::ReadTransaction) -> Result<R, E>,
    ) -> Result<R, E> {
        let db = self.database()?;
        let txn = db.begin_read().map_err(|e| self.failed(e))?;
        f(&txn)
    }

    /// Run `f` in a write transaction under both locks, committed durably when `f` succeeds and
    /// dropped (nothing written) when it fails.
    fn write<R, E: From<StateError>>(
        &self,
        f: impl FnOnce(&redb::WriteTransaction) -> Result<R, E>,
    ) -> Result<R, E> {
        // A poisoned mutex only means another thread panicked mid-transaction; redb rolled
        // that transaction back, so carry on.
        let _local = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let (_lock, waited) =
            FileLock::acquire(&self.lock_path, LOCK_WAIT).map_err(|lock| StateError::Busy {
                path: self.path.clone(),
                lock,
            })?;
        log_wait(waited);
        let db = self.database()?;
        let txn = db.begin_write().map_err(|e| self.failed(e))?;
        let out = f(&txn)?;
        txn.commit().map_err(|e| self.failed(e))?;
        Ok(out)
    }

    /// The open database, opening it in multi-writer mode on first use. The path is checked
    /// against the open file on every transaction: a file moved, deleted or replaced under a
    /// running process must not take writes into an inode nobody will read again.
    fn database(&self) -> Result<Arc<redb::Database>, StateError> {
        let mut slot = self.db.lock().unwrap_or_else(|p| p.into_inner());
        let now = FileId::of(&self.path);
        if let Some((db, id)) = slot.as_ref()
            && now.as_ref() == Some(id)
        {
            return Ok(db.clone());
        }
        slot.take();
        let db = redb::Builder::new()
            .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
            .create(&self.path)
            .map_err(|e| self.open_error(e))?;
        let db = Arc::new(db);
        // Known once the file exists; `create` made it.
        if let Some(id) = FileId::of(&self.path) {
            *slot = Some((db.clone(), id));
        }
        Ok(db)
    }

    /// A failure to begin or commit a transaction: the handle is dropped, so the next
    /// transaction reopens the file, and the error names it (a file cut short or overwritten
    /// under the handle reads as corrupt, as it would on opening).
    fn failed(&self, e: impl Into<redb::Error>) -> StateError {
        self.db.lock().unwrap_or_else(|p| p.into_inner()).take();
        let e = e.into();
        let corrupt = match &e {
            redb::Error::Corrupted(_) => true,
            redb::Error::Io(io) => matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
            ),
            _ => false,
        };
        if corrupt {
            return StateError::Corrupt {
                path: self.path.clone(),
                reason: e.to_string(),
            };
        }
        self.storage(e)
    }

    /// Run `f` over a table opened for reading; `empty` answers when it was never created.
    fn read_table<K, V, R>(
        &self,
        def: TableDefinition<K, V>,
        f: impl FnOnce(&redb::ReadOnlyTable<K, V>) -> Result<R, StateError>,
        empty: impl FnOnce() -> R,
    ) -> Result<R, StateError>
    where
        K: redb::Key + 'static,
        V: redb::Value + 'static,
    {
        self.read(|txn| match txn.open_table(def) {
            Ok(table) => f(&table),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(empty()),
            Err(e) => Err(self.storage(e)),
        })
    }

    /// The record of `table` under `key`.
    pub fn record_get(&self, table: Records, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        match table {
            Records::Approvals | Records::Pins => self.read_table(
                text_table(table),
                |t| {
                    let v = t.get(key).map_err(|e| self.storage(e))?;
                    Ok(v.map(|v| v.value().as_bytes().to_vec()))
                },
                || None,
            ),
            Records::Secrets | Records::SecretsMeta => self.read_table(
                bytes_table(table),
                |t| {
                    let v = t.get(key).map_err(|e| self.storage(e))?;
                    Ok(v.map(|v| v.value().to_vec()))
                },
                || None,
            ),
        }
    }

    /// Every record of `table`, in key order.
    pub fn record_all(&self, table: Records) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        match table {
            Records::Approvals | Records::Pins => self.read_table(
                text_table(table),
                |t| {
                    let mut out = Vec::new();
                    for entry in t.iter().map_err(|e| self.storage(e))? {
                        let (k, v) = entry.map_err(|e| self.storage(e))?;
                        out.push((k.value().to_owned(), v.value().as_bytes().to_vec()));
                    }
                    Ok(out)
                },
                Vec::new,
            ),
            Records::Secrets | Records::SecretsMeta => self.read_table(
                bytes_table(table),
                |t| {
                    let mut out = Vec::new();
                    for entry in t.iter().map_err(|e| self.storage(e))? {
                        let (k, v) = entry.map_err(|e| self.storage(e))?;
                        out.push((k.value().to_owned(), v.value().to_vec()));
                    }
                    Ok(out)
                },
                Vec::new,
            ),
        }
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
        self.write(|txn| match table {
            Records::Approvals | Records::Pins => {
                let text = std::str::from_utf8(value).map_err(|e| self.storage_text(e))?;
                let mut t = txn
                    .open_table(text_table(table))
                    .map_err(|e| self.storage(e))?;
                if only_if_absent && let Some(old) = t.get(key).map_err(|e| self.storage(e))? {
                    return Ok(old.value().as_bytes().to_vec());
                }
                t.insert(key, text).map_err(|e| self.storage(e))?;
                Ok(value.to_vec())
            }
            Records::Secrets | Records::SecretsMeta => {
                let mut t = txn
                    .open_table(bytes_table(table))
                    .map_err(|e| self.storage(e))?;
                if only_if_absent && let Some(old) = t.get(key).map_err(|e| self.storage(e))? {
                    return Ok(old.value().to_vec());
                }
                t.insert(key, value).map_err(|e| self.storage(e))?;
                Ok(value.to_vec())
            }
        })
    }

    /// Remove `keys` in one transaction; how many were there.
    pub fn record_remove(&self, table: Records, keys: &[&str]) -> Result<usize, StateError> {
        self.write(|txn| {
            let mut removed = 0;
            match table {
                Records::Approvals | Records::Pins => {
                    let mut t = txn
                        .open_table(text_table(table))
                        .map_err(|e| self.storage(e))?;
                    for key in keys {
                        removed +=
                            usize::from(t.remove(*key).map_err(|e| self.storage(e))?.is_some());
                    }
                }
                Records::Secrets | Records::SecretsMeta => {
                    let mut t = txn
                        .open_table(bytes_table(table))
                        .map_err(|e| self.storage(e))?;
                    for key in keys {
                        removed +=
                            usize::from(t.remove(*key).map_err(|e| self.storage(e))?.is_some());
                    }
                }
            }
            Ok(removed)
        })
    }

    fn storage_text(&self, e: std::str::Utf8Error) -> StateError {
        StateError::Storage {
            path: self.path.clone(),
            reason: format!("record is not UTF-8: {e}"),
        }
    }

    /// Read and replace the rate record of (user, tool) in one transaction.
    pub fn rate_update<R, E: From<StateError>>(
        &self,
        user: &str,
        tool: &str,
        f: impl FnOnce(Option<&[u8]>) -> Result<(Vec<u8>, R), E>,
    ) -> Result<R, E> {
        self.write(|txn| {
            let mut t = txn.open_table(HTTP_RATE).map_err(|e| self.storage(e))?;
            let old = t
                .get((user, tool))
                .map_err(|e| self.storage(e))?
                .map(|v| v.value().to_vec());
            let (new, out) = f(old.as_deref())?;
            t.insert((user, tool), new.as_slice())
                .map_err(|e| self.storage(e))?;
            Ok(out)
        })
    }

    /// Drop the rate records `idle` says are idle.
    pub fn rate_sweep(&self, idle: &dyn Fn(&[u8]) -> bool) -> Result<(), StateError> {
        self.write(|txn| {
            let mut t = txn.open_table(HTTP_RATE).map_err(|e| self.storage(e))?;
            let mut gone = Vec::new();
            for entry in t.iter().map_err(|e| self.storage(e))? {
                let (key, value) = entry.map_err(|e| self.storage(e))?;
                if idle(value.value()) {
                    let (user, tool) = key.value();
                    gone.push((user.to_owned(), tool.to_owned()));
                }
            }
            for (user, tool) in &gone {
                t.remove((user.as_str(), tool.as_str()))
                    .map_err(|e| self.storage(e))?;
            }
            Ok(())
        })
    }

    /// How many (user, tool) rate records there are.
    #[cfg(test)]
    pub fn rate_len(&self) -> Result<usize, StateError> {
        self.read_table(
            HTTP_RATE,
            |t| Ok(redb::ReadableTableMetadata::len(t).map_err(|e| self.storage(e))? as usize),
            || 0,
        )
    }

    /// The values at `keys` of one bucket, in order.
    pub fn kv_get_many(
        &self,
        component: &str,
        bucket: &str,
        keys: &[&str],
    ) -> Result<Vec<Option<Vec<u8>>>, StateError> {
        self.read_table(
            KV,
            |t| {
                keys.iter()
                    .map(|key| {
                        let v = t
                            .get((component, bucket, *key))
                            .map_err(|e| self.storage(e))?;
                        Ok(v.map(|v| v.value().to_vec()))
                    })
                    .collect()
            },
            || vec![None; keys.len()],
        )
    }

    /// Up to `limit` keys of one bucket in order, skipping the first `skip`.
    pub fn kv_keys(
        &self,
        component: &str,
        bucket: &str,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<String>, StateError> {
        self.read_table(
            KV,
            |t| {
                let mut keys = Vec::new();
                let range = t
                    .range((component, bucket, "")..)
                    .map_err(|e| self.storage(e))?;
                for entry in range.skip(skip) {
                    let (key, _) = entry.map_err(|e| self.storage(e))?;
                    let (c, b, k) = key.value();
                    if c != component || b != bucket || keys.len() == limit {
                        break;
                    }
                    keys.push(k.to_owned());
                }
                Ok(keys)
            },
            Vec::new,
        )
    }

    /// Run `f` over the key-value tables in one durable write transaction.
    pub fn kv_write<R, E: From<StateError>>(
        &self,
        f: impl FnOnce(&mut dyn KvTxn) -> Result<R, E>,
    ) -> Result<R, E> {
        self.write(|txn| {
            let mut tables = RedbKv {
                db: self,
                kv: txn.open_table(KV).map_err(|e| self.storage(e))?,
                usage: txn.open_table(KV_USAGE).map_err(|e| self.storage(e))?,
            };
            f(&mut tables)
        })
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

fn text_table(table: Records) -> TableDefinition<'static, &'static str, &'static str> {
    match table {
        Records::Pins => PINS,
        _ => APPROVALS,
    }
}

fn bytes_table(table: Records) -> TableDefinition<'static, &'static str, &'static [u8]> {
    match table {
        Records::SecretsMeta => SECRETS_META,
        _ => SECRETS,
    }
}

/// The key-value tables inside one redb write transaction.
struct RedbKv<'a, 't> {
    db: &'a RedbState,
    kv: redb::Table<'t, (&'static str, &'static str, &'static str), &'static [u8]>,
    usage: redb::Table<'t, &'static str, u64>,
}

impl KvTxn for RedbKv<'_, '_> {
    fn get(&mut self, c: &str, b: &str, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        let v = self.kv.get((c, b, key)).map_err(|e| self.db.storage(e))?;
        Ok(v.map(|v| v.value().to_vec()))
    }

    fn put(&mut self, c: &str, b: &str, key: &str, value: &[u8]) -> Result<(), StateError> {
        self.kv
            .insert((c, b, key), value)
            .map_err(|e| self.db.storage(e))?;
        Ok(())
    }

    fn delete(&mut self, c: &str, b: &str, key: &str) -> Result<(), StateError> {
        self.kv
            .remove((c, b, key))
            .map_err(|e| self.db.storage(e))?;
        Ok(())
    }

    fn usage(&mut self, component: &str) -> Result<u64, StateError> {
        if let Some(bytes) = self.usage.get(component).map_err(|e| self.db.storage(e))? {
            return Ok(bytes.value());
        }
        // Data written before usage was recorded: the sum over its keys.
        let mut total = 0u64;
        for entry in self
            .kv
            .range((component, "", "")..)
            .map_err(|e| self.db.storage(e))?
        {
            let (key, value) = entry.map_err(|e| self.db.storage(e))?;
            let (c, _, k) = key.value();
            if c != component {
                break;
            }
            total += (k.len() + value.value().len()) as u64;
        }
        Ok(total)
    }

    fn set_usage(&mut self, component: &str, bytes: u64) -> Result<(), StateError> {
        self.usage
            .insert(component, bytes)
            .map_err(|e| self.db.storage(e))?;
        Ok(())
    }
}
