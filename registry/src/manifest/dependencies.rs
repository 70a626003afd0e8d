//! `[[dependencies]]`: library components a component needs at load. Each names the library
//! (`namespace/name`), the versions it accepts, and optionally who must have signed it (a
//! publisher, or a key fingerprint). The host resolves every import that no capability covers
//! to one of these, and refuses the component when one is missing, untrusted or incompatible.

use serde::{Deserialize, Serialize};

use super::{ManifestError, check_ident};

/// One library the component needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dependency {
    /// The library's `namespace/name`.
    pub name: String,
    /// The versions accepted (a semver range such as `^0.1`).
    pub version: semver::VersionReq,
    /// The publisher whose trusted key must have signed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// The fingerprint of the key that must have signed it (`SHA256:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl Dependency {
    /// The namespace and name, each an identifier.
    pub fn validate(&self, i: usize) -> Result<(), ManifestError> {
        let field = format!("dependencies[{i}].name");
        let Some((namespace, name)) = self.name.split_once('/') else {
            return Err(ManifestError::invalid(
                field,
                format!("`{}` is not `namespace/name`", self.name),
            ));
        };
        check_ident(&field, namespace)?;
        check_ident(&field, name)
    }

    /// Whether `namespace/name` at `version` is this dependency (signer checks aside).
    pub fn matches(&self, id: &str, version: &semver::Version) -> bool {
        self.name == id && self.version.matches(version)
    }
}

/// A library an author composed into this artifact (`chitin compose`), recorded so an audit
/// shows what is inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComposedPart {
    /// The library's `namespace/name`.
    pub name: String,
    /// Its version.
    pub version: semver::Version,
    /// The content hash of the library artifact composed in.
    pub hash: String,
}

/// What a component is: a tool component (exports `chitin:tool`) or a library that exports
/// other interfaces for tool components to import.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComponentKind {
    /// Carries tools.
    #[default]
    Tool,
    /// Exports interfaces other components import.
    Library,
}

impl ComponentKind {
    /// Whether this is the default (so it is left out when a manifest is written).
    pub fn is_tool(&self) -> bool {
        *self == Self::Tool
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ranges() {
        let dep = Dependency {
            name: "chitin/markdown".into(),
            version: "^0.1".parse().unwrap(),
            publisher: None,
            key: None,
        };
        assert!(dep.validate(0).is_ok());
        assert!(dep.matches("chitin/markdown", &"0.1.4".parse().unwrap()));
        assert!(!dep.matches("chitin/markdown", &"0.2.0".parse().unwrap()));
        assert!(!dep.matches("acme/markdown", &"0.1.0".parse().unwrap()));
        let bad = Dependency {
            name: "markdown".into(),
            ..dep
        };
        let e = bad.validate(2).unwrap_err().to_string();
        assert!(e.contains("dependencies[2].name"), "{e}");
    }
}
