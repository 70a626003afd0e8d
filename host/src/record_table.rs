//! JSON records in a string-keyed table of the state database: how remembered approvals and
//! pins are stored. A record that does not parse is an error naming its key, never skipped: a
//! pin or approval that silently vanished would fail open.

use serde::de::DeserializeOwned;

use crate::state_db::{Records, StateDb, StateError};

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
pub fn read_all<T: DeserializeOwned>(db: &StateDb, table: Records) -> Result<Vec<T>, TableError> {
    db.record_all(table)?
        .iter()
        .map(|(key, value)| parse(key, value))
        .collect()
}

/// The record of `table` under `key`, if any.
pub fn read_one<T: DeserializeOwned>(
    db: &StateDb,
    table: Records,
    key: &str,
) -> Result<Option<T>, TableError> {
    db.record_get(table, key)?
        .map(|value| parse(key, &value))
        .transpose()
}

/// Every key of `table`, in order, whether or not its record parses (so a bad one can be
/// removed).
pub fn keys(db: &StateDb, table: Records) -> Result<Vec<String>, TableError> {
    Ok(db.record_all(table)?.into_iter().map(|(k, _)| k).collect())
}

/// Put `json` at `key` in `table`.
pub fn put(db: &StateDb, table: Records, key: &str, json: &str) -> Result<(), StateError> {
    db.record_put(table, key, json.as_bytes())
}

/// Remove `keys` from `table` in one transaction; how many were there.
pub fn remove<'k>(
    db: &StateDb,
    table: Records,
    keys: impl IntoIterator<Item = &'k str>,
) -> Result<usize, StateError> {
    let keys: Vec<&str> = keys.into_iter().collect();
    db.record_remove(table, &keys)
}

fn parse<T: DeserializeOwned>(key: &str, value: &[u8]) -> Result<T, TableError> {
    serde_json::from_slice(value).map_err(|e| TableError::Corrupt {
        key: key.to_owned(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: Records = Records::Approvals;

    #[test]
    fn a_record_that_does_not_parse_is_an_error_naming_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::new(&dir.path().join("db.sqlite"));
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
