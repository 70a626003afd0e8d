//! Where the host keeps signing keys and the trust store, and the local development key that
//! signs first-party components.

use std::path::{Path, PathBuf};

use chitin_registry::keys::{KeyError, KeyStore};
use chitin_registry::trust::{Scope, TrustError, TrustStore, TrustedKey};

use crate::data_dir::DataDir;

/// Environment variable naming the trust store file (default `<data dir>/trusted_keys`).
pub const TRUSTED_KEYS_ENV: &str = "CHITIN_TRUSTED_KEYS";

/// Name of the local development key in the key store.
pub const DEV_KEY: &str = "dev";

/// The first-party namespace the development key signs for.
pub const FIRST_PARTY_NAMESPACE: &str = "chitin";

/// The key store of a data directory: `<data dir>/keys`.
pub fn key_store(data: &DataDir) -> KeyStore {
    KeyStore::new(data.root().join("keys"))
}

/// The trust store file: `explicit` if given, else `<data dir>/trusted_keys`.
pub fn trust_path(data: &DataDir, explicit: Option<&Path>) -> PathBuf {
    explicit
        .map(Path::to_owned)
        .unwrap_or_else(|| data.root().join("trusted_keys"))
}

/// Why the development key could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum DevKeyError {
    /// The key could not be created or read.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The trust store could not be read or written.
    #[error(transparent)]
    Trust(#[from] TrustError),
}

/// Make sure the development key exists (created on first use) and that the trust store at
/// `trust_file` trusts it for the first-party namespace; returns its trust-store entry.
pub fn ensure_dev_key(keys: &KeyStore, trust_file: &Path) -> Result<TrustedKey, DevKeyError> {
    let public = match keys.public(DEV_KEY) {
        Ok(public) => public,
        Err(KeyError::NotFound { .. }) => keys.generate(DEV_KEY)?.public,
        Err(e) => return Err(e.into()),
    };
    let mut store = TrustStore::load(trust_file)?;
    if let Some(existing) = store.get(&public) {
        return Ok(existing.clone());
    }
    let entry = TrustedKey::new(
        public,
        FIRST_PARTY_NAMESPACE,
        vec![Scope::Namespace(FIRST_PARTY_NAMESPACE.to_owned())],
    )?;
    store.add(entry.clone())?;
    store.save(trust_file)?;
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dev_key_is_created_once_and_trusted_for_first_party_components() {
        let dir = tempfile::tempdir().unwrap();
        let keys = KeyStore::new(dir.path().join("keys"));
        let file = dir.path().join("trusted_keys");
        let first = ensure_dev_key(&keys, &file).unwrap();
        let second = ensure_dev_key(&keys, &file).unwrap();
        assert_eq!(first, second);
        let store = TrustStore::load(&file).unwrap();
        assert_eq!(store.keys().len(), 1);
        assert!(store.keys()[0].covers("chitin", "fs"));
        assert!(!store.keys()[0].covers("acme", "fs"));
    }
}
