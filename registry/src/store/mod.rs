//! Registries that components are published to and installed from: a local directory (the
//! embedded default) and OCI registries. Both keep an index — one JSON document listing every
//! published version with what a search needs — beside the artifacts.

pub mod config;
pub mod local;
pub mod oci;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// The index format this build reads and writes.
pub const INDEX_SCHEMA: u32 = 1;

/// One published version of a component, as a registry's index lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// `namespace/name`.
    pub name: String,
    /// Its version.
    pub version: semver::Version,
    /// What it is for (from its manifest).
    #[serde(default)]
    pub description: String,
    /// Who publishes it (from its manifest).
    pub publisher: String,
    /// The tools it carries, as the component names them.
    #[serde(default)]
    pub tools: Vec<String>,
    /// `sha256:<hex>` of the file: the OCI layer digest.
    pub digest: String,
    /// `blake3:<hex>` of the file: chitin's content hash.
    pub hash: String,
    /// Size of the file in bytes.
    pub size: u64,
    /// Fingerprints of the keys whose signatures it carries.
    pub signers: Vec<String>,
    /// `blake3:<hex>` of its manifest text.
    pub manifest_hash: String,
}

impl Entry {
    /// `namespace/name@version`.
    pub fn label(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}

/// Every version a registry has published.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Index {
    /// The index format ([`INDEX_SCHEMA`]).
    pub schema: u32,
    /// The published versions, sorted by name then version.
    pub entries: Vec<Entry>,
}

impl Index {
    /// An empty index.
    pub fn new() -> Self {
        Self {
            schema: INDEX_SCHEMA,
            entries: Vec::new(),
        }
    }

    /// Parse an index document.
    pub fn parse(text: &[u8]) -> Result<Self, String> {
        let index: Self = serde_json::from_slice(text).map_err(|e| e.to_string())?;
        if index.schema != INDEX_SCHEMA {
            return Err(format!(
                "index schema {} is not the {INDEX_SCHEMA} this chitin reads",
                index.schema
            ));
        }
        Ok(index)
    }

    /// The document, as JSON.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Add `entry`, replacing the same name and version.
    pub fn upsert(&mut self, entry: Entry) {
        self.entries
            .retain(|e| !(e.name == entry.name && e.version == entry.version));
        self.entries.push(entry);
        self.entries
            .sort_by(|a, b| a.name.cmp(&b.name).then(a.version.cmp(&b.version)));
    }

    /// The entry for `name` at `version`.
    pub fn find(&self, name: &str, version: &semver::Version) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.name == name && &e.version == version)
    }

    /// Every published version of `name`, oldest first.
    pub fn versions(&self, name: &str) -> Vec<&Entry> {
        self.entries.iter().filter(|e| e.name == name).collect()
    }

    /// The newest release of `name` (pre-releases only when there is nothing else).
    pub fn latest(&self, name: &str) -> Option<&Entry> {
        let versions = self.versions(name);
        versions
            .iter()
            .filter(|e| e.version.pre.is_empty())
            .max_by(|a, b| a.version.cmp(&b.version))
            .or_else(|| versions.iter().max_by(|a, b| a.version.cmp(&b.version)))
            .copied()
    }

    /// The newest version of each component whose name, description, tools or publisher
    /// contain `query` (case-insensitive; an empty query matches everything).
    pub fn search(&self, query: &str) -> Vec<&Entry> {
        let query = query.to_lowercase();
        let mut names: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
        names.dedup();
        names
            .into_iter()
            .filter_map(|name| self.latest(name))
            .filter(|e| {
                e.name.to_lowercase().contains(&query)
                    || e.description.to_lowercase().contains(&query)
                    || e.publisher.to_lowercase().contains(&query)
                    || e.tools.iter().any(|t| t.to_lowercase().contains(&query))
            })
            .collect()
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let digest = sha2::Sha256::digest(bytes);
    let mut hex = String::with_capacity(71);
    hex.push_str("sha256:");
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// Where a registry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local directory laid out `<root>/<namespace>/<name>/<version>.wasm`, with `index.json`.
    Local(PathBuf),
    /// An OCI registry.
    Oci {
        /// `host[:port]`.
        registry: String,
        /// Repository prefix (`org/team`), if any.
        prefix: Option<String>,
        /// Plain HTTP (only for loopback hosts).
        plain_http: bool,
    },
}

impl FromStr for Location {
    type Err = StoreError;

    /// `oci://host[:port][/prefix]`, `oci+http://host:port[/prefix]` (loopback only), or a
    /// directory path.
    fn from_str(text: &str) -> Result<Self, StoreError> {
        let bad = |why: &str| StoreError::Location(format!("{text:?}: {why}"));
        let (rest, plain_http) = if let Some(rest) = text.strip_prefix("oci://") {
            (rest, false)
        } else if let Some(rest) = text.strip_prefix("oci+http://") {
            (rest, true)
        } else if text.contains("://") {
            return Err(bad(
                "a registry is `oci://host[:port][/prefix]`, `oci+http://127.0.0.1:PORT` or a \
                 directory path",
            ));
        } else if text.is_empty() {
            return Err(bad("empty"));
        } else {
            return Ok(Self::Local(PathBuf::from(text)));
        };
        let (registry, prefix) = match rest.split_once('/') {
            Some((host, prefix)) => (host, Some(prefix.trim_end_matches('/'))),
            None => (rest, None),
        };
        if registry.is_empty() || registry.contains('@') {
            return Err(bad(
                "no host, or credentials in the address (configure them instead)",
            ));
        }
        if plain_http && !is_loopback_host(registry) {
            return Err(bad(
                "plain HTTP (`oci+http://`) is only allowed to a loopback host (127.0.0.1, ::1, \
                 localhost); use `oci://` (HTTPS)",
            ));
        }
        let prefix = prefix.filter(|p| !p.is_empty());
        if let Some(p) = prefix
            && !p.split('/').all(is_repository_part)
        {
            return Err(bad(
                "the repository prefix must be lower-case path components ([a-z0-9._-])",
            ));
        }
        Ok(Self::Oci {
            registry: registry.to_owned(),
            prefix: prefix.map(str::to_owned),
            plain_http,
        })
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local(path) => write!(f, "{}", path.display()),
            Self::Oci {
                registry,
                prefix,
                plain_http,
            } => {
                let scheme = if *plain_http { "oci+http" } else { "oci" };
                match prefix {
                    Some(p) => write!(f, "{scheme}://{registry}/{p}"),
                    None => write!(f, "{scheme}://{registry}"),
                }
            }
        }
    }
}

fn is_loopback_host(host_port: &str) -> bool {
    let host = match host_port.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn is_repository_part(part: &str) -> bool {
    !part.is_empty()
        && part
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
}

/// How to authenticate to an OCI registry.
#[derive(Clone, Default)]
pub enum Auth {
    /// No credentials.
    #[default]
    Anonymous,
    /// HTTP basic authentication.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// A bearer token.
    Bearer(String),
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Anonymous => f.write_str("Anonymous"),
            Self::Basic { username, .. } => write!(f, "Basic({username}, ***)"),
            Self::Bearer(_) => f.write_str("Bearer(***)"),
        }
    }
}

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The registry reference cannot be read.
    #[error("registry {0}")]
    Location(String),
    /// The registry cannot be reached.
    #[error("cannot reach registry {registry}: {reason}")]
    Unreachable {
        /// The registry.
        registry: String,
        /// What failed.
        reason: String,
    },
    /// The registry refused the credentials.
    #[error(
        "registry {registry} refused access: {reason} (check the username and the secret \
         configured for it in registries.toml)"
    )]
    Auth {
        /// The registry.
        registry: String,
        /// What it said.
        reason: String,
    },
    /// Nothing by that name or version.
    #[error("{what} is not in registry {registry}")]
    NotFound {
        /// The registry.
        registry: String,
        /// What was asked for.
        what: String,
    },
    /// The bytes received are not the ones the index names.
    #[error(
        "{what} from registry {registry}: digest mismatch (the index says {expected}, the \
         download is {found}); nothing was installed"
    )]
    DigestMismatch {
        /// The registry.
        registry: String,
        /// The artifact.
        what: String,
        /// The digest expected.
        expected: String,
        /// The digest of what arrived.
        found: String,
    },
    /// Publishing a version that exists with other content.
    #[error(
        "{what} is already published in registry {registry} with other content ({existing}); \
         publish a new version (or pass --replace to overwrite it, which installs pinned to the \
         old content will refuse)"
    )]
    VersionExists {
        /// The registry.
        registry: String,
        /// The artifact.
        what: String,
        /// The digest published.
        existing: String,
    },
    /// The registry served something malformed.
    #[error("registry {registry} served something malformed: {reason}")]
    Malformed {
        /// The registry.
        registry: String,
        /// What was wrong.
        reason: String,
    },
    /// A local file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Any other registry error.
    #[error("registry {registry}: {reason}")]
    Other {
        /// The registry.
        registry: String,
        /// What failed.
        reason: String,
    },
}

/// A registry, ready for use.
pub enum Registry {
    /// A local directory.
    Local(local::LocalRegistry),
    /// An OCI registry.
    Oci(oci::OciRegistry),
}

impl Registry {
    /// Open the registry at `location`; `name` is how it is shown.
    pub fn open(name: &str, location: &Location, auth: Auth) -> Result<Self, StoreError> {
        Ok(match location {
            Location::Local(root) => Self::Local(local::LocalRegistry::new(name, root)),
            Location::Oci { .. } => Self::Oci(oci::OciRegistry::new(name, location, auth)?),
        })
    }

    /// How the registry is shown in messages.
    pub fn name(&self) -> &str {
        match self {
            Self::Local(r) => r.name(),
            Self::Oci(r) => r.name(),
        }
    }

    /// Its index (empty when nothing was published yet).
    pub async fn index(&self) -> Result<Index, StoreError> {
        match self {
            Self::Local(r) => r.index(),
            Self::Oci(r) => r.index().await,
        }
    }

    /// Publish `bytes` as `entry`. The same version with other content is refused unless
    /// `replace`.
    pub async fn publish(
        &self,
        bytes: &[u8],
        entry: Entry,
        replace: bool,
    ) -> Result<(), StoreError> {
        match self {
            Self::Local(r) => r.publish(bytes, entry, replace),
            Self::Oci(r) => r.publish(bytes, entry, replace).await,
        }
    }

    /// Download the artifact of `entry`, checked against its digest.
    pub async fn fetch(&self, entry: &Entry) -> Result<Vec<u8>, StoreError> {
        let bytes = match self {
            Self::Local(r) => r.fetch(entry)?,
            Self::Oci(r) => r.fetch(entry).await?,
        };
        let found = sha256_digest(&bytes);
        if found != entry.digest {
            return Err(StoreError::DigestMismatch {
                registry: self.name().to_owned(),
                what: entry.label(),
                expected: entry.digest.clone(),
                found,
            });
        }
        Ok(bytes)
    }
}

/// The text of `path`, or `None` when it does not exist.
pub fn read_optional(path: &std::path::Path) -> Result<Option<String>, StoreError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Refuse publishing `entry` over an existing version with other content, unless `replace`.
fn check_overwrite(
    registry: &str,
    index: &Index,
    entry: &Entry,
    replace: bool,
) -> Result<(), StoreError> {
    match index.find(&entry.name, &entry.version) {
        Some(existing) if existing.digest != entry.digest && !replace => {
            Err(StoreError::VersionExists {
                registry: registry.to_owned(),
                what: entry.label(),
                existing: existing.digest.clone(),
            })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, version: &str, tools: &[&str]) -> Entry {
        Entry {
            name: name.into(),
            version: version.parse().unwrap(),
            description: format!("{name} does things"),
            publisher: "acme".into(),
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            digest: "sha256:00".into(),
            hash: "blake3:00".into(),
            size: 1,
            signers: vec![],
            manifest_hash: "blake3:00".into(),
        }
    }

    #[test]
    fn latest_prefers_releases_and_search_matches_every_field() {
        let mut index = Index::new();
        index.upsert(entry("acme/words", "1.0.0", &["word_count"]));
        index.upsert(entry("acme/words", "1.2.0", &["word_count"]));
        index.upsert(entry("acme/words", "2.0.0-beta.1", &["word_count"]));
        index.upsert(entry("other/zip", "0.1.0", &["unzip"]));
        assert_eq!(
            index.latest("acme/words").unwrap().version.to_string(),
            "1.2.0"
        );
        let names =
            |q: &str| -> Vec<String> { index.search(q).iter().map(|e| e.label()).collect() };
        assert_eq!(names("WORD_COUNT"), ["acme/words@1.2.0"]);
        assert_eq!(names("unzip"), ["other/zip@0.1.0"]);
        assert_eq!(names("acme").len(), 2, "publisher matches");
        assert_eq!(names("does things").len(), 2, "description matches");
        assert!(names("nothing-like-it").is_empty());
        let reparsed = Index::parse(&index.to_json()).unwrap();
        assert_eq!(reparsed, index);
    }

    #[test]
    fn locations_parse_and_plain_http_is_loopback_only() {
        assert_eq!(
            "oci://ghcr.io/acme/tools".parse::<Location>().unwrap(),
            Location::Oci {
                registry: "ghcr.io".into(),
                prefix: Some("acme/tools".into()),
                plain_http: false
            }
        );
        assert!("oci+http://127.0.0.1:5000".parse::<Location>().is_ok());
        assert!("oci+http://[::1]:5000".parse::<Location>().is_ok());
        let err = "oci+http://registry.example.com"
            .parse::<Location>()
            .unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
        assert!("https://x".parse::<Location>().is_err());
        assert!("oci://user:pw@host".parse::<Location>().is_err());
        assert_eq!(
            "/srv/registry".parse::<Location>().unwrap(),
            Location::Local("/srv/registry".into())
        );
        assert_eq!(sha256_digest(b"").len(), 71);
    }
}
