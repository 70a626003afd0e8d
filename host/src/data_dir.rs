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
            // A data directory named by hand is made only where its parent exists: a typo
            // (`--data-dir /srv/chtin/data`) would otherwise start an empty one, with memory,
            // secrets and approvals seemingly gone.
            Some(p)
                if !p.exists()
                    && p.parent()
                        .is_some_and(|up| !up.as_os_str().is_empty() && !up.exists()) =>
            {
                return Err(DataDirError {
                    path: p.to_owned(),
                    cause: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "neither it nor its parent directory exists; check the path, or create \
                         the parent first to start a new data directory there",
                    ),
                });
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_data_directory_is_made_only_where_its_parent_exists() {
        let root = tempfile::tempdir().unwrap();
        let fresh = root.path().join("chitin");
        DataDir::resolve(Some(&fresh)).expect("made beside what exists");
        assert!(fresh.is_dir());
        let typo = root.path().join("chtin/data");
        let err = DataDir::resolve(Some(&typo)).unwrap_err();
        assert!(err.to_string().contains("nor its parent"), "{err}");
        assert!(!root.path().join("chtin").exists(), "nothing was made");
    }
}
