//! `[capabilities.kv]`: key-value buckets the component may open. Buckets are the component's
//! own: two components naming the same bucket never see each other's data.

use serde::{Deserialize, Serialize};

use super::audit_line::{AuditLine, quoted};
use super::{ManifestError, check_ident};

/// Buckets the component may open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvGrant {
    /// Bucket names.
    pub buckets: Vec<String>,
    /// The most bytes (keys plus values, all buckets) the component may store; the operator's
    /// policy caps it, and a manifest that asks for nothing gets the policy's ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

impl KvGrant {
    /// At least one bucket; each an identifier, listed once.
    pub fn validate(&self) -> Result<(), ManifestError> {
        if self.buckets.is_empty() {
            return Err(ManifestError::invalid(
                "capabilities.kv.buckets",
                "is empty: name at least one bucket, or drop the section",
            ));
        }
        if self.max_bytes == Some(0) {
            return Err(ManifestError::invalid(
                "capabilities.kv.max_bytes",
                "is 0: ask for at least one byte, or drop the key-value grant",
            ));
        }
        for (i, b) in self.buckets.iter().enumerate() {
            let field = format!("capabilities.kv.buckets[{i}]");
            check_ident(&field, b)?;
            if self.buckets[..i].contains(b) {
                return Err(ManifestError::invalid(
                    field,
                    format!("`{b}` is listed twice"),
                ));
            }
        }
        Ok(())
    }
}

impl KvGrant {
    /// The buckets in plain words.
    pub fn audit_lines(&self) -> Vec<AuditLine> {
        vec![AuditLine {
            name: "kv",
            scope: format!("buckets {}", quoted(&self.buckets)),
            risk: "can keep data between calls in its own buckets".into(),
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(buckets: &[&str]) -> KvGrant {
        KvGrant {
            buckets: buckets.iter().map(|b| (*b).to_owned()).collect(),
            max_bytes: None,
        }
    }

    #[test]
    fn empty_duplicate_and_malformed_buckets_are_refused() {
        assert!(grant(&[]).validate().is_err());
        assert!(grant(&["memory", "memory"]).validate().is_err());
        assert!(grant(&["a/b"]).validate().is_err());
        assert!(grant(&["memory", "cache"]).validate().is_ok());
        let mut zero = grant(&["memory"]);
        zero.max_bytes = Some(0);
        assert!(zero.validate().is_err());
    }
}
