//! The installed components: files in the data directory's `components` folder, and the
//! lockfile there that says which of them are installed, at what hash, approved for what.
//!
//! An install writes the new file under a name of its own (`<namespace>__<name>-<hash>.wasm`),
//! then commits by renaming the new lockfile into place; only then is the old file removed. A
//! crash at any point leaves the lockfile naming complete files: before the commit the old
//! state, after it the new. Files no lockfile names are never loaded and are swept away by the
//! next install or removal.
//!
//! With `--state-url` the lockfile that counts is the one in the state database, shared by
//! every replica ([`shared`]); this folder then holds the replica's verified copy of it.

pub mod shared;

use std::path::{Path, PathBuf};

use chitin_registry::artifact::ContentHash;
use chitin_registry::lockfile::{LOCK_FILE, Locked, Lockfile};
use chitin_registry::store::StoreError;
use chitin_registry::store::local::write_atomic;

use crate::file_lock::{FileLock, LockError};

/// How long an install, update or remove waits for another one on the same data directory.
const COMMIT_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Why an installed component cannot be used or changed.
#[derive(Debug, thiserror::Error)]
pub enum InstalledError {
    /// Reading or writing the directory or lockfile failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another process's install, update or remove did not finish in time.
    #[error(transparent)]
    Busy(#[from] LockError),
    /// A file does not hash to what the lockfile pinned.
    #[error(
        "{file}: its hash {found} is not the {pinned} pinned for {name} in the lockfile; it was \
         changed after install (reinstall it with `chitin install {name}`)"
    )]
    Tampered {
        /// The component.
        name: String,
        /// The file.
        file: PathBuf,
        /// The hash pinned.
        pinned: String,
        /// The hash found.
        found: String,
    },
    /// The lockfile names a file that is not there.
    #[error("{file}: missing, though the lockfile lists {name} (reinstall it)")]
    Missing {
        /// The component.
        name: String,
        /// The file.
        file: PathBuf,
    },
}

/// The installed-components directory.
pub struct Installed {
    dir: PathBuf,
}

impl Installed {
    /// The directory `dir` (usually `DataDir::components()`).
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
        }
    }

    /// Whether `dir` is managed by a lockfile.
    pub fn is_managed(dir: &Path) -> bool {
        dir.join(LOCK_FILE).is_file()
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The lockfile's path.
    pub fn lock_path(&self) -> PathBuf {
        self.dir.join(LOCK_FILE)
    }

    /// The lockfile (empty when nothing was installed).
    pub fn lock(&self) -> Result<Lockfile, InstalledError> {
        Ok(Lockfile::load(&self.lock_path())?)
    }

    /// The file of an installed component.
    pub fn file(&self, locked: &Locked) -> PathBuf {
        self.dir.join(&locked.file)
    }

    /// The bytes of `locked`, checked against its pinned hash.
    pub fn read(&self, locked: &Locked) -> Result<Vec<u8>, InstalledError> {
        let file = self.file(locked);
        let bytes = std::fs::read(&file).map_err(|_| InstalledError::Missing {
            name: locked.name.clone(),
            file: file.clone(),
        })?;
        let found = ContentHash::of(&bytes).to_string();
        if found != locked.hash {
            return Err(InstalledError::Tampered {
                name: locked.name.clone(),
                file,
                pinned: locked.hash.clone(),
                found,
            });
        }
        Ok(bytes)
    }

    /// The file name an install of `name` with content `hash` uses.
    pub fn file_name(name: &str, hash: &ContentHash) -> String {
        format!("{}-{}.wasm", name.replace('/', "__"), &hash.to_hex()[..16])
    }

    /// Install `bytes` as `locked` (whose `file` is set here): write the file, commit the
    /// lockfile, then sweep the files no longer named.
    pub fn commit(&self, bytes: &[u8], mut locked: Locked) -> Result<Locked, InstalledError> {
        let _guard = self.exclusive()?;
        locked.file = Self::file_name(&locked.name, &ContentHash::of(bytes));
        write_atomic(&self.dir.join(&locked.file), bytes)?;
        let mut lock = self.lock()?;
        lock.upsert(locked.clone());
        lock.save(&self.lock_path())?;
        self.sweep(&lock);
        Ok(locked)
    }

    /// Make `lock` the installed set: write `files` (name and bytes, each named as
    /// [`Installed::file_name`] names it), commit the lockfile, then sweep the files no longer
    /// named. The caller checked the files against `lock`'s pins.
    pub fn replace(
        &self,
        lock: &Lockfile,
        files: &[(String, Vec<u8>)],
    ) -> Result<(), InstalledError> {
        let _guard = self.exclusive()?;
        for (name, bytes) in files {
            write_atomic(&self.dir.join(name), bytes)?;
        }
        lock.save(&self.lock_path())?;
        self.sweep(lock);
        Ok(())
    }

    /// Uninstall `name`: commit the lockfile without it, then remove its file.
    pub fn remove(&self, name: &str) -> Result<Option<Locked>, InstalledError> {
        let _guard = self.exclusive()?;
        let mut lock = self.lock()?;
        let Some(removed) = lock.remove(name) else {
            return Ok(None);
        };
        lock.save(&self.lock_path())?;
        self.sweep(&lock);
        Ok(Some(removed))
    }

    /// Serialise changes across processes: each reads the lockfile, changes it and sweeps, so
    /// two at once would lose one's entry or sweep the other's half-written file.
    fn exclusive(&self) -> Result<FileLock, InstalledError> {
        let lock_path = self.dir.with_extension("lock");
        Ok(FileLock::acquire(&lock_path, COMMIT_LOCK_WAIT)?.0)
    }

    /// Remove component files and leftovers of interrupted writes that `lock` does not name.
    fn sweep(&self, lock: &Lockfile) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let stale_wasm =
                is_install_file(&name) && !lock.components.iter().any(|c| c.file == name);
            let leftover = name.starts_with(".tmp-") && name.ends_with(".part");
            if stale_wasm || leftover {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// Whether `name` is spelled as [`Installed::file_name`] spells install files (other files an
/// operator put in the directory are left alone).
fn is_install_file(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".wasm") else {
        return false;
    };
    let Some((id, hash)) = stem.rsplit_once('-') else {
        return false;
    };
    id.contains("__") && hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit())
}
