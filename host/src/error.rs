//! Typed errors at the host's boundaries: loading a component, and calling a tool.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Why a tool call failed. Mirrors the WIT `tool-error` variant; the host maps its own refusals
/// (deadline, memory, fuel, caps, schema) onto the same cases so an agent sees one error shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", content = "message", rename_all = "kebab-case")]
pub enum ToolError {
    /// The arguments do not fit the tool's schema or its rules.
    #[error("invalid arguments: {0}")]
    InvalidArgs(String),
    /// The tool, or something the call names, does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The call needs a right that was not granted.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// A path is malformed or leaves the area the tool may touch.
    #[error("invalid path: {0}")]
    InvalidPath(String),
    /// The tool ran and failed, or the sandbox stopped it (trap, memory, fuel).
    #[error("execution failed: {0}")]
    ExecutionFailed(String),
    /// The call ran out of wall-clock time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// Too many calls; the message says when to retry.
    #[error("rate limited: {0}")]
    RateLimited(String),
    /// A service the tool depends on failed.
    #[error("external service failed: {0}")]
    ExternalService(String),
    /// The host itself failed (its database or secret store), not the tool: the operator has
    /// to act, and retrying the call does not help.
    #[error("host fault: {0}")]
    HostFault(String),
}

impl ToolError {
    /// The stable kebab-case name of the case, as in the WIT variant.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidArgs(_) => "invalid-args",
            Self::NotFound(_) => "not-found",
            Self::PermissionDenied(_) => "permission-denied",
            Self::InvalidPath(_) => "invalid-path",
            Self::ExecutionFailed(_) => "execution-failed",
            Self::Timeout(_) => "timeout",
            Self::RateLimited(_) => "rate-limited",
            Self::ExternalService(_) => "external-service",
            Self::HostFault(_) => "host-fault",
        }
    }

    /// The message the case carries.
    pub fn message(&self) -> &str {
        match self {
            Self::InvalidArgs(m)
            | Self::NotFound(m)
            | Self::PermissionDenied(m)
            | Self::InvalidPath(m)
            | Self::ExecutionFailed(m)
            | Self::Timeout(m)
            | Self::RateLimited(m)
            | Self::ExternalService(m)
            | Self::HostFault(m) => m,
        }
    }

    /// The same case with `message` in place of its own.
    pub fn with_message(self, message: String) -> Self {
        match self {
            Self::InvalidArgs(_) => Self::InvalidArgs(message),
            Self::NotFound(_) => Self::NotFound(message),
            Self::PermissionDenied(_) => Self::PermissionDenied(message),
            Self::InvalidPath(_) => Self::InvalidPath(message),
            Self::ExecutionFailed(_) => Self::ExecutionFailed(message),
            Self::Timeout(_) => Self::Timeout(message),
            Self::RateLimited(_) => Self::RateLimited(message),
            Self::ExternalService(_) => Self::ExternalService(message),
            Self::HostFault(_) => Self::HostFault(message),
        }
    }
}

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
        cause: crate::grant::GrantError,
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
