//! Why a tool call failed: the one error shape an agent sees, whoever refused the call.

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
