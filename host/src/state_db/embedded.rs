//! The embedded backend: one redb file in the data directory, shared by every chitin process
//! on it.
//!
//! redb lets one process at a time open a file, so the database is opened per transaction
//! under a cross-process [`FileLock`] on `chitin.redb.lock` and closed before the lock is
//! released. Every transaction therefore reads what any process committed before it, a commit
//! is durable (`Durability::Immediate`) before it returns, and a process killed mid-transaction
//! leaves the last commit intact and its lock released by the kernel (redb repairs the file on
//! the next open). Reads share the lock and open the file read-only, so they run side by side
//! and write nothing. Threads of one process queue on a local lock first, so only one writer
//! of them contends for the file lock.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

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

/// One redb file shared across processes; cheap to create (nothing is opened until the first
/// transaction).
#[derive(Debug)]
pub struct RedbState {
    path: PathBuf,
    lock_path: PathBuf,
    local: RwLock<()>,
}

impl RedbState {
    /// The database at `path`, locked through `<path>.lock`.
    pub fn new(path: &Path) -> Self {
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        Self {
            path: path.to_owned(),
            lock_path: PathBuf::from(lock_path),
            local: RwLock::new(()),
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

    /// Run `f` in a read transaction. Readers share the lock and open the file read-only:
    /// closing a writable redb handle records its allocator state with fsyncs even when
    /// nothing was written, which made every read cost a write under the exclusive lock. A file
    /// not closed cleanly (its writer was killed) cannot be opened read-only; the read then
    /// takes the exclusive path, which repairs it.
    fn read<R, E: From<StateError>>(
        &self,
        f: impl FnOnce(&redb::ReadTransaction) -> Result<R, E>,
    ) -> Result<R, E> {
        let local = self.local.read().unwrap_or_else(|p| p.into_inner());
        let (lock, waited) =
            FileLock::acquire_shared(&self.lock_path, LOCK_WAIT).map_err(|lock| {
                StateError::Busy {
                    path: self.path.clone(),
                    lock,
                }
            })?;
        log_wait(waited);
        match redb::Builder::new().open_read_only(&self.path) {
            Ok(db) => {
                let txn = db.begin_read().map_err(|e| self.storage(e))?;
                return f(&txn);
            }
            // Not created yet, or in need of repair: the exclusive path creates or repairs.
            Err(redb::DatabaseError::RepairAborted) => {}
            Err(redb::DatabaseError::Storage(redb::StorageError::Io(e)))
                if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(self.open_error(e).into()),
        }
        drop(lock);
        drop(local);
        self.with_db(|db| {
            let txn = db.begin_read().map_err(|e| self.storage(e))?;
            f(&txn)
        })
    }

    /// Run `f` in a write transaction, committed durably when `f` succeeds and dropped (nothing
    /// written) when it fails.
    fn write<R, E: From<StateError>>(
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

    /// Open the database under both locks, run `f`, close it, release the locks.
    fn with_db<R, E: From<StateError>>(
        &self,
        f: impl FnOnce(&redb::Database) -> Result<R, E>,
    ) -> Result<R, E> {
        // A poisoned mutex only means another thread panicked mid-transaction; redb rolled
        // that transaction back, so carry on.
        let _local = self.local.write().unwrap_or_else(|p| p.into_inner());
        let (_lock, waited) =
            FileLock::acquire(&self.lock_path, LOCK_WAIT).map_err(|lock| StateError::Busy {
                path: self.path.clone(),
                lock,
            })?;
        log_wait(waited);
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
