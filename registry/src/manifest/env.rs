//! `[capabilities.env]`: environment variables the component may read through
//! `wasi:cli/environment`. Only the named keys are passed, with the host's values.

use serde::{Deserialize, Serialize};

use super::ManifestError;
use super::audit_line::{AuditLine, quoted};

/// Environment keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvGrant {
    /// Variable names.
    pub keys: Vec<String>,
}

impl EnvGrant {
    /// Keys are plain variable names.
    pub fn validate(&self) -> Result<(), ManifestError> {
        for (i, k) in self.keys.iter().enumerate() {
            let ok = !k.is_empty()
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !k.starts_with(|c: char| c.is_ascii_digit());
            if !ok {
                return Err(ManifestError::invalid(
                    format!("capabilities.env.keys[{i}]"),
                    format!("`{k}` is not an environment variable name"),
                ));
            }
        }
        Ok(())
    }
}

impl EnvGrant {
    /// The environment keys in plain words.
    pub fn audit_lines(&self) -> Vec<AuditLine> {
        vec![AuditLine {
            name: "env",
            scope: format!("keys {}", quoted(&self.keys)),
            risk: "can read these environment variables of the host".into(),
        }]
    }
}
