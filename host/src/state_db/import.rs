//! The one-time import of a data directory's state from the redb file that versions before the
//! SQLite store kept (`chitin.redb`): memory and other key-value data, secrets (still sealed),
//! remembered approvals, pins and rate windows all carry over, so an upgrade loses nothing.
//!
//! It runs when a process first opens the SQLite file and finds the redb file beside it, under
//! the SQLite file's lock and the redb file's own lock (which a process of the earlier version
//! still running takes to write), in one SQLite transaction that also records the import. The
//! redb file is then renamed `<name>.imported` and kept, as a backup the operator may delete.

use std::path::{Path, PathBuf};

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::{LOCK_WAIT, StateError};
use crate::file_lock::FileLock;

/// The earlier version's tables, as it defined them.
const KV: TableDefinition<(&str, &str, &str), &[u8]> = TableDefinition::new("kv");
const KV_USAGE: TableDefinition<&str, u64> = TableDefinition::new("kv_usage");
const HTTP_RATE: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("http_rate");
const APPROVALS: TableDefinition<&str, &str> = TableDefinition::new("approvals");
const PINS: TableDefinition<&str, &str> = TableDefinition::new("pins");
const SECRETS: TableDefinition<&str, &[u8]> = TableDefinition::new("secrets");
const SECRETS_META: TableDefinition<&str, &[u8]> = TableDefinition::new("secrets_meta");

/// The `meta` key that records an import, so a crash between the commit and the rename does
/// not import the old state again over newer writes.
const IMPORTED: &str = "imported_from_redb";

/// Import `earlier` into the SQLite file `path` (open as `conn`) unless there is nothing to
/// import or it was imported before.
pub fn from_redb(earlier: &Path, path: &Path, conn: &mut Connection) -> Result<(), StateError> {
    let sqlite = |e: rusqlite::Error| StateError::Storage {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    if !earlier.is_file() {
        return Ok(());
    }
    let done: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [IMPORTED], |row| {
            row.get(0)
        })
        .optional()
        .map_err(sqlite)?;
    let mut kept = earlier.as_os_str().to_owned();
    kept.push(".imported");
    let kept = PathBuf::from(kept);
    if let Some(from) = done {
        // Imported, but the process that did it stopped before the rename: finish it.
        if !kept.exists() {
            keep_aside(earlier, &kept);
            return Ok(());
        }
        tracing::warn!(
            target: "chitin::state_db",
            file = %earlier.display(),
            imported_from = %from,
            "an earlier version's state file is here again; its state was imported before, so \
             it is not read (stop chitin processes of earlier versions, then remove it)"
        );
        return Ok(());
    }
    let mut lock_path = earlier.as_os_str().to_owned();
    lock_path.push(".lock");
    let (_lock, _) =
        FileLock::acquire(Path::new(&lock_path), LOCK_WAIT).map_err(|lock| StateError::Busy {
            path: earlier.to_owned(),
            lock,
        })?;
    let txn = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite)?;
    let rows = copy(earlier, &txn)?;
    txn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2)",
        [IMPORTED, &earlier.display().to_string()],
    )
    .map_err(sqlite)?;
    txn.commit().map_err(sqlite)?;
    tracing::info!(
        target: "chitin::state_db",
        from = %earlier.display(),
        to = %path.display(),
        rows,
        "imported the state of an earlier version"
    );
    keep_aside(earlier, &kept);
    Ok(())
}

/// Rename the imported file to `kept`. The import is recorded, so a file left in place is
/// never read again; a failure is only reported.
fn keep_aside(earlier: &Path, kept: &Path) {
    if let Err(e) = std::fs::rename(earlier, kept) {
        tracing::warn!(
            target: "chitin::state_db",
            file = %earlier.display(),
            error = %e,
            "imported, but could not rename the earlier state file; it is no longer read"
        );
    }
}

/// Copy every table of the redb file into the transaction; how many rows.
fn copy(earlier: &Path, txn: &rusqlite::Transaction<'_>) -> Result<usize, StateError> {
    let corrupt = |reason: String| StateError::Corrupt {
        path: earlier.to_owned(),
        reason,
    };
    let db = redb::Builder::new()
        .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
        .open(earlier)
        .map_err(|e| corrupt(e.to_string()))?;
    let read = db.begin_read().map_err(|e| corrupt(e.to_string()))?;
    let mut rows = 0;
    let mut put = |sql: &str, params: &[&dyn rusqlite::ToSql]| {
        rows += 1;
        txn.prepare_cached(sql)
            .and_then(|mut stmt| stmt.execute(params))
            .map_err(|e| StateError::Storage {
                path: earlier.to_owned(),
                reason: format!("importing: {e}"),
            })
    };
    macro_rules! each {
        ($def:expr, |$k:ident, $v:ident| $body:expr) => {
            match read.open_table($def) {
                Ok(table) => {
                    for entry in table.iter().map_err(|e| corrupt(e.to_string()))? {
                        let (k, v) = entry.map_err(|e| corrupt(e.to_string()))?;
                        let ($k, $v) = (k.value(), v.value());
                        $body?;
                    }
                }
                Err(redb::TableError::TableDoesNotExist(_)) => {}
                Err(e) => return Err(corrupt(e.to_string())),
            }
        };
    }
    each!(KV, |k, v| put(
        "INSERT INTO kv (component, bucket, key, value) VALUES (?1, ?2, ?3, ?4)",
        &[&k.0, &k.1, &k.2, &v]
    ));
    each!(KV_USAGE, |k, v| put(
        "INSERT INTO kv_usage (component, bytes) VALUES (?1, ?2)",
        &[&k, &i64::try_from(v).unwrap_or(i64::MAX)]
    ));
    each!(HTTP_RATE, |k, v| put(
        "INSERT INTO http_rate (user, tool, record) VALUES (?1, ?2, ?3)",
        &[&k.0, &k.1, &v]
    ));
    each!(APPROVALS, |k, v| put(
        "INSERT INTO approvals (key, value) VALUES (?1, ?2)",
        &[&k, &v.as_bytes()]
    ));
    each!(PINS, |k, v| put(
        "INSERT INTO pins (key, value) VALUES (?1, ?2)",
        &[&k, &v.as_bytes()]
    ));
    each!(SECRETS, |k, v| put(
        "INSERT INTO secrets (key, value) VALUES (?1, ?2)",
        &[&k, &v]
    ));
    each!(SECRETS_META, |k, v| put(
        "INSERT INTO secrets_meta (key, value) VALUES (?1, ?2)",
        &[&k, &v]
    ));
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state_db::{Records, StateDb};

    /// A redb file as the earlier version left it: a row in every table.
    fn earlier_file(path: &Path) {
        let db = redb::Builder::new()
            .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
            .create(path)
            .expect("create");
        let txn = db.begin_write().expect("begin");
        {
            let mut t = txn.open_table(KV).expect("kv");
            t.insert(("local/memory", "memory", "seq"), &b"12"[..])
                .expect("insert");
            t.insert(("local/memory", "memory", "n:1:t"), &b"caf\xc3\xa9"[..])
                .expect("insert");
            t.insert(("local/other", "b", "k"), &b"v"[..])
                .expect("insert");
            let mut t = txn.open_table(KV_USAGE).expect("usage");
            t.insert("local/memory", 40).expect("insert");
            let mut t = txn.open_table(HTTP_RATE).expect("rate");
            t.insert(("alice", "fetch"), &b"\x01\x02"[..])
                .expect("insert");
            let mut t = txn.open_table(APPROVALS).expect("approvals");
            t.insert("local/shell/run", "{\"always\":true}")
                .expect("insert");
            let mut t = txn.open_table(PINS).expect("pins");
            t.insert("acme/tool", "{\"digest\":\"x\"}").expect("insert");
            let mut t = txn.open_table(SECRETS).expect("secrets");
            t.insert("token", &b"sealed"[..]).expect("insert");
            let mut t = txn.open_table(SECRETS_META).expect("meta");
            t.insert("check", &b"sealed-check"[..]).expect("insert");
        }
        txn.commit().expect("commit");
    }

    /// A pin written after the import, which no later opening may overwrite.
    const NEWER: &[u8] = b"{\"digest\":\"new\"}";

    fn newer_pin(db: &StateDb) -> Option<Vec<u8>> {
        db.record_get(Records::Pins, "acme/tool").expect("read")
    }

    #[test]
    fn an_earlier_redb_file_is_imported_once_and_kept_aside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let earlier = dir.path().join("chitin.redb");
        let path = dir.path().join("chitin.db");
        earlier_file(&earlier);

        let db = StateDb::importing(&path, &earlier);
        let kv = db
            .kv_get_many("local/memory", "memory", &["seq", "n:1:t", "none"])
            .expect("read");
        assert_eq!(kv, [Some(b"12".to_vec()), Some("café".into()), None]);
        assert_eq!(
            db.kv_keys("local/memory", "memory", 0, 10).expect("keys"),
            ["n:1:t", "seq"]
        );
        assert_eq!(db.kv_keys("local/other", "b", 0, 10).expect("keys"), ["k"]);
        let usage = db.kv_write(|txn| txn.usage("local/memory")).expect("usage");
        assert_eq!(usage, 40);
        assert_eq!(db.rate_len().expect("rate"), 1);
        let rate = db
            .rate_update("alice", "fetch", |old| {
                Ok::<_, StateError>((b"\x03".to_vec(), old.map(<[u8]>::to_vec)))
            })
            .expect("rate");
        assert_eq!(rate.as_deref(), Some(&b"\x01\x02"[..]));
        for (table, key, value) in [
            (
                Records::Approvals,
                "local/shell/run",
                &b"{\"always\":true}"[..],
            ),
            (Records::Pins, "acme/tool", &b"{\"digest\":\"x\"}"[..]),
            (Records::Secrets, "token", &b"sealed"[..]),
            (Records::SecretsMeta, "check", &b"sealed-check"[..]),
        ] {
            let stored = db.record_get(table, key).expect("record");
            assert_eq!(stored.as_deref(), Some(value), "{key}");
        }
        assert!(!earlier.exists(), "the redb file is renamed");
        assert!(
            dir.path().join("chitin.redb.imported").is_file(),
            "and kept"
        );

        // An earlier file that turns up again (a process of the old version still running
        // recreated it) is not imported over newer state.
        db.record_put(Records::Pins, "acme/tool", NEWER)
            .expect("write");
        drop(db);
        earlier_file(&earlier);
        let db = StateDb::importing(&path, &earlier);
        assert_eq!(newer_pin(&db).as_deref(), Some(NEWER));
        assert!(
            earlier.is_file(),
            "the file that turned up again is left alone"
        );
        assert!(
            dir.path().join("chitin.redb.imported").is_file(),
            "the backup stays"
        );

        // Imported, but stopped before the rename: the next opening renames it, and imports
        // nothing again.
        drop(db);
        std::fs::remove_file(dir.path().join("chitin.redb.imported")).expect("rm");
        let db = StateDb::importing(&path, &earlier);
        assert_eq!(newer_pin(&db).as_deref(), Some(NEWER));
        assert!(!earlier.exists(), "renamed now");
        assert!(dir.path().join("chitin.redb.imported").is_file());
    }

    #[test]
    fn a_corrupt_earlier_file_is_named_and_nothing_is_imported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let earlier = dir.path().join("chitin.redb");
        std::fs::write(
            &earlier,
            b"not a redb file at all, and long enough to be read",
        )
        .expect("w");
        let db = StateDb::importing(&dir.path().join("chitin.db"), &earlier);
        let err = db.record_get(Records::Pins, "x").unwrap_err();
        assert!(matches!(err, StateError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("chitin.redb"), "{err}");
        assert!(err.to_string().contains("move it aside"), "{err}");
        assert!(earlier.is_file(), "left where it was");
    }
}
