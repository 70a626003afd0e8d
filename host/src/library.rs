//! Library components: components that export interfaces (not tools) for tool components to
//! import, and the resolution of a tool's `[[dependencies]]` at load.
//!
//! A library whose manifest asks for no capability, and which imports neither files nor HTTP,
//! is composed into the tool statically (`wac-graph`); the composite's imports are the tool's.
//! Any other library is linked through the host instead: each call into it runs in a fresh store of its own, under
//! its own grant and limits, so neither side gains the other's rights.

use std::sync::Arc;

use chitin_registry::artifact::ContentHash;
use chitin_registry::capability::SECTIONS;
use chitin_registry::compose::ComposeError;
use chitin_registry::manifest::{Dependency, Manifest};
use wasmtime::Engine;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, ComponentExportIndex, InstancePre, Linker, Val};

use crate::approver::{CallContext, Consenter};
use crate::fault::Faults;
use crate::grant::Grant;
use crate::sandbox;
use crate::services::Services;
use crate::state::{CallEnv, HostState};

/// A loaded library component.
pub struct LoadedLibrary {
    /// Where it was loaded from.
    pub path: std::path::PathBuf,
    /// Its content hash.
    pub hash: ContentHash,
    /// The fingerprint of the trusted key that signed it.
    pub signer: String,
    /// The publisher that key is trusted as.
    pub publisher: Option<String>,
    /// Its grant (its manifest ∩ the policy).
    pub grant: Arc<Grant>,
    /// The interfaces it exports, with their functions.
    pub exports: Vec<Export>,
    /// How tools use it.
    pub linking: Linking,
    /// What it imports.
    imports: Vec<String>,
    bytes: Arc<[u8]>,
}

/// One exported interface.
pub struct Export {
    /// The interface name with its version (`chitin:markdown/convert@0.1.0`).
    pub name: String,
    /// Its functions.
    functions: Vec<String>,
    /// Whether it carries resources (which cannot cross stores).
    has_resources: bool,
}

/// How a library reaches the tools that import it.
pub enum Linking {
    /// Capability-free and importing neither files nor HTTP: composed into each tool statically.
    Static,
    /// With a grant of its own, or importing files or HTTP: called through the host, in its own
    /// store.
    Host(InstancePre<HostState>),
}

/// The libraries a tool's imports resolve to.
pub struct Resolution {
    /// Libraries to compose statically, in the order their imports were found.
    pub composed: Vec<Arc<LoadedLibrary>>,
    /// (import name, library) pairs to link through the host.
    pub linked: Vec<(String, Arc<LoadedLibrary>)>,
}

/// A dependency could not be met.
#[derive(Debug, thiserror::Error)]
pub enum DependencyError {
    /// No loaded library has the name.
    #[error(
        "dependency `{name}` {range} is not loaded: put the library beside this component \
         (or install it) so it loads first"
    )]
    Missing {
        /// The library's `namespace/name`.
        name: String,
        /// The versions accepted.
        range: String,
    },
    /// Loaded, but at no accepted version.
    #[error("dependency `{name}` {range}: only version {found} is loaded")]
    Version {
        /// The library's `namespace/name`.
        name: String,
        /// The versions accepted.
        range: String,
        /// The versions loaded.
        found: String,
    },
    /// Loaded, but signed by someone else than the manifest requires.
    #[error("dependency `{name}`: {reason}")]
    Signer {
        /// The library's `namespace/name`.
        name: String,
        /// What was required and what was found.
        reason: String,
    },
    /// An import that no capability covers is exported by none of the dependencies.
    #[error(
        "import `{import}` is exported by none of its dependencies ({deps}); add the library \
         that exports it to [[dependencies]]"
    )]
    Unresolved {
        /// The import.
        import: String,
        /// The dependencies that were searched.
        deps: String,
    },
    /// A library with a grant exports an interface with resources, which cannot cross stores.
    #[error(
        "library `{library}` exports `{interface}` with resources; a library with capabilities \
         of its own is linked through the host, which passes plain values only"
    )]
    Resources {
        /// The library.
        library: String,
        /// The interface.
        interface: String,
    },
    /// Libraries are not composed from other libraries.
    #[error("library `{0}` declares dependencies of its own; libraries cannot depend on libraries")]
    Nested(String),
    /// Static composition failed.
    #[error(transparent)]
    Compose(#[from] chitin_registry::compose::ComposeError),
    /// Host linking failed.
    #[error("cannot link library `{library}`: {reason}")]
    Link {
        /// The library.
        library: String,
        /// Why.
        reason: String,
    },
}

impl LoadedLibrary {
    /// A library from its compiled `component`, `bytes` and grant; pre-instantiated with
    /// `linker` when it has capabilities of its own.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        engine: &Engine,
        linker: &Linker<HostState>,
        path: &std::path::Path,
        bytes: &[u8],
        component: &Component,
        hash: ContentHash,
        signer: String,
        publisher: Option<String>,
        grant: Arc<Grant>,
    ) -> Result<Self, DependencyError> {
        let manifest = grant.manifest.as_ref();
        let name = grant.id().map(|id| id.to_string()).unwrap_or_default();
        if manifest.is_some_and(|m| !m.dependencies.is_empty()) {
            return Err(DependencyError::Nested(name));
        }
        let exports = component
            .component_type()
            .exports(engine)
            .filter_map(|(export, item)| match item.ty {
                ComponentItem::ComponentInstance(instance) => {
                    let mut functions = Vec::new();
                    let mut has_resources = false;
                    for (f, item) in instance.exports(engine) {
                        match item.ty {
                            ComponentItem::ComponentFunc(_) => functions.push(f.to_owned()),
                            ComponentItem::Resource(_) => has_resources = true,
                            _ => {}
                        }
                    }
                    Some(Export {
                        name: export.to_owned(),
                        functions,
                        has_resources,
                    })
                }
                _ => None,
            })
            .collect();
        let imports: Vec<String> = component
            .component_type()
            .imports(engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        // Composed statically, a library's file or HTTP imports would be the tool's and reach
        // the tool's grant; in a store of its own they reach only its own (perhaps nothing).
        let linking =
            if manifest.is_some_and(|m| asks_capabilities(m))
                || imports.iter().any(|i| reaches_grant(i))
            {
                Linking::Host(linker.instantiate_pre(component).map_err(|e| {
                    DependencyError::Link {
                        library: name,
                        reason: format!("{e:#}"),
                    }
                })?)
            } else {
                Linking::Static
            };
        Ok(Self {
            path: path.to_owned(),
            hash,
            signer,
            publisher,
            grant,
            exports,
            linking,
            imports,
            bytes: bytes.into(),
        })
    }

    /// `namespace/name`.
    pub fn id(&self) -> String {
        self.grant.id().map(|id| id.to_string()).unwrap_or_default()
    }

    /// The version from its manifest.
    pub fn version(&self) -> Option<&semver::Version> {
        self.grant.manifest.as_ref().map(|m| &m.component.version)
    }

    /// Whether it is linked through the host (it has capabilities of its own).
    pub fn is_host_linked(&self) -> bool {
        matches!(self.linking, Linking::Host(_))
    }

    fn export_for(&self, import: &str) -> Option<&Export> {
        self.exports.iter().find(|e| compatible(&e.name, import))
    }
}

/// Whether `import` is linked WASI that reaches a component's grant (its directories, its HTTP
/// allowlist) even when the manifest asks for nothing: what a section linked without a grant
/// covers.
fn reaches_grant(import: &str) -> bool {
    let unversioned = import.split('@').next().unwrap_or(import);
    SECTIONS
        .iter()
        .any(|s| s.linked_without_grant && s.covers(unversioned))
}

/// Whether a manifest asks for any capability.
fn asks_capabilities(m: &Manifest) -> bool {
    SECTIONS.iter().any(|s| (s.present)(&m.capabilities))
}

/// Resolve `manifest`'s dependencies among `libraries`, then each of `imports` that needs one.
/// `env_granted`: the tool reads environment variables, which a statically composed library
/// would share, so such a library importing the environment is linked through the host.
pub fn resolve(
    manifest: &Manifest,
    imports: &[String],
    libraries: &[Arc<LoadedLibrary>],
    env_granted: bool,
) -> Result<Resolution, DependencyError> {
    let mut chosen = Vec::new();
    for dep in &manifest.dependencies {
        chosen.push(pick(dep, libraries)?);
    }
    let mut resolution = Resolution {
        composed: Vec::new(),
        linked: Vec::new(),
    };
    for import in imports {
        if chitin_registry::imports::coverage(import, Some(manifest))
            != chitin_registry::imports::Coverage::Dependency
        {
            continue;
        }
        let Some(library) = chosen.iter().find(|l| l.export_for(import).is_some()) else {
            return Err(DependencyError::Unresolved {
                import: import.clone(),
                deps: manifest
                    .dependencies
                    .iter()
                    .map(|d| format!("{} {}", d.name, d.version))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let shares_env = env_granted && imports_environment(library);
        if library.is_host_linked() || shares_env {
            if let Some(export) = library.export_for(import).filter(|e| e.has_resources) {
                return Err(DependencyError::Resources {
                    library: library.id(),
                    interface: export.name.clone(),
                });
            }
            resolution.linked.push((import.clone(), library.clone()));
        } else if !resolution.composed.iter().any(|l| Arc::ptr_eq(l, library)) {
            resolution.composed.push(library.clone());
        }
    }
    Ok(resolution)
}

fn imports_environment(library: &LoadedLibrary) -> bool {
    library
        .imports
        .iter()
        .any(|i| i.starts_with("wasi:cli/environment@"))
}

/// The loaded library `dep` names, at an accepted version, signed as it requires.
fn pick(
    dep: &Dependency,
    libraries: &[Arc<LoadedLibrary>],
) -> Result<Arc<LoadedLibrary>, DependencyError> {
    let named: Vec<&Arc<LoadedLibrary>> = libraries.iter().filter(|l| l.id() == dep.name).collect();
    if named.is_empty() {
        return Err(DependencyError::Missing {
            name: dep.name.clone(),
            range: dep.version.to_string(),
        });
    }
    let library = named
        .iter()
        .filter(|l| l.version().is_some_and(|v| dep.version.matches(v)))
        .max_by(|a, b| a.version().cmp(&b.version()))
        .ok_or_else(|| DependencyError::Version {
            name: dep.name.clone(),
            range: dep.version.to_string(),
            found: named
                .iter()
                .filter_map(|l| l.version().map(ToString::to_string))
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    if let Some(publisher) = &dep.publisher
        && library.publisher.as_deref() != Some(publisher.as_str())
    {
        return Err(DependencyError::Signer {
            name: dep.name.clone(),
            reason: format!(
                "the manifest requires publisher `{publisher}`, but it is signed by {} ({})",
                library
                    .publisher
                    .as_deref()
                    .unwrap_or("an unnamed publisher"),
                library.signer
            ),
        });
    }
    if let Some(key) = &dep.key
        && &library.signer != key
    {
        return Err(DependencyError::Signer {
            name: dep.name.clone(),
            reason: format!(
                "the manifest requires key {key}, but it is signed by {}",
                library.signer
            ),
        });
    }
    Ok((*library).clone())
}

/// Whether an export `chitin:x/y@0.1.3` satisfies an import `chitin:x/y@0.1.0`: the same
/// interface at a semver-compatible version no older than the import's.
fn compatible(export: &str, import: &str) -> bool {
    let split = |s: &str| -> Option<(String, Option<semver::Version>)> {
        match s.split_once('@') {
            Some((name, v)) => Some((name.to_owned(), Some(v.parse().ok()?))),
            None => Some((s.to_owned(), None)),
        }
    };
    let (Some((en, ev)), Some((iname, iv))) = (split(export), split(import)) else {
        return false;
    };
    if en != iname {
        return false;
    }
    match (ev, iv) {
        (None, None) => true,
        (Some(e), Some(i)) => {
            let same_track = if i.major > 0 {
                e.major == i.major
            } else {
                e.major == 0 && e.minor == i.minor
            };
            same_track && e >= i
        }
        _ => false,
    }
}

/// `root` with the capability-free libraries of `resolution` composed in.
pub fn compose(
    root_name: &str,
    root: &[u8],
    resolution: &Resolution,
) -> Result<Vec<u8>, DependencyError> {
    // The parts' manifests and signatures (checked already) stay out of the composite, so its
    // compile-cache key is its code's alone: re-signing a part does not recompile it.
    let code = |name: &str, bytes: &[u8]| {
        chitin_registry::artifact::code(bytes).map_err(|e| ComposeError::Part {
            name: name.to_owned(),
            reason: e.to_string(),
        })
    };
    let names: Vec<String> = resolution.composed.iter().map(|l| l.id()).collect();
    let codes = names
        .iter()
        .zip(&resolution.composed)
        .map(|(n, l)| code(n, &l.bytes))
        .collect::<Result<Vec<_>, _>>()?;
    let parts: Vec<(&str, &[u8])> = names
        .iter()
        .map(String::as_str)
        .zip(codes.iter().map(Vec::as_slice))
        .collect();
    Ok(chitin_registry::compose::plug(
        root_name,
        &code(root_name, root)?,
        &parts,
    )?)
}

/// Define `import` in `linker` as calls into `library`, each in a fresh store of the
/// library's own under its own grant.
pub fn link(
    engine: &Engine,
    linker: &mut Linker<HostState>,
    import: &str,
    library: &Arc<LoadedLibrary>,
    services: &Arc<Services>,
) -> Result<(), DependencyError> {
    let link_err = |reason: String| DependencyError::Link {
        library: library.id(),
        reason,
    };
    let export = library
        .export_for(import)
        .ok_or_else(|| link_err(format!("it does not export `{import}`")))?;
    let Linking::Host(pre) = &library.linking else {
        return Err(link_err("it is composed statically, not linked".into()));
    };
    let component = pre.component();
    let iface = component
        .get_export_index(None, &export.name)
        .ok_or_else(|| link_err(format!("no export `{}`", export.name)))?;
    let mut instance = linker
        .instance(import)
        .map_err(|e| link_err(format!("{e:#}")))?;
    for function in &export.functions {
        let index = component
            .get_export_index(Some(&iface), function)
            .ok_or_else(|| link_err(format!("no function `{function}`")))?;
        let call = LibraryCall {
            engine: engine.clone(),
            library: library.clone(),
            services: services.clone(),
            index,
            name: format!("{}#{function}", export.name),
        };
        let call = Arc::new(call);
        instance
            .func_new_async(function, move |caller, _ty, params, results| {
                let call = call.clone();
                let data = caller.data();
                let (faults, user) = (data.faults.clone(), data.user.clone());
                let consenter = data.consenter.clone();
                Box::new(async move { call.run(params, results, &faults, user, consenter).await })
            })
            .map_err(|e| link_err(format!("{e:#}")))?;
    }
    Ok(())
}

/// One host-linked library function.
struct LibraryCall {
    engine: Engine,
    library: Arc<LoadedLibrary>,
    services: Arc<Services>,
    index: ComponentExportIndex,
    name: String,
}

impl LibraryCall {
    /// Run the function in a fresh instance of the library, under the library's grant, for the
    /// calling tool's `user` (whose rate windows its requests count in) and `consenter` (whose
    /// process bound its programs count in). A host fault the library met is recorded in the
    /// calling tool's `faults` and traps the caller.
    async fn run(
        &self,
        params: &[Val],
        results: &mut [Val],
        faults: &Faults,
        user: Arc<str>,
        consenter: Consenter,
    ) -> wasmtime::Result<()> {
        let Linking::Host(pre) = &self.library.linking else {
            wasmtime::bail!("library `{}` is not host-linked", self.library.id());
        };
        // Nobody to ask: a library's call is never put to a person.
        let ctx = CallContext {
            user,
            consenter,
            ..CallContext::default()
        };
        let env = CallEnv {
            grant: &self.library.grant,
            services: &self.services,
            ctx: &ctx,
            invoke: None,
            target: None,
        };
        let state = HostState::new(&env).map_err(|e| faults.record(e.to_string()))?;
        let own = state.faults.clone();
        let outcome = sandbox::call_library(
            &self.engine,
            pre,
            state,
            &self.library.grant.limits,
            self.index,
            params,
            results,
        )
        .await;
        if let Some(fault) = own.first() {
            return Err(faults.record(fault).into());
        }
        outcome.map_err(|e| e.context(format!("library `{}` ({})", self.library.id(), self.name)))
    }
}
