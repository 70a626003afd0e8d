//! Typed errors at the host's boundaries: loading a component, and calling a tool.

use std::path::{Path, PathBuf};

pub use crate::tool_error::ToolError;

/// The typed error of one step of loading (see `load.rs`), which names no file: placed at the
/// component file it concerns, it becomes a [`LoadError`].
pub trait StepError {
    /// The load error this step error is for the component at `path`.
    fn at(self, path: &Path) -> LoadError;
}

/// Place a step's error at the component file `path`: `step().map_err(at(path))?`.
pub fn at<E: StepError>(path: &Path) -> impl FnOnce(E) -> LoadError + '_ {
    move |e| e.at(path)
}

/// Why a component could not be loaded. Each names the file and the cause.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A library component where a tool component was expected.
    #[error(
        "{path}: is a library component (it exports interfaces, not tools); load it into a \
         host beside the tools that depend on it"
    )]
    Library {
        /// The component file.
        path: PathBuf,
    },
    /// A dependency could not be resolved, composed or linked.
    #[error("{path}: {cause}")]
    Dependency {
        /// The component file.
        path: PathBuf,
        /// Which dependency and why.
        cause: crate::library::DependencyError,
    },
    /// Components are loaded before a host serves calls; one still holds it.
    #[error("{path}: cannot load while a call is still running on this host")]
    Busy {
        /// The component file.
        path: PathBuf,
    },
    /// The file could not be read.
    #[error("{path}: cannot read: {cause}")]
    Read {
        /// The component file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The bytes are not a WebAssembly component.
    #[error("{path}: {cause}")]
    Artifact {
        /// The component file.
        path: PathBuf,
        /// What is wrong with the bytes.
        cause: chitin_registry::artifact::ArtifactError,
    },
    /// The embedded manifest is malformed or invalid.
    #[error("{path}: {cause}")]
    Manifest {
        /// The component file.
        path: PathBuf,
        /// What is wrong with the manifest.
        cause: chitin_registry::manifest::ManifestError,
    },
    /// The component imports interfaces its manifest does not declare a capability for.
    #[error("{path}: imports not covered by its manifest: {imports}")]
    UncoveredImports {
        /// The component file.
        path: PathBuf,
        /// Each uncovered import and what would cover it.
        imports: String,
    },
    /// The installed components cannot be read as the lockfile pins them.
    #[error("installed component: {cause}")]
    Installed {
        /// The directory or file.
        path: PathBuf,
        /// What is wrong.
        cause: Box<crate::installed::InstalledError>,
    },
    /// An installed component does not match its pin (downgrade, or widened grant).
    #[error("{path}: {cause}")]
    Pin {
        /// The component file.
        path: PathBuf,
        /// How it differs from the pin.
        cause: crate::pins::PinError,
    },
    /// A third-party component carries a tool named like a protected built-in.
    #[error(
        "{path}: tool `{tool}` of {component} takes a protected built-in name; only first-party \
         (`chitin` namespace) components may carry it"
    )]
    ProtectedName {
        /// The component file.
        path: PathBuf,
        /// The tool name.
        tool: String,
        /// The component.
        component: String,
    },
    /// The signatures do not establish that a trusted key vouches for the component.
    #[error("{path}: {cause}")]
    Signature {
        /// The component file.
        path: PathBuf,
        /// Unsigned, tampered, unknown signer, or signer outside its scope.
        cause: chitin_registry::signature::SignatureError,
    },
    /// The manifest asks for something this host cannot grant.
    #[error("{path}: {cause}")]
    Grant {
        /// The component file.
        path: PathBuf,
        /// What cannot be granted.
        cause: crate::capability::CapabilityError,
    },
    /// The signed manifest of a tool component does not record its tool specs.
    #[error(
        "{path}: its signed manifest records no spec for {tools}; re-run `chitin manifest embed` \
         (it records the component's specs) and sign the result again"
    )]
    UnrecordedSpecs {
        /// The component file.
        path: PathBuf,
        /// Which tools lack a spec, in words.
        tools: String,
    },
    /// The component's own `specs()` differs from the specs its signed manifest records.
    #[error("{path}: refused: {cause} (the signed specs are what an auditor approved)")]
    SpecMismatch {
        /// The component file.
        path: PathBuf,
        /// Which tool differs, and how.
        cause: chitin_registry::manifest::SpecMismatch,
    },
    /// wasmtime refused to compile the component (malformed, truncated, invalid).
    #[error("{path}: not a valid component: {reason}")]
    Compile {
        /// The component file.
        path: PathBuf,
        /// wasmtime's explanation.
        reason: String,
    },
    /// The component's contract (its chitin WIT imports/exports) is not one this host accepts.
    #[error("{path}: {cause}")]
    Contract {
        /// The component file.
        path: PathBuf,
        /// Which interface and version.
        cause: crate::contract::ContractError,
    },
    /// A component of typed exports has one chitin cannot serve as a tool.
    #[error("{path}: {cause}")]
    TypedExport {
        /// The component file.
        path: PathBuf,
        /// Which function, and why.
        cause: crate::typed_exports::TypedExportError,
    },
    /// Linking or the first instantiation failed.
    #[error("{path}: cannot instantiate: {reason}")]
    Instantiate {
        /// The component file.
        path: PathBuf,
        /// wasmtime's or the component's explanation.
        reason: String,
    },
    /// The component's `specs()` returned something the host cannot accept.
    #[error("{path}: tool `{tool}`: {reason}")]
    BadSpec {
        /// The component file.
        path: PathBuf,
        /// The tool whose spec is wrong.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// Two loaded components carry a tool of the same name.
    #[error("tool `{tool}` is carried by both {first} and {second}")]
    DuplicateTool {
        /// The tool name.
        tool: String,
        /// The component loaded first.
        first: PathBuf,
        /// The component loaded second.
        second: PathBuf,
    },
    /// A components directory could not be listed.
    #[error("{path}: cannot list components: {cause}")]
    ListDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
}
