//! JSON records in a redb table keyed by string: how remembered approvals and pins are stored.
//! A record that does not parse is an error naming its key, never skipped: a pin or approval
//! that silently vanished would fail open.

use redb::{ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;

use crate::state_db::{StateDb, StateError};

/// A table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] StateError),
    /// A record is not one this version can read (corrupted, or written by another version).
    #[error("record `{key}` cannot be read: {reason}")]
    Corrupt {
        /// The record's key.
        key: String,
        /// The parser's message.
        reason: String,
    },
}

/// Every record of `table`, in key order. A missing table reads as empty.
pub fn read_all<T: DeserializeOwned>(
    db: &StateDb,
    table: TableDefinition<&str, &str>,
) -> Result<Vec<T>, TableError> {
    db.read(|txn| {
        let table = match txn.open_table(table) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(db.storage(e).into()),
        };
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| db.storage(e))? {
            let (key, value) = entry.map_err(|e| db.storage(e))?;
            out.push(parse(key.value(), value.value())?);
        }
        Ok(out)
    })
}

/// The record of `table` under `key`, if any.
pub fn read_one<T: DeserializeOwned>(
    db: &StateDb,
    table: TableDefinition<&str, &str>,
    key: &str,
) -> Result<Option<T>, TableError> {
    db.read(|txn| {
        let table = match txn.open_table(table) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(db.storage(e).into()),
        };
        match table.get(key).map_err(|e| db.storage(e))? {
            Some(value) => Ok(Some(parse(key, value.value())?)),
            None => Ok(None),
        }
    })
}

/// Every key of `table`, in order, whether or not its record parses (so a bad one can be
/// removed).
pub fn keys(db: &StateDb, table: TableDefinition<&str, &str>) -> Result<Vec<String>, TableError> {
    db.read(|txn| {
        let table = match txn.open_table(table) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(db.storage(e).into()),
        };
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| db.storage(e))? {
            out.push(entry.map_err(|e| db.storage(e))?.0.value().to_owned());
        }
        Ok(out)
    })
}

/// Put `json` at `key` in `table`.
pub fn put(
    db: &StateDb,
    table: TableDefinition<&str, &str>,
    key: &str,
    json: &str,
) -> Result<(), StateError> {
    db.write(|txn| {
        txn.open_table(table)
            .map_err(|e| db.storage(e))?
            .insert(key, json)
            .map_err(|e| db.storage(e))?;
        Ok(())
    })
}

/// Remove `keys` from `table` in one transaction; how many were there.
pub fn remove<'k>(
    db: &StateDb,
    table: TableDefinition<&str, &str>,
    keys: impl IntoIterator<Item = &'k str>,
) -> Result<usize, StateError> {
    db.write(|txn| {
        let mut table = txn.open_table(table).map_err(|e| db.storage(e))?;
        let mut removed = 0;
        for key in keys {
            removed += usize::from(table.remove(key).map_err(|e| db.storage(e))?.is_some());
        }
        Ok(removed)
    })
}

fn parse<T: DeserializeOwned>(key: &str, value: &str) -> Result<T, TableError> {
    serde_json::from_str(value).map_err(|e| TableError::Corrupt {
        key: key.to_owned(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: TableDefinition<&str, &str> = TableDefinition::new("t");

    #[test]
    fn a_record_that_does_not_parse_is_an_error_naming_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::new(&dir.path().join("db.redb"));
        put(&db, TABLE, "good", "1").unwrap();
        put(&db, TABLE, "bad", "{not json").unwrap();
        let err = read_all::<u32>(&db, TABLE).unwrap_err();
        assert!(
            matches!(&err, TableError::Corrupt { key, .. } if key == "bad"),
            "{err}"
        );
        assert_eq!(read_one::<u32>(&db, TABLE, "good").unwrap(), Some(1));
        assert!(read_one::<u32>(&db, TABLE, "bad").is_err());
        assert_eq!(keys(&db, TABLE).unwrap(), ["bad", "good"]);
    }
}
