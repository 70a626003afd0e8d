//! The installed set replicas share (`--state-url`): one lockfile in the state database, with a
//! generation counter that every install, update and removal raises. Each replica keeps a copy
//! in its own installed-components folder and brings it up to the shared lockfile by fetching
//! each pinned component from the registry the lockfile names and verifying it as an install
//! does: the registry's digest, chitin's content hash, the manifest and the signature against
//! this replica's trust store. A copy is replaced whole or not at all, so a component that
//! cannot be fetched or verified leaves the replica on the set it had.

use std::collections::HashMap;
use std::collections::hash_map::Entry as Slot;

use chitin_registry::artifact::{self, ContentHash};
use chitin_registry::lockfile::{Locked, Lockfile};
use chitin_registry::manifest::Manifest;
use chitin_registry::signature;
use chitin_registry::store::{Entry, Registry, StoreError};
use chitin_registry::trust_store::TrustStore;

use super::{Installed, InstalledError};
use crate::state_db::{PgState, StateError};

/// Why the shared installed set cannot be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    /// The database failed.
    #[error(transparent)]
    Database(#[from] StateError),
    /// The lockfile stored in the database does not parse.
    #[error(
        "the installed set in PostgreSQL {target} cannot be read ({reason}); `chitin remove` or \
         `chitin install` with --state-url rewrites it"
    )]
    Corrupt {
        /// The server and database.
        target: String,
        /// What the parser said.
        reason: String,
    },
    /// Another install, update or removal changed the same component meanwhile.
    #[error(
        "{name} was changed in the shared installed set while this command ran (another install, \
         update or removal); nothing was changed: run the command again"
    )]
    Conflict {
        /// The component.
        name: String,
    },
}

/// Why a replica could not bring its copy up to the shared set; it keeps serving the set it had.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The shared set cannot be read.
    #[error(transparent)]
    Shared(#[from] SharedError),
    /// The registry cannot be opened or the download failed.
    #[error("cannot fetch {component} from registry {registry}: {reason}")]
    Fetch {
        /// The component and the version pinned (`namespace/name@version`).
        component: String,
        /// The registry the lockfile names.
        registry: String,
        /// What failed.
        reason: String,
    },
    /// The download is not what the lockfile pinned.
    #[error(
        "{component}: the download's {what} is {found}, not the {pinned} pinned in the shared \
         installed set; refusing it"
    )]
    Pin {
        /// The component and the version pinned (`namespace/name@version`).
        component: String,
        /// Which pin (`sha256 digest`, `content hash`, `manifest hash`, `manifest`, …).
        what: &'static str,
        /// What the lockfile pins.
        pinned: String,
        /// What the download has.
        found: String,
    },
    /// The signature does not verify against this replica's trust store.
    #[error(
        "{component}: {reason} (checked against this replica's own trust store, which must \
         vouch for the publisher's key in the component's namespace)"
    )]
    Signature {
        /// The component and the version pinned (`namespace/name@version`).
        component: String,
        /// What verification said.
        reason: String,
    },
    /// Writing the local copy failed.
    #[error(transparent)]
    Local(#[from] InstalledError),
}

/// The shared installed set in one PostgreSQL database.
pub struct SharedSet<'a> {
    db: &'a PgState,
}

impl<'a> SharedSet<'a> {
    /// The set in `db`.
    pub fn new(db: &'a PgState) -> Self {
        Self { db }
    }

    /// Where it is, for messages.
    pub fn target(&self) -> &str {
        self.db.target()
    }

    /// Its generation (0 before the first install).
    pub fn generation(&self) -> Result<u64, SharedError> {
        Ok(self.db.installed_generation()?)
    }

    /// Its generation and lockfile (empty before the first install).
    pub fn lock(&self) -> Result<(u64, Lockfile), SharedError> {
        match self.db.installed_get()? {
            None => Ok((0, Lockfile::default())),
            Some((generation, text)) => Ok((generation, self.parse(&text)?)),
        }
    }

    fn parse(&self, text: &str) -> Result<Lockfile, SharedError> {
        Lockfile::parse(text).map_err(|reason| SharedError::Corrupt {
            target: self.db.target().to_owned(),
            reason,
        })
    }

    /// Record `locked` in place of `expected` (what the command saw installed when it began):
    /// refused as a [`SharedError::Conflict`] when the entry changed since. The new generation.
    pub fn commit(&self, locked: &Locked, expected: Option<&Locked>) -> Result<u64, SharedError> {
        let (generation, ()) = self.db.installed_update(|old| {
            let mut lock = self.parse_or_empty(old)?;
            if lock.get(&locked.name) != expected {
                return Err(SharedError::Conflict {
                    name: locked.name.clone(),
                });
            }
            lock.upsert(locked.clone());
            Ok((lock.to_toml(), ()))
        })?;
        Ok(generation)
    }

    /// Drop `name` from the set: what it was and the new generation, or `None` when it was not
    /// installed (nothing is written then).
    pub fn remove(&self, name: &str) -> Result<Option<(Locked, u64)>, SharedError> {
        let current = self.lock()?.1;
        let Some(expected) = current.get(name).cloned() else {
            return Ok(None);
        };
        let (generation, ()) = self.db.installed_update(|old| {
            let mut lock = self.parse_or_empty(old)?;
            if lock.get(name) != Some(&expected) {
                return Err(SharedError::Conflict {
                    name: name.to_owned(),
                });
            }
            lock.remove(name);
            Ok((lock.to_toml(), ()))
        })?;
        Ok(Some((expected, generation)))
    }

    fn parse_or_empty(&self, text: Option<&str>) -> Result<Lockfile, SharedError> {
        text.map_or_else(|| Ok(Lockfile::default()), |t| self.parse(t))
    }
}

/// Download `locked` from `registry` and check it against every pin the lockfile holds: the
/// registry's digest, the content hash, the manifest's identity and hash, and a signature this
/// trust store accepts for the component's namespace.
pub async fn fetch_pinned(
    locked: &Locked,
    registry: &Registry,
    trust: &TrustStore,
) -> Result<Vec<u8>, SyncError> {
    // The entry is made from the pins, not read from the registry's index: the client then
    // refuses any content whose digest is not the pinned one, wherever the tag points now.
    let entry = Entry {
        name: locked.name.clone(),
        version: locked.version.clone(),
        description: String::new(),
        publisher: String::new(),
        tools: Vec::new(),
        digest: locked.digest.clone(),
        hash: locked.hash.clone(),
        size: 0,
        signers: locked.signers.clone(),
        manifest_hash: locked.manifest_hash.clone(),
    };
    let bytes = registry.fetch(&entry).await.map_err(|e| match e {
        StoreError::DigestMismatch { found, .. } => SyncError::Pin {
            component: label(locked),
            what: "sha256 digest",
            pinned: locked.digest.clone(),
            found,
        },
        other => SyncError::Fetch {
            component: label(locked),
            registry: locked.registry.clone(),
            reason: other.to_string(),
        },
    })?;
    check_pinned(locked, &bytes, trust)?;
    Ok(bytes)
}

/// `namespace/name@version`, as messages name a component.
fn label(locked: &Locked) -> String {
    format!("{}@{}", locked.name, locked.version)
}

/// Check downloaded `bytes` against the pins of `locked`.
fn check_pinned(locked: &Locked, bytes: &[u8], trust: &TrustStore) -> Result<(), SyncError> {
    let pin = |what: &'static str, pinned: &str, found: String| SyncError::Pin {
        component: label(locked),
        what,
        pinned: pinned.to_owned(),
        found,
    };
    let hash = ContentHash::of(bytes).to_string();
    if hash != locked.hash {
        return Err(pin("content hash", &locked.hash, hash));
    }
    let text = artifact::manifest_text(bytes)
        .ok()
        .flatten()
        .ok_or_else(|| pin("manifest", "an embedded manifest", "none".into()))?;
    let manifest_hash = ContentHash::of(text.as_bytes()).to_string();
    if manifest_hash != locked.manifest_hash {
        return Err(pin("manifest hash", &locked.manifest_hash, manifest_hash));
    }
    let manifest =
        Manifest::parse(text).map_err(|e| pin("manifest", "one that parses", e.to_string()))?;
    let identity = format!("{}@{}", manifest.id(), manifest.component.version);
    if manifest.id() != locked.name || manifest.component.version != locked.version {
        let pinned = format!("{}@{}", locked.name, locked.version);
        return Err(pin("manifest identity", &pinned, identity));
    }
    signature::verify(bytes, trust)
        .and_then(|report| {
            report
                .authorize(&manifest.component.namespace, &manifest.component.name)
                .map(drop)
        })
        .map_err(|e| SyncError::Signature {
            component: label(locked),
            reason: e.to_string(),
        })
}

/// Bring the copy in `installed` up to `shared`: components it already holds at the pinned
/// hash are kept, the others fetched through `open` (a registry by the name the lockfile
/// gives) and verified. Nothing is written unless every component verified. Whether the copy
/// changed (and so the served tools need reloading).
pub async fn sync(
    shared: &Lockfile,
    installed: &Installed,
    open: impl Fn(&str) -> Result<Registry, String>,
    trust: &TrustStore,
) -> Result<bool, SyncError> {
    let local = installed.lock()?;
    let mut wanted = Lockfile::default();
    let mut fresh: Vec<(String, Vec<u8>)> = Vec::new();
    let mut registries: HashMap<String, Registry> = HashMap::new();
    for pinned in &shared.components {
        let kept = local
            .get(&pinned.name)
            .filter(|l| l.hash == pinned.hash && installed.read(l).is_ok());
        let mut locked = pinned.clone();
        // A file name is this replica's own: one read from the database never becomes a path.
        if let Some(kept) = kept {
            locked.file = kept.file.clone();
        } else {
            let registry = match registries.entry(pinned.registry.clone()) {
                Slot::Occupied(slot) => slot.into_mut(),
                Slot::Vacant(slot) => {
                    slot.insert(open(&pinned.registry).map_err(|reason| SyncError::Fetch {
                        component: label(pinned),
                        registry: pinned.registry.clone(),
                        reason,
                    })?)
                }
            };
            let bytes = fetch_pinned(pinned, registry, trust).await?;
            locked.file = Installed::file_name(&locked.name, &ContentHash::of(&bytes));
            fresh.push((locked.file.clone(), bytes));
        }
        wanted.upsert(locked);
    }
    if wanted == local {
        return Ok(false);
    }
    installed.replace(&wanted, &fresh)?;
    Ok(true)
}
