//! What the host offers every capability: the operator's workspace, the data directory and the
//! shared database. Built once per host; capabilities take what their grant allows from it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chitin_registry::trust::TrustStore;

use crate::caps::http::rate::RateLimiter;
use crate::caps::kv::KvStore;
use crate::caps::process::ProcessHost;
use crate::data_dir::DataDir;
use crate::secrets::{SecretError, SecretStore};

/// The workspace could not be used or the database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ServicesError {
    /// The workspace directory does not exist or cannot be resolved.
    #[error("workspace {path}: {cause}")]
    Workspace {
        /// The directory given.
        path: PathBuf,
        /// Why it cannot be used.
        cause: std::io::Error,
    },
    /// The workspace is a file, not a directory.
    #[error("workspace {0} is not a directory")]
    NotADirectory(PathBuf),
    /// The database is held by another chitin process.
    #[error(
        "database {0} is still in use by another chitin process after waiting 10 s (a running \
         `chitin serve`?); stop it or give this one its own --data-dir"
    )]
    DatabaseInUse(PathBuf),
    /// The database could not be opened or created.
    #[error("database {path}: {reason}")]
    Database {
        /// The database file.
        path: PathBuf,
        /// redb's message.
        reason: String,
    },
    /// The secrets store cannot be opened (master key missing, exposed or not matching).
    #[error(transparent)]
    Secrets(#[from] SecretError),
}

/// Open (or create) the database at `path`. redb allows one process at a time; a short-lived
/// `chitin call` elsewhere is waited for briefly rather than failing at once.
fn open_database(path: &Path) -> Result<redb::Database, ServicesError> {
    let waited_until = std::time::Instant::now() + DB_LOCK_WAIT;
    loop {
        match redb::Database::create(path) {
            Ok(db) => return Ok(db),
            Err(redb::DatabaseError::DatabaseAlreadyOpen)
                if std::time::Instant::now() < waited_until =>
            {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(ServicesError::DatabaseInUse(path.to_owned()));
            }
            Err(other) => {
                return Err(ServicesError::Database {
                    path: path.to_owned(),
                    reason: other.to_string(),
                });
            }
        }
    }
}

/// How long to wait for another chitin process to release the database.
const DB_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The workspace, data directory and database shared by all capabilities.
pub struct Services {
    workspace: PathBuf,
    data_dir: DataDir,
    db: Mutex<Option<Arc<redb::Database>>>,
    kv: Mutex<Option<Arc<KvStore>>>,
    secrets: Mutex<Option<Arc<SecretStore>>>,
    process: ProcessHost,
    trust: TrustStore,
    http_rate: RateLimiter,
}

impl Services {
    /// Services over `workspace` (canonicalised; must be a directory) and `data_dir`.
    pub fn new(workspace: &Path, data_dir: DataDir) -> Result<Self, ServicesError> {
        let canonical = workspace
            .canonicalize()
            .map_err(|cause| ServicesError::Workspace {
                path: workspace.to_owned(),
                cause,
            })?;
        if !canonical.is_dir() {
            return Err(ServicesError::NotADirectory(canonical));
        }
        let process = ProcessHost::new(canonical.clone(), data_dir.root().to_owned());
        Ok(Self {
            process,
            workspace: canonical,
            data_dir,
            db: Mutex::new(None),
            kv: Mutex::new(None),
            secrets: Mutex::new(None),
            trust: TrustStore::empty(),
            http_rate: RateLimiter::new(),
        })
    }

    /// The outbound HTTP rate limiter, shared by every call of this host (limits are per user
    /// and tool, across calls).
    pub fn http_rate(&self) -> &RateLimiter {
        &self.http_rate
    }

    /// The operator's workspace, canonical.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// What processes run with: confinement support, limits and the shared concurrency slots.
    pub fn process(&self) -> &ProcessHost {
        &self.process
    }

    /// These services with `trust` as the trust store (the default trusts no key, so no
    /// component loads).
    pub fn with_trust(mut self, trust: TrustStore) -> Self {
        self.trust = trust;
        self
    }

    /// The keys trusted to sign components, and for what.
    pub fn trust(&self) -> &TrustStore {
        &self.trust
    }

    /// The data directory.
    pub fn data_dir(&self) -> &DataDir {
        &self.data_dir
    }

    /// The shared database (`<data dir>/chitin.redb`), opened on first use. Each capability
    /// keeps its own tables in it.
    pub fn db(&self) -> Result<Arc<redb::Database>, ServicesError> {
        let mut slot = self.db.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(db) = slot.as_ref() {
            return Ok(db.clone());
        }
        let db = Arc::new(open_database(&self.data_dir.database())?);
        *slot = Some(db.clone());
        Ok(db)
    }

    /// Run `f` on the database: the shared handle when it is open, else one opened for `f`
    /// alone and closed after, so a check at load (pins) does not hold the database for the
    /// life of the process (redb admits one process at a time).
    pub fn with_db<T>(&self, f: impl FnOnce(Arc<redb::Database>) -> T) -> Result<T, ServicesError> {
        // The slot stays locked while `f` runs, so no other thread opens the file meanwhile.
        let slot = self.db.lock().unwrap_or_else(|p| p.into_inner());
        let db = match slot.as_ref() {
            Some(db) => db.clone(),
            None => Arc::new(open_database(&self.data_dir.database())?),
        };
        Ok(f(db))
    }

    /// The key-value store over the shared database, started on first use.
    pub fn kv(&self) -> Result<Arc<KvStore>, ServicesError> {
        let mut slot = self.kv.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(kv) = slot.as_ref() {
            return Ok(kv.clone());
        }
        let kv = Arc::new(
            KvStore::new(self.db()?).map_err(|e| ServicesError::Database {
                path: self.data_dir.database(),
                reason: e.to_string(),
            })?,
        );
        *slot = Some(kv.clone());
        Ok(kv)
    }

    /// The secrets store over the shared database, opened on first use (creating the master key
    /// file when neither it nor `CHITIN_SECRETS_KEY` exists).
    pub fn secrets(&self) -> Result<Arc<SecretStore>, ServicesError> {
        let mut slot = self.secrets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(store) = slot.as_ref() {
            return Ok(store.clone());
        }
        let store = Arc::new(SecretStore::open(self.db()?, self.data_dir.root())?);
        *slot = Some(store.clone());
        Ok(store)
    }
}
