//! JSON records in a redb table keyed by string: how remembered approvals and pins are stored.
//! A record that does not parse is an error naming its key, never skipped: a pin or approval
//! that silently vanished would fail open.

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;

/// A table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] redb::Error),
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
    db: &Database,
    table: TableDefinition<&str, &str>,
) -> Result<Vec<T>, TableError> {
    let txn = db.begin_read().map_err(redb::Error::from)?;
    let table = match txn.open_table(table) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(redb::Error::from(e).into()),
    };
    let mut out = Vec::new();
    for entry in table.iter().map_err(redb::Error::from)? {
        let (key, value) = entry.map_err(redb::Error::from)?;
        out.push(parse(key.value(), value.value())?);
    }
    Ok(out)
}

/// The record of `table` under `key`, if any.
pub fn read_one<T: DeserializeOwned>(
    db: &Database,
    table: TableDefinition<&str, &str>,
    key: &str,
) -> Result<Option<T>, TableError> {
    let txn = db.begin_read().map_err(redb::Error::from)?;
    let table = match txn.open_table(table) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(redb::Error::from(e).into()),
    };
    match table.get(key).map_err(redb::Error::from)? {
        Some(value) => Ok(Some(parse(key, value.value())?)),
        None => Ok(None),
    }
}

/// Every key of `table`, in order, whether or not its record parses (so a bad one can be
/// removed).
pub fn keys(db: &Database, table: TableDefinition<&str, &str>) -> Result<Vec<String>, TableError> {
    let txn = db.begin_read().map_err(redb::Error::from)?;
    let table = match txn.open_table(table) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(redb::Error::from(e).into()),
    };
    let mut out = Vec::new();
    for entry in table.iter().map_err(redb::Error::from)? {
        out.push(entry.map_err(redb::Error::from)?.0.value().to_owned());
    }
    Ok(out)
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
        let db = Database::create(dir.path().join("db.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(TABLE).unwrap();
            table.insert("good", "1").unwrap();
            table.insert("bad", "{not json").unwrap();
        }
        txn.commit().unwrap();
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
