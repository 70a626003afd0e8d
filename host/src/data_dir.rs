//! The data directory: one place for the compile cache and, later, the database, keys, trust
//! store and installed components.

use std::path::{Path, PathBuf};

/// Why the data directory cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("data directory {path}: {cause}")]
pub struct DataDirError {
    /// The directory.
    pub path: PathBuf,
    /// What failed.
    pub cause: std::io::Error,
}

/// Environment variable that overrides the data directory.
pub const DATA_DIR_ENV: &str = "CHITIN_DATA_DIR";

/// The data directory and the paths inside it.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
}

impl DataDir {
    /// Resolve the data directory: `explicit` (the `--data-dir` flag or `CHITIN_DATA_DIR`), else
    /// `$XDG_DATA_HOME/chitin` (`~/.local/share/chitin`). Created with mode 0700.
    pub fn resolve(explicit: Option<&Path>) -> Result<Self, DataDirError> {
        let root = match explicit {
            Some(p) => p.to_owned(),
            None => dirs::data_dir()
                .map(|d| d.join("chitin"))
                .ok_or_else(|| DataDirError {
                    path: PathBuf::from("$XDG_DATA_HOME"),
                    cause: std::io::Error::other(
                        "cannot find a home directory; set CHITIN_DATA_DIR or pass --data-dir",
                    ),
                })?,
        };
        crate::private_dir::create(&root).map_err(|cause| DataDirError {
            path: root.clone(),
            cause,
        })?;
        Ok(Self { root })
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The compile cache root.
    pub fn cache(&self) -> PathBuf {
        self.root.join("cache")
    }

    /// The database shared by the capabilities (key-value, secrets, approvals, pins, rate
    /// windows): a SQLite file.
    pub fn database(&self) -> PathBuf {
        self.root.join("chitin.db")
    }

    /// Where versions before the SQLite file kept the same state (a redb file), imported into
    /// [`DataDir::database`] when it is first opened.
    pub fn earlier_database(&self) -> PathBuf {
        self.root.join("chitin.redb")
    }

    /// The bearer token of `chitin serve --http` (mode 0600).
    pub fn http_token(&self) -> PathBuf {
        self.root.join("http-token")
    }

    /// Where installed components live, with their lockfile.
    pub fn components(&self) -> PathBuf {
        self.root.join("components")
    }

    /// The embedded default registry (`local`).
    pub fn registry(&self) -> PathBuf {
        self.root.join("registry")
    }

    /// The operator's named registries.
    pub fn registries_config(&self) -> PathBuf {
        self.root.join("registries.toml")
    }

    /// Where downloads wait while they are checked, before an install commits them.
    pub fn downloads(&self) -> PathBuf {
        self.root.join("downloads")
    }
}
