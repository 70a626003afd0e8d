//! The operator's policy: for now, the per-call limits. Strict TOML: an unknown key is an error
//! that names it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::limits::Limits;

/// The policy schema version this host reads.
pub const POLICY_SCHEMA: u32 = 1;

/// The policy shipped with chitin (`policies/default.toml`), used when none is given.
pub const DEFAULT_POLICY: &str = include_str!("../../policies/default.toml");

/// The operator's policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Schema version; must be [`POLICY_SCHEMA`].
    pub schema: u32,
    /// Per-call limits.
    pub limits: Limits,
    /// Whether granted programs may run without Landlock where the kernel lacks it (off: such
    /// a host refuses to start processes).
    #[serde(default)]
    pub allow_unconfined_processes: bool,
}

/// A policy file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("policy {path}: cannot read: {cause}")]
    Read {
        /// The policy file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The TOML is malformed, has an unknown key, or lacks a required one.
    #[error("policy {path}: {message}")]
    Parse {
        /// The policy file.
        path: PathBuf,
        /// The parser's message, naming the key and line.
        message: String,
    },
    /// The schema version is not one this host reads.
    #[error(
        "policy {path}: schema {found} is not supported (this host reads schema {POLICY_SCHEMA})"
    )]
    Schema {
        /// The policy file.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
    /// A limit is zero or out of range.
    #[error("policy {path}: {message}")]
    Invalid {
        /// The policy file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl Policy {
    /// The built-in default policy.
    pub fn builtin() -> Result<Self, PolicyError> {
        Self::parse(
            DEFAULT_POLICY,
            Path::new("<built-in policies/default.toml>"),
        )
    }

    /// Read a policy file.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|cause| PolicyError::Read {
            path: path.to_owned(),
            cause,
        })?;
        Self::parse(&text, path)
    }

    /// Parse policy text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, PolicyError> {
        let policy: Policy = toml::from_str(text).map_err(|e| PolicyError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        if policy.schema != POLICY_SCHEMA {
            return Err(PolicyError::Schema {
                path: path.to_owned(),
                found: policy.schema,
            });
        }
        let l = &policy.limits;
        let zero = [
            ("memory_bytes", l.memory_bytes as u64),
            ("fuel", l.fuel),
            ("timeout_ms", l.timeout_ms),
            ("output_bytes", l.output_bytes as u64),
            ("log_entry_bytes", l.log_entry_bytes as u64),
        ]
        .into_iter()
        .find(|(_, v)| *v == 0);
        if let Some((key, _)) = zero {
            return Err(PolicyError::Invalid {
                path: path.to_owned(),
                message: format!("limits.{key} must be greater than zero"),
            });
        }
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_policy_parses_to_the_documented_defaults() {
        let policy = Policy::builtin().expect("built-in policy");
        assert_eq!(policy.limits, Limits::default());
    }

    #[test]
    fn an_unknown_key_is_an_error_naming_it() {
        let text = DEFAULT_POLICY.replace("fuel =", "fule =");
        let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("fule"), "{err}");
    }

    #[test]
    fn an_unsupported_schema_is_refused() {
        let text = DEFAULT_POLICY.replace("schema = 1", "schema = 9");
        let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(matches!(err, PolicyError::Schema { found: 9, .. }), "{err}");
    }

    #[test]
    fn a_zero_limit_is_refused() {
        let text = DEFAULT_POLICY.replace("timeout_ms = 30000", "timeout_ms = 0");
        let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("timeout_ms"), "{err}");
    }
}
