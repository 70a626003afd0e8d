//! `[capabilities.secrets]`: which secret names the component may ask about. Values never reach
//! a component; the host injects them into HTTP requests.

use serde::{Deserialize, Serialize};

use super::ManifestError;
use super::audit_line::{AuditLine, quoted};
use crate::capability::Section;
use crate::manifest::Capabilities;

/// Secret name globs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsGrant {
    /// Globs over secret names (`github_*`).
    pub names: Vec<String>,
}

impl Section for SecretsGrant {
    const NAME: &'static str = "secrets";
    const IMPORTS: &'static [&'static str] = &["chitin:host/secrets"];

    fn check(&self, _all: &Capabilities) -> Result<(), ManifestError> {
        self.validate()
    }

    fn widenings(&self, old: Option<&Self>, out: &mut Vec<String>) {
        widen(old, self, out);
    }

    fn audit_lines(&self) -> Vec<AuditLine> {
        SecretsGrant::audit_lines(self)
    }
}

/// Each widening from `old` to `new`, as `key: what changed`.
fn widen(old: Option<&SecretsGrant>, new: &SecretsGrant, out: &mut Vec<String>) {
    let names = old.map(|g| g.names.as_slice()).unwrap_or_default();
    // A plain name an old glob already matched is no wider; any other new glob is.
    let globs = old.and_then(|g| g.glob_set().ok());
    for name in &new.names {
        let plain = !name.contains(['*', '?', '[', '{']);
        let matched = plain && globs.as_ref().is_some_and(|g| g.is_match(name));
        if !names.contains(name) && !matched {
            out.push(format!(
                "capabilities.secrets.names: adds secret glob `{name}`"
            ));
        }
    }
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
