//! The local directory registry, laid out as wasm-pkg-tools' local backend does:
//! `<root>/<namespace>/<name>/<version>.wasm`, with `<root>/index.json` listing every version.
//! Every write goes to a temporary file first and is renamed into place.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Entry, Index, StoreError, check_overwrite};

/// The name of the index document at the root.
pub const INDEX_FILE: &str = "index.json";

/// A registry in a local directory.
pub struct LocalRegistry {
    name: String,
    root: PathBuf,
}

impl LocalRegistry {
    /// The registry rooted at `root` (created on first publish), shown as `name`.
    pub fn new(name: &str, root: &Path) -> Self {
        Self {
            name: name.to_owned(),
            root: root.to_owned(),
        }
    }

    /// How it is shown.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the artifact of `entry` lives.
    pub fn artifact_path(&self, name: &str, version: &semver::Version) -> PathBuf {
        self.root.join(name).join(format!("{version}.wasm"))
    }

    /// The index; empty when the directory has none yet.
    pub fn index(&self) -> Result<Index, StoreError> {
        let path = self.root.join(INDEX_FILE);
        match std::fs::read(&path) {
            Ok(text) => Index::parse(&text).map_err(|reason| StoreError::Malformed {
                registry: self.name.clone(),
                reason: format!("{}: {reason}", path.display()),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Index::new()),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }

    /// Write the artifact, then the index that names it.
    pub fn publish(&self, bytes: &[u8], entry: Entry, replace: bool) -> Result<(), StoreError> {
        let mut index = self.index()?;
        check_overwrite(&self.name, &index, &entry, replace)?;
        write_atomic(&self.artifact_path(&entry.name, &entry.version), bytes)?;
        index.upsert(entry);
        write_atomic(&self.root.join(INDEX_FILE), &index.to_json())
    }

    /// The artifact's bytes (the caller checks the digest).
    pub fn fetch(&self, entry: &Entry) -> Result<Vec<u8>, StoreError> {
        let path = self.artifact_path(&entry.name, &entry.version);
        std::fs::read(&path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                StoreError::NotFound {
                    registry: self.name.clone(),
                    what: format!(
                        "{} (its index lists it, but {} is missing)",
                        entry.label(),
                        path.display()
                    ),
                }
            } else {
                StoreError::Io { path, source }
            }
        })
    }
}

/// Write `bytes` to `path` through a synced temporary file in the same directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .suffix(".part")
        .tempfile_in(dir)
        .map_err(io)?;
    tmp.write_all(bytes).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    // The rename is durable once the directory is synced.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
