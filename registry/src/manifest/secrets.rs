//! `[capabilities.secrets]`: which secret names the component may ask about. Values never reach
//! a component; the host injects them into HTTP requests.

use serde::{Deserialize, Serialize};

use super::ManifestError;
use super::audit_line::{AuditLine, quoted};

/// Secret name globs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsGrant {
    /// Globs over secret names (`github_*`).
    pub names: Vec<String>,
}

impl SecretsGrant {
    /// Globs are non-empty and parse.
    pub fn validate(&self) -> Result<(), ManifestError> {
        for (i, n) in self.names.iter().enumerate() {
            if n.trim().is_empty() {
                return Err(ManifestError::invalid(
                    format!("capabilities.secrets.names[{i}]"),
                    "must not be empty",
                ));
            }
        }
        self.glob_set().map(drop)
    }

    /// The globs compiled; the error names the one that does not parse.
    pub fn glob_set(&self) -> Result<globset::GlobSet, ManifestError> {
        let mut builder = globset::GlobSetBuilder::new();
        for (i, n) in self.names.iter().enumerate() {
            let glob = globset::Glob::new(n).map_err(|e| {
                ManifestError::invalid(format!("capabilities.secrets.names[{i}]"), e.to_string())
            })?;
            builder.add(glob);
        }
        builder
            .build()
            .map_err(|e| ManifestError::invalid("capabilities.secrets.names", e.to_string()))
    }
}

impl SecretsGrant {
    /// The secret name patterns in plain words.
    pub fn audit_lines(&self) -> Vec<AuditLine> {
        vec![AuditLine {
            name: "secrets",
            scope: format!("names {}", quoted(&self.names)),
            risk: "can use credentials whose names match these patterns".into(),
        }]
    }
}
