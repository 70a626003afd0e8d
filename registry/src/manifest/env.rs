//! `[capabilities.env]`: environment variables the component may read through
//! `wasi:cli/environment`. Only the named keys are passed, with the host's values. Keys starting
//! with [`HOST_PREFIX`] are the host's own and never granted: its configuration holds the secrets
//! store's master key and the state database's address, and the host sets such keys itself to
//! tell every component its limits.

use serde::{Deserialize, Serialize};

use super::ManifestError;
use super::audit_line::{AuditLine, quoted};
use crate::capability::Section;
use crate::manifest::Capabilities;
use crate::widening::added;

/// The prefix of the host's own environment keys, which no grant may name.
pub const HOST_PREFIX: &str = "CHITIN_";

/// Environment keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvGrant {
    /// Variable names.
    pub keys: Vec<String>,
}

impl Section for EnvGrant {
    const NAME: &'static str = "env";
    const IMPORTS: &'static [&'static str] = &[];

    fn check(&self, _all: &Capabilities) -> Result<(), ManifestError> {
        self.validate()
    }

    fn widenings(&self, old: Option<&Self>, out: &mut Vec<String>) {
        widen(old, self, out);
    }

    fn audit_lines(&self) -> Vec<AuditLine> {
        EnvGrant::audit_lines(self)
    }
}

/// Each widening from `old` to `new`, as `key: what changed`.
fn widen(old: Option<&EnvGrant>, new: &EnvGrant, out: &mut Vec<String>) {
    let old = old.map(|g| g.keys.as_slice()).unwrap_or_default();
    added("capabilities.env.keys", "env key", old, &new.keys, out);
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
            if k.to_ascii_uppercase().starts_with(HOST_PREFIX) {
                return Err(ManifestError::invalid(
                    format!("capabilities.env.keys[{i}]"),
                    format!(
                        "`{k}` is one of the host's own keys ({HOST_PREFIX}…: its configuration, \
                         such as the secrets store's master key, and what it tells every \
                         component); a component is never granted them"
                    ),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(keys: &[&str]) -> EnvGrant {
        EnvGrant {
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
        }
    }

    #[test]
    fn plain_names_are_granted() {
        grant(&["LANG", "TZ", "MY_CHITIN_FLAG"])
            .validate()
            .expect("plain names");
    }

    #[test]
    fn the_hosts_own_keys_are_refused_in_any_case() {
        for key in [
            "CHITIN_SECRETS_KEY",
            "CHITIN_STATE_URL",
            "chitin_output_bytes",
        ] {
            let err = grant(&["LANG", key]).validate().expect_err(key).to_string();
            assert!(err.contains("capabilities.env.keys[1]"), "{err}");
            assert!(err.contains("host's own keys"), "{err}");
        }
    }
}
