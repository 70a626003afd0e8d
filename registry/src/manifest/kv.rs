//! `[capabilities.kv]`: key-value buckets the component may open. Buckets are the component's
//! own: two components naming the same bucket never see each other's data.

use serde::{Deserialize, Serialize};

use super::{ManifestError, check_ident};

/// Buckets the component may open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvGrant {
    /// Bucket names.
    pub buckets: Vec<String>,
}

impl KvGrant {
    /// Bucket names are identifiers.
    pub fn validate(&self) -> Result<(), ManifestError> {
        for (i, b) in self.buckets.iter().enumerate() {
            check_ident(&format!("capabilities.kv.buckets[{i}]"), b)?;
        }
        Ok(())
    }
}
