//! JSON records in a redb table keyed by string: how remembered approvals and pins are stored.

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;

/// Every record of `table` that parses as `T`, in key order. A missing table reads as empty; a
/// record this version cannot read is skipped, so it is never mistaken for a valid one.
pub fn read_all<T: DeserializeOwned>(
    db: &Database,
    table: TableDefinition<&str, &str>,
) -> Result<Vec<T>, redb::Error> {
    let txn = db.begin_read()?;
    let table = match txn.open_table(table) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for entry in table.iter()? {
        let (_, value) = entry?;
        if let Ok(record) = serde_json::from_str::<T>(value.value()) {
            out.push(record);
        }
    }
    Ok(out)
}
