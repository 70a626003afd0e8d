//! The error a tool returns, mirroring the contract's `tool-error` variant.

use std::fmt;

use crate::bindings::chitin::tool::types::ToolError as WitToolError;

/// Why a tool call failed. Each case maps one-to-one onto the WIT `tool-error` variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolError {
    /// The arguments do not fit the tool's schema or its rules.
    InvalidArgs(String),
    /// What the call names does not exist.
    NotFound(String),
    /// The call needs a right that was not granted.
    PermissionDenied(String),
    /// A path is malformed or leaves the area the tool may touch.
    InvalidPath(String),
    /// The tool ran and failed.
    ExecutionFailed(String),
    /// The call ran out of time.
    Timeout,
    /// Too many calls; the text says when to retry.
    RateLimited(String),
    /// A service the tool depends on failed.
    ExternalService(String),
}

impl ToolError {
    /// An [`ToolError::InvalidArgs`] with the given message.
    pub fn invalid_args(message: impl Into<String>) -> Self {
        Self::InvalidArgs(message.into())
    }

    /// A [`ToolError::NotFound`] with the given message.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::NotFound(message.into())
    }

    /// A [`ToolError::PermissionDenied`] with the given message.
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::PermissionDenied(message.into())
    }

    /// A [`ToolError::InvalidPath`] with the given message.
    pub fn invalid_path(message: impl Into<String>) -> Self {
        Self::InvalidPath(message.into())
    }

    /// A [`ToolError::ExecutionFailed`] with the given message.
    pub fn execution_failed(message: impl Into<String>) -> Self {
        Self::ExecutionFailed(message.into())
    }

    /// A [`ToolError::RateLimited`] with the given message.
    pub fn rate_limited(message: impl Into<String>) -> Self {
        Self::RateLimited(message.into())
    }

    /// A [`ToolError::ExternalService`] with the given message.
    pub fn external_service(message: impl Into<String>) -> Self {
        Self::ExternalService(message.into())
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidArgs(m) => write!(f, "invalid arguments: {m}"),
            Self::NotFound(m) => write!(f, "not found: {m}"),
            Self::PermissionDenied(m) => write!(f, "permission denied: {m}"),
            Self::InvalidPath(m) => write!(f, "invalid path: {m}"),
            Self::ExecutionFailed(m) => write!(f, "execution failed: {m}"),
            Self::Timeout => f.write_str("timed out"),
            Self::RateLimited(m) => write!(f, "rate limited: {m}"),
            Self::ExternalService(m) => write!(f, "external service failed: {m}"),
        }
    }
}

impl std::error::Error for ToolError {}

impl From<ToolError> for WitToolError {
    fn from(error: ToolError) -> Self {
        match error {
            ToolError::InvalidArgs(m) => Self::InvalidArgs(m),
            ToolError::NotFound(m) => Self::NotFound(m),
            ToolError::PermissionDenied(m) => Self::PermissionDenied(m),
            ToolError::InvalidPath(m) => Self::InvalidPath(m),
            ToolError::ExecutionFailed(m) => Self::ExecutionFailed(m),
            ToolError::Timeout => Self::Timeout,
            ToolError::RateLimited(m) => Self::RateLimited(m),
            ToolError::ExternalService(m) => Self::ExternalService(m),
        }
    }
}
