//! Pins of served components: the version, content hash, signer and manifest last accepted for
//! each `namespace/name`, whatever folder it came from, kept in the shared database. A replayed older version is refused,
//! and so is an upgrade whose manifest widens any capability or limit, until a person forgets
//! the pin (`chitin approvals revoke NAME`) and so accepts the new grant.

use std::sync::Arc;

use chitin_registry::manifest::Manifest;
use chitin_registry::widening::widenings;
use serde::{Deserialize, Serialize};

use crate::record_table::{self, TableError};
use crate::state_db::{Records, StateDb, StateError};

/// `namespace/name` → JSON [`Pin`].
const TABLE: Records = Records::Pins;

/// The pin of one installed component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// `namespace/name`.
    pub component: String,
    /// The version accepted.
    pub version: String,
    /// Its content hash.
    pub hash: String,
    /// Fingerprint of the key that vouched for it.
    pub signer: String,
    /// Its manifest, as TOML.
    pub manifest: String,
}

/// Why an installed component does not match its pin.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// An older version than the one pinned: a replay.
    #[error(
        "{component} {found} is older than the pinned {pinned}: refusing a downgrade (a replayed \
         older version); `chitin approvals revoke {component}` forgets the pin"
    )]
    Downgrade {
        /// The component.
        component: String,
        /// The version pinned.
        pinned: String,
        /// The version found.
        found: String,
    },
    /// The new version asks for more than the pinned one.
    #[error(
        "{component} {found} widens the grant of the pinned {pinned}: {}; review it with \
         `chitin audit`, then `chitin approvals revoke {component}` to accept it",
        widenings.join("; ")
    )]
    Widened {
        /// The component.
        component: String,
        /// The version pinned.
        pinned: String,
        /// The version found.
        found: String,
        /// Each widening.
        widenings: Vec<String>,
    },
    /// A pin record cannot be read: the component is not loaded unchecked.
    #[error(
        "the pin of {component} cannot be read ({reason}), so the component cannot be checked \
         against it; `chitin approvals revoke {component}` forgets the pin (the next load pins \
         what it finds)"
    )]
    Corrupt {
        /// The component whose pin it is.
        component: String,
        /// What is wrong with the record.
        reason: String,
    },
    /// The database could not be used.
    #[error("pins database: {0}")]
    Database(Box<StateError>),
    /// A pin could not be stored.
    #[error("pins database: {0}")]
    Store(String),
}

impl From<StateError> for PinError {
    fn from(e: StateError) -> Self {
        Self::Database(Box::new(e))
    }
}

impl From<TableError> for PinError {
    fn from(e: TableError) -> Self {
        match e {
            TableError::Db(e) => e.into(),
            TableError::Corrupt { key, reason } => Self::Corrupt {
                component: key,
                reason,
            },
        }
    }
}

/// The pins kept in the database.
#[derive(Clone)]
pub struct PinStore {
    db: Arc<StateDb>,
}

impl PinStore {
    /// The store in `db`.
    pub fn new(db: Arc<StateDb>) -> Self {
        Self { db }
    }

    /// Check `manifest` (content `hash`, vouched for by `signer`) against its pin and, when it
    /// is acceptable, pin it.
    pub fn check_and_pin(
        &self,
        manifest: &Manifest,
        hash: &str,
        signer: &str,
    ) -> Result<(), PinError> {
        let component = manifest.id();
        if let Some(pin) = self.get(&component)? {
            if pin.hash == hash && pin.signer == signer {
                // The pinned artifact itself: nothing to check or write.
                return Ok(());
            }
            let pinned = Manifest::parse(&pin.manifest).map_err(|e| PinError::Corrupt {
                component: component.clone(),
                reason: format!("its manifest: {e}"),
            })?;
            let found = &manifest.component.version;
            if found < &pinned.component.version {
                return Err(PinError::Downgrade {
                    component,
                    pinned: pinned.component.version.to_string(),
                    found: found.to_string(),
                });
            }
            let wider = widenings(&pinned, manifest);
            if !wider.is_empty() {
                return Err(PinError::Widened {
                    component,
                    pinned: pinned.component.version.to_string(),
                    found: found.to_string(),
                    widenings: wider,
                });
            }
        }
        self.put(&Pin {
            component,
            version: manifest.component.version.to_string(),
            hash: hash.to_owned(),
            signer: signer.to_owned(),
            manifest: manifest.to_toml(),
        })
    }

    /// The pin of `component`, if any.
    pub fn get(&self, component: &str) -> Result<Option<Pin>, PinError> {
        Ok(record_table::read_one(&self.db, TABLE, component)?)
    }

    /// Every pin, sorted by component.
    pub fn list(&self) -> Result<Vec<Pin>, PinError> {
        Ok(record_table::read_all(&self.db, TABLE)?)
    }

    fn put(&self, pin: &Pin) -> Result<(), PinError> {
        let json = serde_json::to_string(pin).map_err(|e| PinError::Store(e.to_string()))?;
        Ok(record_table::put(&self.db, TABLE, &pin.component, &json)?)
    }

    /// Forget the pin of `component`; whether there was one.
    pub fn forget(&self, component: &str) -> Result<bool, PinError> {
        Ok(record_table::remove(&self.db, TABLE, [component])? > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(version: &str, extra: &str) -> Manifest {
        Manifest::parse(&format!(
            "schema = 1\n[component]\nname = \"w\"\nnamespace = \"acme\"\nversion = \"{version}\"\n\
             publisher = \"acme\"\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn replays_and_widenings_are_refused_until_the_pin_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(StateDb::new(&dir.path().join("db.sqlite")));
        let pins = PinStore::new(db);
        pins.check_and_pin(&manifest("1.0.0", ""), "h1", "k")
            .unwrap();
        let err = pins
            .check_and_pin(&manifest("0.9.0", ""), "h0", "k")
            .unwrap_err();
        assert!(matches!(err, PinError::Downgrade { .. }), "{err}");
        let wider = manifest("1.1.0", "[capabilities.env]\nkeys = [\"HOME\"]\n");
        let err = pins.check_and_pin(&wider, "h2", "k").unwrap_err();
        assert!(matches!(err, PinError::Widened { .. }), "{err}");
        assert!(err.to_string().contains("capabilities.env"), "{err}");
        pins.check_and_pin(&manifest("1.2.0", ""), "h3", "k")
            .unwrap();
        assert_eq!(pins.get("acme/w").unwrap().unwrap().version, "1.2.0");
        assert!(pins.forget("acme/w").unwrap());
        pins.check_and_pin(&wider, "h2", "k").unwrap();
    }

    #[test]
    fn a_pin_that_does_not_parse_refuses_the_load_naming_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(StateDb::new(&dir.path().join("db.sqlite")));
        record_table::put(&db, TABLE, "acme/w", "{\"component\": \"acme/w\"").unwrap();
        let pins = PinStore::new(db);
        let err = pins
            .check_and_pin(&manifest("1.0.0", ""), "h1", "k")
            .unwrap_err();
        assert!(matches!(err, PinError::Corrupt { .. }), "{err}");
        assert!(
            err.to_string().contains("`chitin approvals revoke acme/w`"),
            "{err}"
        );
        assert!(pins.forget("acme/w").unwrap());
        pins.check_and_pin(&manifest("1.0.0", ""), "h1", "k")
            .unwrap();
    }

    #[test]
    fn pins_use_the_typed_comparison_of_widening() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(StateDb::new(&dir.path().join("db.sqlite")));
        let pins = PinStore::new(db);
        let process = |extra: &str| {
            format!("[capabilities.process]\nprograms = [\"git\"]\n{extra}[limits]\nfuel = 10\n")
        };
        pins.check_and_pin(
            &manifest("1.0.0", &process("read_only = true\n")),
            "h1",
            "k",
        )
        .unwrap();
        // read_only turned off, and a limit removed: each a widening the TOML diff missed.
        let err = pins
            .check_and_pin(&manifest("1.1.0", &process("")), "h2", "k")
            .unwrap_err();
        assert!(err.to_string().contains("read_only: turned off"), "{err}");
        let no_limit = "[capabilities.process]\nprograms = [\"git\"]\nread_only = true\n";
        let err = pins
            .check_and_pin(&manifest("1.1.0", no_limit), "h2", "k")
            .unwrap_err();
        assert!(err.to_string().contains("limits.fuel: removed"), "{err}");
        // A narrowing (a lower limit) is pinned without asking.
        let lower =
            "[capabilities.process]\nprograms = [\"git\"]\nread_only = true\n[limits]\nfuel = 5\n";
        pins.check_and_pin(&manifest("1.2.0", lower), "h3", "k")
            .unwrap();
    }
}
