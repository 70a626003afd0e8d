//! JSON records in a redb table keyed by string: how remembered approvals and pins are stored.

use redb::{ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;

use crate::state_db::{StateDb, StateError};

/// Every record of `table` that parses as `T`, in key order. A missing table reads as empty; a
/// record this version cannot read is skipped, so it is never mistaken for a valid one.
pub fn read_all<T: DeserializeOwned>(
    db: &StateDb,
    table: TableDefinition<&str, &str>,
) -> Result<Vec<T>, StateError> {
    db.read(|txn| {
        let table = match txn.open_table(table) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(db.storage(e)),
        };
        let mut out = Vec::new();
        for entry in table.iter().map_err(|e| db.storage(e))? {
            let (_, value) = entry.map_err(|e| db.storage(e))?;
            if let Ok(record) = serde_json::from_str::<T>(value.value()) {
                out.push(record);
            }
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
