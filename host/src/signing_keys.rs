//! Where the host keeps signing keys and the trust store, and the local development key that
//! signs first-party components.

use std::path::{Path, PathBuf};

use chitin_registry::artifact::ContentHash;
use chitin_registry::keys::{KeyError, KeyStore};
use chitin_registry::trust_store::{Scope, TrustError, TrustStore, TrustedKey};

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

/// Verification results remembered beside the compile cache: one marker file per (content
/// hash, trust store) that a component passed verification and scope check under, holding the
/// fingerprint of the key that vouched for it. Re-verifying a 1 MB component costs tens of
/// milliseconds; a marker costs one small read. Editing the trust store changes its digest, so
/// every component is verified afresh.
#[derive(Debug, Clone)]
pub struct VerifiedCache {
    dir: PathBuf,
}

impl VerifiedCache {
    /// Markers under `dir` (created on first write).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn marker(&self, hash: &ContentHash, trust: &TrustStore) -> PathBuf {
        let mut digest = blake3::Hasher::new();
        for key in trust.keys() {
            digest.update(key.to_line().as_bytes());
            digest.update(b"\n");
        }
        self.dir.join(format!(
            "{}-{}",
            hash.to_hex(),
            &digest.finalize().to_hex()[..32]
        ))
    }

    /// The signer fingerprint remembered for `hash` under `trust`, if it was verified before.
    pub fn get(&self, hash: &ContentHash, trust: &TrustStore) -> Option<String> {
        let text = std::fs::read_to_string(self.marker(hash, trust)).ok()?;
        let fingerprint = text.trim();
        trust
            .keys()
            .iter()
            .any(|k| k.key.fingerprint() == fingerprint)
            .then(|| fingerprint.to_owned())
    }

    /// Remember that `hash` verified under `trust`, vouched for by `fingerprint`. Best effort:
    /// a marker that cannot be written only means verifying again next time. Written whole, so
    /// that a process starting meanwhile reads the fingerprint or no marker, never part of it.
    pub fn put(&self, hash: &ContentHash, trust: &TrustStore, fingerprint: &str) {
        if crate::cache::create_private_dir(&self.dir).is_ok() {
            let _ = crate::cache::write_atomic(&self.marker(hash, trust), fingerprint.as_bytes());
        }
    }
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

    #[test]
    fn a_verification_is_remembered_whole_under_its_trust_store_only() {
        let dir = tempfile::tempdir().unwrap();
        let keys = KeyStore::new(dir.path().join("keys"));
        let file = dir.path().join("trusted_keys");
        let entry = ensure_dev_key(&keys, &file).unwrap();
        let trust = TrustStore::load(&file).unwrap();
        let markers = dir.path().join("verified");
        let cache = VerifiedCache::new(markers.clone());
        let hash = ContentHash::of(b"component");
        assert_eq!(cache.get(&hash, &trust), None);
        let fingerprint = entry.key.fingerprint();
        cache.put(&hash, &trust, &fingerprint);
        assert_eq!(cache.get(&hash, &trust), Some(fingerprint));
        // One marker, and nothing half-written beside it.
        assert_eq!(std::fs::read_dir(&markers).unwrap().count(), 1);
        // Another trust store remembers nothing, nor does another component.
        assert_eq!(cache.get(&hash, &TrustStore::default()), None);
        assert_eq!(cache.get(&ContentHash::of(b"other"), &trust), None);
    }
}
