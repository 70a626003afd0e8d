//! What the host offers every capability: the operator's workspace, the data directory and the
//! shared database. Built once per host; capabilities take what their grant allows from it.
//! A capability's own host-wide service (the key-value store, the HTTP rate limiter, the process
//! slots) is kept here by type ([`Services::shared`]) and started on first use, so this core
//! never depends on a capability.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chitin_registry::trust_store::TrustStore;

use crate::data_dir::DataDir;
use crate::secrets::{SecretError, SecretStore};
use crate::state_db::StateDb;

/// The workspace could not be used or a store could not be started.
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
    /// A capability's service could not be started (the key-value store, say).
    #[error(transparent)]
    Service(Box<dyn std::error::Error + Send + Sync>),
    /// The secrets store cannot be opened (master key missing, exposed or not matching).
    #[error(transparent)]
    Secrets(#[from] SecretError),
}

/// The workspace, data directory and database shared by all capabilities.
pub struct Services {
    workspace: PathBuf,
    data_dir: DataDir,
    state: Arc<StateDb>,
    secrets: Mutex<Option<Arc<SecretStore>>>,
    /// The capabilities' own services, by type.
    started: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    trust: TrustStore,
}

impl Services {
    /// Services over `workspace` (canonicalised; must be a directory) and `data_dir`, with the
    /// state in the data directory's SQLite file.
    pub fn new(workspace: &Path, data_dir: DataDir) -> Result<Self, ServicesError> {
        let state = Arc::new(StateDb::importing(
            &data_dir.database(),
            &data_dir.earlier_database(),
        ));
        Self::with_state(workspace, data_dir, state)
    }

    /// As [`Services::new`], with the state in `state` (PostgreSQL for replicas).
    pub fn with_state(
        workspace: &Path,
        data_dir: DataDir,
        state: Arc<StateDb>,
    ) -> Result<Self, ServicesError> {
        let canonical = workspace
            .canonicalize()
            .map_err(|cause| ServicesError::Workspace {
                path: workspace.to_owned(),
                cause,
            })?;
        if !canonical.is_dir() {
            return Err(ServicesError::NotADirectory(canonical));
        }
        Ok(Self {
            workspace: canonical,
            data_dir,
            state,
            secrets: Mutex::new(None),
            started: Mutex::new(HashMap::new()),
            trust: TrustStore::empty(),
        })
    }

    /// The one service of type `S` of this host, started by `start` on first use and shared by
    /// every call after.
    pub fn shared<S: Send + Sync + 'static, E>(
        &self,
        start: impl FnOnce(&Self) -> Result<S, E>,
    ) -> Result<Arc<S>, E> {
        let mut started = self.started.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(service) = started.get(&TypeId::of::<S>())
            && let Ok(service) = service.clone().downcast::<S>()
        {
            return Ok(service);
        }
        let service = Arc::new(start(self)?);
        started.insert(TypeId::of::<S>(), service.clone());
        Ok(service)
    }

    /// The operator's workspace, canonical.
    pub fn workspace(&self) -> &Path {
        &self.workspace
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

    /// The state database: `<data dir>/chitin.db`, shared with every other chitin process on
    /// this data directory, or PostgreSQL shared by replicas.
    pub fn state(&self) -> &Arc<StateDb> {
        &self.state
    }

    /// The secrets store over the state database, opened on first use (creating the master key
    /// file when neither it nor `CHITIN_SECRETS_KEY` exists).
    pub fn secrets(&self) -> Result<Arc<SecretStore>, ServicesError> {
        let mut slot = self.secrets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(store) = slot.as_ref() {
            return Ok(store.clone());
        }
        let store = Arc::new(SecretStore::open(self.state.clone(), self.data_dir.root())?);
        *slot = Some(store.clone());
        Ok(store)
    }
}
