//! `chitin:host/secrets`: a component asks whether a secret exists, for names its manifest's
//! globs (`[capabilities.secrets] names`) cover. Values never cross into a component; the host
//! uses them itself for HTTP credential injection and leak scanning.
//!
//! A name outside the globs gets the same refusal whether or not the secret exists, so a
//! component cannot probe which secrets the operator keeps.

use std::fmt;
use std::sync::Arc;

use chitin_registry::manifest::SecretsGrant;
use globset::GlobSet;
use wasmtime::component::{HasData, Linker};
use zeroize::Zeroizing;

use crate::call::Call;
use crate::capability::{Capability, CapabilityError, Cut, Holds, Load};
use crate::fault::Faults;
use crate::secrets::{SecretError, SecretStore, validate_name};
use crate::services::Services;

/// Host bindings of `chitin:host/secrets`.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        inline: "package chitin:secrets-host;
                 world secrets-host { import chitin:host/secrets@0.1.0; }",
        imports: { default: trappable },
    });
}

/// The resolved secrets grant: which names the component may ask about, and the store.
#[derive(Clone, Default)]
pub struct SecretsConfig {
    /// The globs as the manifest wrote them (for messages and audits).
    globs: Vec<String>,
    /// The compiled globs; `None` when nothing is granted.
    set: Option<GlobSet>,
    /// The store, opened when any name is granted.
    store: Option<Arc<SecretStore>>,
}

impl fmt::Debug for SecretsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretsConfig")
            .field("globs", &self.globs)
            .finish_non_exhaustive()
    }
}

/// The secrets grant cannot be resolved (a glob does not parse, the store cannot be opened).
#[derive(Debug, thiserror::Error)]
#[error("secrets grant: {0}")]
pub struct SecretsGrantError(String);

/// Compile secret-name globs (`github_*`); the error names the glob that does not parse.
pub fn compile_globs(globs: &[String]) -> Result<GlobSet, SecretsGrantError> {
    SecretsGrant {
        names: globs.to_vec(),
    }
    .glob_set()
    .map_err(|e| SecretsGrantError(e.to_string()))
}

/// Resolve a secrets grant, opening the shared store when any name is granted.
pub fn configure(
    grant: Option<&SecretsGrant>,
    services: &Services,
) -> Result<SecretsConfig, SecretsGrantError> {
    let Some(grant) = grant.filter(|g| !g.names.is_empty()) else {
        return Ok(SecretsConfig::default());
    };
    let set = compile_globs(&grant.names)?;
    let store = services
        .secrets()
        .map_err(|e| SecretsGrantError(e.to_string()))?;
    Ok(SecretsConfig {
        globs: grant.names.clone(),
        set: Some(set),
        store: Some(store),
    })
}

impl SecretsConfig {
    /// A config over `store` for names matching `globs` (tests and embedders).
    pub fn new(globs: &[String], store: Arc<SecretStore>) -> Result<Self, SecretsGrantError> {
        Ok(Self {
            globs: globs.to_vec(),
            set: Some(compile_globs(globs)?),
            store: Some(store),
        })
    }

    /// Whether the grant covers `name`.
    pub fn allows(&self, name: &str) -> bool {
        self.set.as_ref().is_some_and(|set| set.is_match(name))
    }

    /// The store, when any name is granted.
    pub fn store(&self) -> Option<&Arc<SecretStore>> {
        self.store.as_ref()
    }

    /// The stored secrets this grant covers, with their values: what a call could leak, for
    /// building its [`crate::leak::LeakScanner`]. Host-internal; never hand these to a component.
    pub fn reachable(&self) -> Result<Vec<(String, Zeroizing<String>)>, SecretError> {
        let Some(store) = &self.store else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for name in store.names()? {
            if self.allows(&name)
                && let Some(value) = store.get(&name)?
            {
                out.push((name, value));
            }
        }
        Ok(out)
    }

    /// Whether the secret `name` exists, or why the question gets no answer. Refusals for
    /// names outside the grant do not depend on the store.
    pub fn exists(&self, name: &str) -> Result<bool, Unanswered> {
        let (true, Some(store)) = (self.allows(name), &self.store) else {
            return Err(Unanswered::Refused(outside_grant(name)));
        };
        validate_name(name).map_err(|e| Unanswered::Refused(e.to_string()))?;
        store.exists(name).map_err(Unanswered::Store)
    }
}

/// Why a question about a secret gets no answer.
#[derive(Debug, thiserror::Error)]
pub enum Unanswered {
    /// Refused: the name is outside the grant or malformed. The component is told why.
    #[error("{0}")]
    Refused(String),
    /// The secrets store failed: a host fault, which ends the call.
    #[error("secrets store: {0}")]
    Store(SecretError),
}

/// The one refusal for a name outside the grant.
fn outside_grant(name: &str) -> String {
    format!("secret name `{name}` is outside this component's grant (capabilities.secrets.names)")
}

/// Per-call state of the secrets capability.
#[derive(Debug, Clone, Default)]
pub struct SecretsCtx {
    /// The component's resolved grant.
    pub config: SecretsConfig,
    /// Where a store failure is recorded as the call's host fault.
    pub faults: Faults,
}

impl bindings::chitin::host::secrets::Host for &mut SecretsCtx {
    fn exists(&mut self, name: String) -> wasmtime::Result<Result<bool, String>> {
        match self.config.exists(&name) {
            Ok(found) => Ok(Ok(found)),
            Err(Unanswered::Refused(why)) => Ok(Err(why)),
            // The store failed, not the component: trap, so the call ends as a host fault.
            Err(e @ Unanswered::Store(_)) => Err(self.faults.record(e.to_string()).into()),
        }
    }
}

/// The secrets capability (and its `HasData` marker).
pub struct Secrets;

impl HasData for Secrets {
    type Data<'a> = &'a mut SecretsCtx;
}

impl Capability for Secrets {
    type Section = SecretsGrant;
    type Config = SecretsConfig;
    type Ctx = SecretsCtx;
    const LINKS: &'static [&'static str] = &["chitin:host/secrets@"];

    fn configure(
        section: Option<&SecretsGrant>,
        load: &Load<'_>,
        _cuts: &mut Vec<Cut>,
    ) -> Result<SecretsConfig, CapabilityError> {
        configure(section, load.services).map_err(CapabilityError::new::<Self>)
    }

    fn ctx(config: &SecretsConfig, call: &Call<'_>) -> SecretsCtx {
        SecretsCtx {
            config: config.clone(),
            faults: call.faults.clone(),
        }
    }

    fn add_to_linker<T: Holds<Self>>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        fn get<T: Holds<Secrets>>(state: &mut T) -> &mut SecretsCtx {
            state.parts().0
        }
        bindings::chitin::host::secrets::add_to_linker::<T, Secrets>(linker, get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::MasterKey;

    fn config(dir: &std::path::Path) -> SecretsConfig {
        let db = Arc::new(crate::state_db::StateDb::new(&dir.join("db.sqlite")));
        let key = MasterKey::load(dir, None).expect("key");
        let store = Arc::new(SecretStore::with_key(db, key).expect("store"));
        store.set("github_token", "value-0123456").expect("set");
        store.set("other_token", "value-6543210").expect("set");
        SecretsConfig::new(&["github_*".into(), "slack_bot".into()], store).expect("config")
    }

    #[test]
    fn granted_names_are_answered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = config(dir.path());
        assert!(c.exists("github_token").expect("answered"));
        assert!(!c.exists("github_missing").expect("answered"));
        assert!(!c.exists("slack_bot").expect("answered"));
        let reachable = c.reachable().expect("reachable");
        let names: Vec<&str> = reachable.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["github_token"], "only names the globs cover");
    }

    #[test]
    fn names_outside_the_grant_get_one_answer_whether_or_not_they_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = config(dir.path());
        let present = c.exists("other_token").unwrap_err().to_string();
        let absent = c.exists("other_missing").unwrap_err().to_string();
        assert_eq!(
            present,
            "secret name `other_token` is outside this component's grant \
             (capabilities.secrets.names)"
        );
        assert_eq!(
            absent.replace("other_missing", "X"),
            present.replace("other_token", "X")
        );
        let none = SecretsConfig::default();
        assert_eq!(
            none.exists("github_token").unwrap_err().to_string(),
            outside_grant("github_token")
        );
    }
}
