//! `[capabilities.process]`: which programs the component may run.

use serde::{Deserialize, Serialize};

use super::ManifestError;

/// Programs and their environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessGrant {
    /// Programs, by absolute path or by name resolved on the host's PATH at load.
    pub programs: Vec<String>,
    /// Extra environment keys the component may set for them.
    #[serde(default)]
    pub env: Vec<String>,
    /// Whether the programs may use the network.
    #[serde(default)]
    pub network: bool,
}

impl ProcessGrant {
    /// At least one program, none empty.
    pub fn validate(&self) -> Result<(), ManifestError> {
        if self.programs.is_empty() {
            return Err(ManifestError::invalid(
                "capabilities.process.programs",
                "is empty: name at least one program, or drop the section",
            ));
        }
        for (i, p) in self.programs.iter().enumerate() {
            if p.trim().is_empty() || p.contains('\0') {
                return Err(ManifestError::invalid(
                    format!("capabilities.process.programs[{i}]"),
                    "must be a program name or absolute path",
                ));
            }
        }
        Ok(())
    }
}
