//! The operator's registries, by name, in `registries.toml` in the data directory:
//!
//! ```toml
//! default = "lab"                      # optional; otherwise the local registry
//! [registries.lab]
//! url = "oci://registry.example.com/chitin"
//! username = "acme"                    # basic auth, the password from the secret store
//! password_secret = "lab-registry-password"
//! # token_secret = "NAME"              # or a bearer token from the secret store
//! ```
//!
//! `local` always names the embedded default registry under the data directory.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::{Location, StoreError, read_optional};

/// The name of the embedded default registry.
pub const LOCAL: &str = "local";

/// `registries.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistriesConfig {
    /// The registry used when none is named (default: `local`).
    pub default: Option<String>,
    /// The registries, by name.
    #[serde(default)]
    pub registries: BTreeMap<String, RegistryConfig>,
}

/// One configured registry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// `oci://host[:port][/prefix]`, `oci+http://` for a loopback host, or a directory.
    pub url: String,
    /// User name for basic authentication.
    pub username: Option<String>,
    /// The secret holding the basic-auth password.
    pub password_secret: Option<String>,
    /// The secret holding a bearer token.
    pub token_secret: Option<String>,
}

/// How a configured registry authenticates: secret names, resolved by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthRef {
    /// No credentials.
    Anonymous,
    /// Basic: the user and the secret holding the password.
    Basic {
        /// The user name.
        username: String,
        /// The secret's name.
        password_secret: String,
    },
    /// Bearer: the secret holding the token.
    Bearer {
        /// The secret's name.
        token_secret: String,
    },
}

impl RegistriesConfig {
    /// Read `path`; a missing file is an empty configuration.
    pub fn load(path: &Path) -> Result<Self, StoreError> {
        let Some(text) = read_optional(path)? else {
            return Ok(Self::default());
        };
        let config: Self = toml::from_str(&text)
            .map_err(|e| StoreError::Location(format!("configuration {}: {e}", path.display())))?;
        for (name, registry) in &config.registries {
            registry.auth().map_err(|why| {
                StoreError::Location(format!("`{name}` in {}: {why}", path.display()))
            })?;
            registry.url.parse::<Location>()?;
        }
        Ok(config)
    }

    /// The name of the registry used when none is given.
    pub fn default_name(&self) -> &str {
        self.default.as_deref().unwrap_or(LOCAL)
    }
}

impl RegistryConfig {
    /// Its authentication, checked for consistency.
    pub fn auth(&self) -> Result<AuthRef, String> {
        match (&self.username, &self.password_secret, &self.token_secret) {
            (None, None, None) => Ok(AuthRef::Anonymous),
            (Some(username), Some(password_secret), None) => Ok(AuthRef::Basic {
                username: username.clone(),
                password_secret: password_secret.clone(),
            }),
            (None, None, Some(token_secret)) => Ok(AuthRef::Bearer {
                token_secret: token_secret.clone(),
            }),
            _ => Err(
                "give `username` with `password_secret` (basic), or `token_secret` \
                      (bearer), or neither (anonymous)"
                    .into(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries_parse_with_their_auth() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registries.toml");
        assert_eq!(RegistriesConfig::load(&path).unwrap().default_name(), LOCAL);
        std::fs::write(
            &path,
            "default = \"lab\"\n[registries.lab]\nurl = \"oci://r.example.com/x\"\nusername = \"u\"\npassword_secret = \"p\"\n[registries.open]\nurl = \"oci://r2.example.com\"\n",
        )
        .unwrap();
        let config = RegistriesConfig::load(&path).unwrap();
        assert_eq!(config.default_name(), "lab");
        assert_eq!(
            config.registries["lab"].auth().unwrap(),
            AuthRef::Basic {
                username: "u".into(),
                password_secret: "p".into()
            }
        );
        assert_eq!(
            config.registries["open"].auth().unwrap(),
            AuthRef::Anonymous
        );
        std::fs::write(
            &path,
            "[registries.bad]\nurl = \"oci://x\"\nusername = \"u\"\n",
        )
        .unwrap();
        let err = RegistriesConfig::load(&path).unwrap_err().to_string();
        assert!(err.contains("password_secret"), "{err}");
    }
}
