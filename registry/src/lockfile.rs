//! The lockfile of installed components (`chitin.lock` in the installed-components directory):
//! for each component, the version, file, hashes, signers and grants a person approved. It is
//! the commit point of an install: written whole to a temporary file and renamed over the old
//! one, so a reader sees the state before or after an install, never between.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::store::local::write_atomic;
use crate::store::{StoreError, read_optional};

/// The lockfile's name in the installed-components directory.
pub const LOCK_FILE: &str = "chitin.lock";
/// The format this build reads and writes.
pub const LOCK_SCHEMA: u32 = 1;

/// The lockfile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lockfile {
    /// [`LOCK_SCHEMA`].
    pub schema: u32,
    /// The installed components, sorted by name.
    #[serde(default, rename = "component")]
    pub components: Vec<Locked>,
}

/// One installed component, as approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Locked {
    /// `namespace/name`.
    pub name: String,
    /// The version installed.
    pub version: semver::Version,
    /// The registry it came from (its configured name, or its location).
    pub registry: String,
    /// Its file in the installed-components directory.
    pub file: String,
    /// `blake3:<hex>` of the file.
    pub hash: String,
    /// `sha256:<hex>` of the file (the registry's digest).
    pub digest: String,
    /// Fingerprints of the trusted keys that signed it.
    pub signers: Vec<String>,
    /// `blake3:<hex>` of its manifest.
    pub manifest_hash: String,
    /// The capabilities approved, in plain words: the grant lines of the audit the person
    /// approved ([`crate::audit::AuditReport::approved_grants`]).
    #[serde(default)]
    pub grants: Vec<String>,
    /// When it was approved (RFC 3339).
    pub approved_at: String,
}

impl Default for Lockfile {
    fn default() -> Self {
        Self {
            schema: LOCK_SCHEMA,
            components: Vec::new(),
        }
    }
}

impl Lockfile {
    /// Read `path`; a missing file is an empty lockfile.
    pub fn load(path: &Path) -> Result<Self, StoreError> {
        let Some(text) = read_optional(path)? else {
            return Ok(Self::default());
        };
        Self::parse(&text).map_err(|reason| StoreError::Io {
            path: path.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason),
        })
    }

    /// The lockfile in `text` (as [`Lockfile::to_toml`] writes it), refused when its schema is
    /// not [`LOCK_SCHEMA`].
    pub fn parse(text: &str) -> Result<Self, String> {
        let lock: Self = toml::from_str(text).map_err(|e| e.to_string())?;
        if lock.schema != LOCK_SCHEMA {
            return Err(format!(
                "lockfile schema {} is not {LOCK_SCHEMA}",
                lock.schema
            ));
        }
        Ok(lock)
    }

    /// The lockfile as TOML text, with a comment saying what wrote it.
    pub fn to_toml(&self) -> String {
        let mut text = String::from(
            "# Installed components, as approved; written by `chitin install`, `update` and \
             `remove`.\n",
        );
        text.push_str(&toml::to_string_pretty(self).unwrap_or_default());
        text
    }

    /// Write it to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<(), StoreError> {
        write_atomic(path, self.to_toml().as_bytes())
    }

    /// The entry for `name`.
    pub fn get(&self, name: &str) -> Option<&Locked> {
        self.components.iter().find(|c| c.name == name)
    }

    /// Add or replace the entry for `locked.name`.
    pub fn upsert(&mut self, locked: Locked) {
        self.components.retain(|c| c.name != locked.name);
        self.components.push(locked);
        self.components.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Drop the entry for `name`; whether there was one.
    pub fn remove(&mut self, name: &str) -> Option<Locked> {
        let i = self.components.iter().position(|c| c.name == name)?;
        Some(self.components.remove(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockfile_round_trips_and_replaces_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let mut lock = Lockfile::load(&path).unwrap();
        assert!(lock.components.is_empty());
        let entry = |v: &str| Locked {
            name: "acme/words".into(),
            version: v.parse().unwrap(),
            registry: "local".into(),
            file: format!("acme__words-{v}.wasm"),
            hash: "blake3:aa".into(),
            digest: "sha256:bb".into(),
            signers: vec!["SHA256:k".into()],
            manifest_hash: "blake3:cc".into(),
            grants: vec!["files: read /workspace".into()],
            approved_at: "2026-11-23T00:00:00Z".into(),
        };
        lock.upsert(entry("1.0.0"));
        lock.upsert(entry("1.1.0"));
        lock.save(&path).unwrap();
        let back = Lockfile::load(&path).unwrap();
        assert_eq!(back.components.len(), 1);
        assert_eq!(back.get("acme/words").unwrap().version.to_string(), "1.1.0");
        assert_eq!(back, lock);
        let mut back = back;
        assert!(back.remove("acme/words").is_some());
        assert!(back.remove("acme/words").is_none());
    }
}
