//! `[capabilities.http]`: where the component may send HTTP requests.

use serde::{Deserialize, Serialize};

use super::ManifestError;
use super::credentials::CredentialMapping;

/// Outbound HTTP the component may make. An empty allowlist allows nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpGrant {
    /// Allowed destinations.
    #[serde(default)]
    pub allow: Vec<HttpAllow>,
    /// Secrets the host injects into requests (`[[capabilities.http.credentials]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<CredentialMapping>,
}

/// One allowed destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpAllow {
    /// Host name, exact or `*.suffix`.
    pub host: String,
    /// Path prefix, matched on segment boundaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
    /// Allowed methods; empty means GET only.
    #[serde(default)]
    pub methods: Vec<String>,
}

impl HttpGrant {
    /// Hosts are non-empty.
    pub fn validate(&self) -> Result<(), ManifestError> {
        for (i, a) in self.allow.iter().enumerate() {
            if a.host.trim().is_empty() {
                return Err(ManifestError::invalid(
                    format!("capabilities.http.allow[{i}].host"),
                    "must not be empty",
                ));
            }
        }
        Ok(())
    }
}
