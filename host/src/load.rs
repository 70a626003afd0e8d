//! Loading a component, as a pipeline of named steps: header → signature → grant → compile
//! (through the cache) → imports → composition → contract → pre-instantiate → specs.
//! [`Runtime::load_any`](crate::runtime::Runtime::load_any) runs them in that order. Each step
//! is a function with its own typed error, which names no file; placed at the component file
//! ([`StepError::at`]), it becomes the [`LoadError`] a person reads.
//!
//! The pin check (no replayed older version, no silent widening) is the host's, once nothing
//! else refuses the component and its tool names are checked, so a refused component is never
//! pinned.

use std::path::Path;
use std::sync::Arc;

use chitin_registry::artifact::{self, ArtifactError, ContentHash, EmbeddedManifestError};
use chitin_registry::manifest::{ComponentKind, Manifest, SpecMismatch, ToolSpec};
use chitin_registry::signature::{self, SignatureError};
use wasmtime::Engine;
use wasmtime::component::{Component, InstancePre, Linker};

use crate::approver::CallContext;
use crate::bindings::exports::chitin::tool::tool::ToolSpec as WitToolSpec;
use crate::cache::{CacheOutcome, CompileCache, LoadOrCompileError};
use crate::capability::CapabilityError;
use crate::contract::{ContractError, Shape};
use crate::error::{LoadError, StepError};
use crate::grant::Grant;
use crate::library::{self, DependencyError, LoadedLibrary};
use crate::limits::Limits;
use crate::policy::Policy;
use crate::sandbox::{self, ToolPre};
use crate::services::Services;
use crate::signing_keys::VerifiedCache;
use crate::spec::CheckedSpec;
use crate::state::{CallEnv, HostState};
use crate::typed_exports::{self, Docs, TypedExportError, TypedFunc};

/// What the steps share: the runtime's engine, linker and compile cache, the operator's policy
/// and the host's services.
pub(crate) struct Loader<'a> {
    /// The engine.
    pub engine: &'a Engine,
    /// The linker with the host's capabilities.
    pub linker: &'a Linker<HostState>,
    /// The compile cache.
    pub cache: &'a CompileCache,
    /// The operator's policy.
    pub policy: &'a Policy,
    /// The host's services (trust store, state, secrets).
    pub services: &'a Arc<Services>,
}

/// How a loaded component's tools are called.
pub(crate) enum Entry {
    /// Through its `chitin:tool/tool` interface.
    Tool(ToolPre),
    /// As its typed exports, one per tool, in the order of the tools.
    Typed(InstancePre<HostState>, Vec<TypedFunc>),
}

impl Entry {
    /// The pre-instantiated component.
    pub fn instance_pre(&self) -> &InstancePre<HostState> {
        match self {
            Self::Tool(pre) => pre.instance_pre(),
            Self::Typed(pre, _) => pre,
        }
    }
}

/// How a tool uses one of its libraries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LibraryUse {
    /// Composed into the tool statically.
    Composed,
    /// Called through the host, in the library's own store.
    Linked,
}

/// Who vouches for a component, and what its manifest says.
pub(crate) struct Signed {
    /// The fingerprint of the trusted key that signed it.
    pub signer: String,
    /// Its manifest, if it embeds one.
    pub manifest: Option<Manifest>,
}

/// A tool component with its dependencies met.
pub(crate) struct Composed {
    /// The component to instantiate: the tool itself, or the tool with libraries composed in.
    pub component: Component,
    /// The runtime's linker plus the libraries linked through the host, when it has
    /// dependencies.
    pub linker: Option<Linker<HostState>>,
    /// The libraries it was composed with or linked to, and how.
    pub libraries: Vec<(Arc<LoadedLibrary>, LibraryUse)>,
    /// The imports the linked libraries provide.
    pub linked: Vec<String>,
}

/// A pre-instantiated component, by how its tools are called.
pub(crate) enum Prepared {
    /// A `chitin:tool` component.
    Tool(ToolPre),
    /// A component of typed exports.
    Typed(InstancePre<HostState>),
}

/// The signature step refused the component.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// The manifest section cannot be read, or the manifest is malformed or invalid.
    #[error(transparent)]
    Manifest(#[from] EmbeddedManifestError),
    /// Unsigned, tampered, unknown signer, or signer outside its scope.
    #[error(transparent)]
    Signature(#[from] SignatureError),
}

/// The component imports interfaces its manifest does not declare a capability for.
#[derive(Debug, thiserror::Error)]
#[error("imports not covered by its manifest: {imports}")]
pub struct UncoveredImports {
    /// Each uncovered import and what would cover it.
    pub imports: String,
}

/// The composition step could not meet a tool's dependencies.
#[derive(Debug, thiserror::Error)]
pub enum CompositionError {
    /// A dependency could not be resolved, composed or linked.
    #[error(transparent)]
    Dependency(#[from] DependencyError),
    /// The composite did not compile.
    #[error(transparent)]
    Compile(#[from] LoadOrCompileError),
}

/// Linking the component, or checking the linked result, failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot instantiate: {0}")]
pub struct InstantiateError(String);

impl From<wasmtime::Error> for InstantiateError {
    fn from(e: wasmtime::Error) -> Self {
        Self(format!("{e:#}"))
    }
}

/// The specs step refused what the component says its tools are.
#[derive(Debug, thiserror::Error)]
pub enum SpecsError {
    /// Its `specs()` could not run, or failed.
    #[error("cannot instantiate: {0}")]
    Instantiate(String),
    /// A typed export chitin cannot serve as a tool.
    #[error(transparent)]
    TypedExport(#[from] TypedExportError),
    /// Its signed manifest records no spec for these tools (in words).
    #[error("no signed spec for {0}")]
    Unrecorded(String),
    /// Its own specs differ from the signed ones.
    #[error(transparent)]
    Mismatch(SpecMismatch),
    /// A spec the host cannot accept.
    #[error("tool `{tool}`: {reason}")]
    Bad {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
}

impl From<(String, String)> for SpecsError {
    fn from((tool, reason): (String, String)) -> Self {
        Self::Bad { tool, reason }
    }
}

/// Header: the bytes are a WebAssembly component.
pub(crate) fn header(bytes: &[u8]) -> Result<(), ArtifactError> {
    artifact::check_header(bytes)
}

impl Loader<'_> {
    /// Signature: the whole file is verified before anything of it is parsed further, compiled
    /// or run, unless this content already passed under this trust store; the signer must be
    /// trusted for the name the manifest claims.
    pub fn signature(&self, bytes: &[u8], hash: &ContentHash) -> Result<Signed, SignerError> {
        let manifest = || Manifest::from_artifact(bytes);
        let trust = self.services.trust();
        let verified = VerifiedCache::new(self.cache.dir().join("verified"));
        if let Some(signer) = verified.get(hash, trust) {
            return Ok(Signed {
                signer,
                manifest: manifest()?,
            });
        }
        let signatures = signature::verify(bytes, trust)?;
        let manifest = manifest()?;
        let key = match &manifest {
            Some(m) => signatures.authorize(&m.component.namespace, &m.component.name),
            None => signatures.authorize_unnamed(),
        }?;
        let signer = key.key.fingerprint();
        verified.put(hash, trust, &signer);
        Ok(Signed { signer, manifest })
    }

    /// Grant: what the manifest asks for, resolved against the policy and this host's
    /// services.
    pub fn grant(&self, manifest: Option<Manifest>) -> Result<Arc<Grant>, CapabilityError> {
        Grant::resolve(manifest, self.policy, self.services).map(Arc::new)
    }

    /// Compile: the compiled component, from the cache when it holds it; `label` names it in
    /// the progress a compile reports.
    pub fn compile(
        &self,
        bytes: &[u8],
        label: &str,
    ) -> Result<(Component, CacheOutcome), LoadOrCompileError> {
        self.cache.load_or_compile(self.engine, bytes, Some(label))
    }

    /// Imports: every import is one the manifest covers; returns their names. Checked before
    /// the contract, so an undeclared capability import is named as such even when the
    /// contract check would refuse the component too.
    pub fn imports(
        &self,
        component: &Component,
        manifest: Option<&Manifest>,
    ) -> Result<Vec<String>, UncoveredImports> {
        let imports: Vec<String> = component
            .component_type()
            .imports(self.engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let uncovered = chitin_registry::imports::uncovered(&imports, manifest);
        if uncovered.is_empty() {
            Ok(imports)
        } else {
            Err(UncoveredImports {
                imports: chitin_registry::imports::describe_uncovered(&uncovered),
            })
        }
    }

    /// Composition, for a library: it is ready for the tools that import it.
    pub fn library(
        &self,
        path: &Path,
        bytes: &[u8],
        component: &Component,
        hash: ContentHash,
        signer: String,
        grant: Arc<Grant>,
    ) -> Result<LoadedLibrary, DependencyError> {
        let publisher = self
            .services
            .trust()
            .keys()
            .iter()
            .find(|k| k.key.fingerprint() == signer)
            .map(|k| k.publisher.clone());
        LoadedLibrary::new(
            self.engine,
            self.linker,
            path,
            bytes,
            component,
            hash,
            signer,
            publisher,
            grant,
        )
    }

    /// Composition, for a tool: its dependencies resolve among `libraries`; capability-free
    /// ones are composed in (the composite compiled through the cache), the others linked
    /// through the host.
    pub fn composition(
        &self,
        bytes: &[u8],
        component: Component,
        manifest: Option<&Manifest>,
        imports: &[String],
        libraries: &[Arc<LoadedLibrary>],
    ) -> Result<Composed, CompositionError> {
        let Some(m) = manifest.filter(|m| !m.dependencies.is_empty()) else {
            return Ok(Composed {
                component,
                linker: None,
                libraries: Vec::new(),
                linked: Vec::new(),
            });
        };
        let resolution = library::resolve(m, imports, libraries, m.capabilities.env.is_some())?;
        let linked: Vec<String> = resolution.linked.iter().map(|(i, _)| i.clone()).collect();
        let component = if resolution.composed.is_empty() {
            component
        } else {
            let composite = library::compose(&m.id(), bytes, &resolution)?;
            self.compile(&composite, &format!("{} with its libraries", m.id()))?
                .0
        };
        let mut linker = self.linker.clone();
        for (import, library) in &resolution.linked {
            library::link(self.engine, &mut linker, import, library, self.services)?;
        }
        let libraries = resolution
            .composed
            .into_iter()
            .map(|l| (l, LibraryUse::Composed))
            .chain(
                resolution
                    .linked
                    .into_iter()
                    .map(|(_, l)| (l, LibraryUse::Linked)),
            )
            .collect();
        Ok(Composed {
            component,
            linker: Some(linker),
            libraries,
            linked,
        })
    }

    /// Contract: the component's chitin imports and exports are ones this host accepts, and
    /// say how its tools are called.
    pub fn contract(&self, composed: &Composed) -> Result<Shape, ContractError> {
        crate::contract::check(self.engine, &composed.component, &composed.linked)
    }

    /// Pre-instantiate: the component linked against the host's capabilities and its
    /// libraries, ready for a fresh instance per call.
    pub fn pre_instantiate(
        &self,
        composed: &Composed,
        shape: Shape,
    ) -> Result<Prepared, InstantiateError> {
        let linker = composed.linker.as_ref().unwrap_or(self.linker);
        let pre = sandbox::pre_instantiate(linker, &composed.component)?;
        Ok(match shape {
            Shape::Tool => Prepared::Tool(ToolPre::new(pre)?),
            Shape::Typed => Prepared::Typed(pre),
        })
    }

    /// Specs: the component's tools, as it describes them, matching what its signature covers
    /// and each acceptable; namespaced when the component is not first-party.
    pub async fn specs(
        &self,
        prepared: Prepared,
        component: &Component,
        grant: &Grant,
    ) -> Result<(Entry, Vec<CheckedSpec>), SpecsError> {
        let manifest = grant.manifest.as_deref();
        let (entry, specs) = match prepared {
            Prepared::Tool(pre) => {
                // The component describes its tools with no capability at all: whatever its
                // `specs()` does, it does with nothing granted.
                let specs = self
                    .specs_without_grant(&pre, &grant.limits)
                    .await
                    .map_err(SpecsError::Instantiate)?;
                let specs: Vec<_> = specs.iter().map(crate::spec::recorded).collect();
                (Entry::Tool(pre), specs)
            }
            Prepared::Typed(pre) => {
                let funcs = typed_exports::discover(self.engine, component)?;
                let mut specs = typed_exports::specs(&funcs, &Docs::default())?;
                // The binary keeps no doc comments: the descriptions are the signed ones
                // (`chitin manifest embed --wit` recorded them from the WIT sources).
                if let Some(m) = manifest {
                    for spec in &mut specs {
                        if let Some(signed) = m.tools.get(&spec.name)
                            && let Some(description) = &signed.description
                        {
                            spec.description.clone_from(description);
                        }
                    }
                }
                (Entry::Typed(pre, funcs), specs)
            }
        };
        // What the component offers must match what its signature covers.
        if let Some(m) = manifest {
            check_signed_specs(m, &specs)?;
        }
        let mut tools = specs
            .into_iter()
            .map(CheckedSpec::from_recorded)
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(m) = manifest
            && m.component.namespace != crate::policy::FIRST_PARTY
        {
            for tool in &mut tools {
                tool.namespace(&m.component.namespace)?;
            }
        }
        Ok((entry, tools))
    }

    /// Call `specs()` in a fresh instance of `pre` whose state grants nothing, under `limits`.
    pub async fn specs_without_grant(
        &self,
        pre: &ToolPre,
        limits: &Limits,
    ) -> Result<Vec<WitToolSpec>, String> {
        let nothing = Grant {
            limits: *limits,
            ..Grant::none(self.policy)
        };
        let env = CallEnv {
            grant: &nothing,
            services: self.services,
            ctx: &CallContext::default(),
            invoke: None,
            target: None,
        };
        let state = HostState::new(&env).map_err(|e| e.to_string())?;
        sandbox::specs(self.engine, pre, state, limits)
            .await
            .result
            .map_err(|e| format!("specs() failed: {e}"))
    }
}

/// Whether a verified manifest declares a library component.
pub(crate) fn is_library(grant: &Grant) -> bool {
    grant
        .manifest
        .as_ref()
        .is_some_and(|m| m.component.kind == ComponentKind::Library)
}

/// Refuse a tool component whose manifest records no specs, or whose own specs differ from the
/// recorded ones; each refusal names the tool.
fn check_signed_specs(manifest: &Manifest, found: &[ToolSpec]) -> Result<(), SpecsError> {
    let signed = manifest.tool_specs();
    let unrecorded = manifest.tools_without_spec();
    if !unrecorded.is_empty() || (signed.is_empty() && !found.is_empty()) {
        let names = if unrecorded.is_empty() {
            found.iter().map(|s| s.name.as_str()).collect()
        } else {
            unrecorded
        };
        return Err(SpecsError::Unrecorded(
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    chitin_registry::manifest::tools::compare(&signed, found).map_err(SpecsError::Mismatch)
}

impl StepError for ArtifactError {
    fn at(self, path: &Path) -> LoadError {
        LoadError::Artifact {
            path: path.to_owned(),
            cause: self,
        }
    }
}

impl StepError for SignerError {
    fn at(self, path: &Path) -> LoadError {
        let path = path.to_owned();
        match self {
            Self::Manifest(EmbeddedManifestError::Artifact(cause)) => {
                LoadError::Artifact { path, cause }
            }
            Self::Manifest(EmbeddedManifestError::Manifest(cause)) => {
                LoadError::Manifest { path, cause }
            }
            Self::Signature(cause) => LoadError::Signature { path, cause },
        }
    }
}

impl StepError for CapabilityError {
    fn at(self, path: &Path) -> LoadError {
        LoadError::Grant {
            path: path.to_owned(),
            cause: self,
        }
    }
}

impl StepError for LoadOrCompileError {
    fn at(self, path: &Path) -> LoadError {
        let Self::Compile(reason) = self;
        LoadError::Compile {
            path: path.to_owned(),
            reason,
        }
    }
}

impl StepError for UncoveredImports {
    fn at(self, path: &Path) -> LoadError {
        LoadError::UncoveredImports {
            path: path.to_owned(),
            imports: self.imports,
        }
    }
}

impl StepError for DependencyError {
    fn at(self, path: &Path) -> LoadError {
        LoadError::Dependency {
            path: path.to_owned(),
            cause: self,
        }
    }
}

impl StepError for CompositionError {
    fn at(self, path: &Path) -> LoadError {
        match self {
            Self::Dependency(e) => e.at(path),
            Self::Compile(e) => e.at(path),
        }
    }
}

impl StepError for ContractError {
    fn at(self, path: &Path) -> LoadError {
        LoadError::Contract {
            path: path.to_owned(),
            cause: self,
        }
    }
}

impl StepError for InstantiateError {
    fn at(self, path: &Path) -> LoadError {
        LoadError::Instantiate {
            path: path.to_owned(),
            reason: self.0,
        }
    }
}

impl StepError for TypedExportError {
    fn at(self, path: &Path) -> LoadError {
        LoadError::TypedExport {
            path: path.to_owned(),
            cause: self,
        }
    }
}

impl StepError for SpecsError {
    fn at(self, path: &Path) -> LoadError {
        let path = path.to_owned();
        match self {
            Self::Instantiate(reason) => LoadError::Instantiate { path, reason },
            Self::TypedExport(cause) => LoadError::TypedExport { path, cause },
            Self::Unrecorded(tools) => LoadError::UnrecordedSpecs { path, tools },
            Self::Mismatch(cause) => LoadError::SpecMismatch { path, cause },
            Self::Bad { tool, reason } => LoadError::BadSpec { path, tool, reason },
        }
    }
}
