//! The trust store: which keys may sign which components. One OpenSSH-style line per key:
//!
//! ```text
//! # key                                  publisher  scope (comma-separated)
//! ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA…  acme       acme/*,tools/weather
//! ```
//!
//! A scope is `*` (any component), `namespace/*` (every component of a namespace) or
//! `namespace/name` (one component). `#` starts a comment line.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::keys::{KeyId, PublicKey};
use crate::manifest::ident;

/// The trust store could not be read, parsed or changed.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// A line that is not `<key> <publisher> <scope>`.
    #[error("{}:{line}: {message}", path.display())]
    Line {
        /// The trust store file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A publisher name or scope given to `add` is not valid.
    #[error("{0}")]
    Invalid(String),
    /// `add` with a key that is already trusted.
    #[error("key {fingerprint} is already trusted (publisher {publisher}); remove it first")]
    Duplicate {
        /// The key's fingerprint.
        fingerprint: String,
        /// The publisher it is trusted as.
        publisher: String,
    },
    /// `remove` matched nothing.
    #[error("no trusted key matches {0:?} (give a fingerprint, key id or publisher name)")]
    NoMatch(String),
    /// File-system failure.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The trust store file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
}

/// What a key may sign.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `*`: any component.
    Any,
    /// `namespace/*`: every component of a namespace.
    Namespace(String),
    /// `namespace/name`: one component.
    Component {
        /// The namespace.
        namespace: String,
        /// The component name.
        name: String,
    },
}

impl Scope {
    /// Parse `*`, `namespace/*` or `namespace/name`.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text == "*" {
            return Ok(Self::Any);
        }
        let Some((namespace, name)) = text.split_once('/') else {
            return Err(format!(
                "scope {text:?} is not `*`, `namespace/*` or `namespace/name`"
            ));
        };
        check_ident("namespace", namespace)?;
        if name == "*" {
            return Ok(Self::Namespace(namespace.to_owned()));
        }
        check_ident("component name", name)?;
        Ok(Self::Component {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }

    /// Whether this scope covers the component `namespace/name`.
    pub fn covers(&self, namespace: &str, name: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Namespace(ns) => ns == namespace,
            Self::Component {
                namespace: ns,
                name: n,
            } => ns == namespace && n == name,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Any => f.write_str("*"),
            Self::Namespace(ns) => write!(f, "{ns}/*"),
            Self::Component { namespace, name } => write!(f, "{namespace}/{name}"),
        }
    }
}

/// Names of publishers, namespaces and components: an identifier ([`ident::check`]), the
/// same rule a manifest's names follow.
fn check_ident(what: &str, text: &str) -> Result<(), String> {
    ident::check(text).map_err(|e| format!("{what} {text:?} {e}"))
}

/// One trusted key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedKey {
    /// The key.
    pub key: PublicKey,
    /// Who it belongs to.
    pub publisher: String,
    /// What it may sign.
    pub scopes: Vec<Scope>,
}

impl TrustedKey {
    /// A trusted key; `publisher` and every scope are checked.
    pub fn new(key: PublicKey, publisher: &str, scopes: Vec<Scope>) -> Result<Self, TrustError> {
        check_ident("publisher", publisher).map_err(TrustError::Invalid)?;
        if scopes.is_empty() {
            return Err(TrustError::Invalid("a trusted key needs a scope".into()));
        }
        Ok(Self {
            key,
            publisher: publisher.to_owned(),
            scopes,
        })
    }

    /// Whether the key may sign the component `namespace/name`.
    pub fn covers(&self, namespace: &str, name: &str) -> bool {
        self.scopes.iter().any(|s| s.covers(namespace, name))
    }

    /// The scopes as written in the file (`a/*,b/c`).
    pub fn scope_text(&self) -> String {
        self.scopes
            .iter()
            .map(Scope::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The line as written in the trust store.
    pub fn to_line(&self) -> String {
        format!(
            "{} {} {}",
            self.key.to_openssh(),
            self.publisher,
            self.scope_text()
        )
    }

    fn matches(&self, selector: &str) -> bool {
        selector == self.key.fingerprint()
            || selector == self.key.key_id().to_string()
            || selector == self.publisher
            || selector == self.key.to_openssh()
    }
}

/// The set of trusted keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustStore {
    keys: Vec<TrustedKey>,
}

impl TrustStore {
    /// An empty store: nothing is trusted.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Parse trust-store text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, TrustError> {
        let mut store = Self::empty();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |message: String| TrustError::Line {
                path: path.to_owned(),
                line: index + 1,
                message,
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [kind, blob, publisher, scope] = fields[..] else {
                return Err(fail(format!(
                    "expected `<key type> <key> <publisher> <scope>`, found {} fields",
                    fields.len()
                )));
            };
            let key = PublicKey::from_openssh(&format!("{kind} {blob}"))
                .map_err(|e| fail(e.to_string()))?;
            let scopes = scope
                .split(',')
                .map(Scope::parse)
                .collect::<Result<Vec<_>, _>>()
                .map_err(fail)?;
            let entry = TrustedKey::new(key, publisher, scopes).map_err(|e| fail(e.to_string()))?;
            if let Some(earlier) = store.get(&entry.key) {
                return Err(fail(format!(
                    "key {} is listed twice (also for publisher {})",
                    entry.key.fingerprint(),
                    earlier.publisher
                )));
            }
            store.keys.push(entry);
        }
        Ok(store)
    }

    /// Read the trust store file; a missing file is an empty store.
    pub fn load(path: &Path) -> Result<Self, TrustError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::empty()),
            Err(cause) => Err(TrustError::Io {
                path: path.to_owned(),
                cause,
            }),
        }
    }

    /// Write the store to `path` (replacing it atomically).
    pub fn save(&self, path: &Path) -> Result<(), TrustError> {
        let io = |cause| TrustError::Io {
            path: path.to_owned(),
            cause,
        };
        let mut text = String::from("# chitin trusted keys: <key> <publisher> <scope,...>\n");
        for key in &self.keys {
            text.push_str(&key.to_line());
            text.push('\n');
        }
        // A temporary file of its own, so two processes saving at once never write into one.
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .suffix(".part")
            .tempfile_in(dir)
            .map_err(io)?;
        std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(io)?;
        tmp.persist(path).map_err(|e| io(e.error))?;
        Ok(())
    }

    /// Trust a key; refuses a key already trusted.
    pub fn add(&mut self, entry: TrustedKey) -> Result<(), TrustError> {
        if let Some(existing) = self.get(&entry.key) {
            return Err(TrustError::Duplicate {
                fingerprint: entry.key.fingerprint(),
                publisher: existing.publisher.clone(),
            });
        }
        self.keys.push(entry);
        Ok(())
    }

    /// Stop trusting every key matching `selector` (fingerprint, key id, publisher or OpenSSH
    /// key); returns the removed entries.
    pub fn remove(&mut self, selector: &str) -> Result<Vec<TrustedKey>, TrustError> {
        let selector = selector.trim();
        let (removed, kept) = std::mem::take(&mut self.keys)
            .into_iter()
            .partition::<Vec<_>, _>(|k| k.matches(selector));
        self.keys = kept;
        if removed.is_empty() {
            return Err(TrustError::NoMatch(selector.to_owned()));
        }
        Ok(removed)
    }

    /// The entry for `key`, if trusted.
    pub fn get(&self, key: &PublicKey) -> Option<&TrustedKey> {
        self.keys.iter().find(|k| &k.key == key)
    }

    /// The entry whose key has id `id`, if any.
    pub fn by_key_id(&self, id: &KeyId) -> Option<&TrustedKey> {
        self.keys.iter().find(|k| &k.key.key_id() == id)
    }

    /// Every trusted key, in file order.
    pub fn keys(&self) -> &[TrustedKey] {
        &self.keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::SigningKey;

    fn line(publisher: &str, scope: &str) -> (SigningKey, String) {
        let key = SigningKey::generate();
        let text = format!("{} {publisher} {scope}", key.public().to_openssh());
        (key, text)
    }

    #[test]
    fn parses_keys_publishers_and_scopes() {
        let (a, la) = line("acme", "acme/*,tools/weather");
        let (b, lb) = line("chitin", "chitin/*");
        let text = format!("# comment\n\n{la}\n  {lb}  \n");
        let store = TrustStore::parse(&text, Path::new("trusted_keys")).unwrap();
        assert_eq!(store.keys().len(), 2);
        let acme = store.get(a.public()).unwrap();
        assert_eq!(acme.publisher, "acme");
        assert!(acme.covers("acme", "anything"));
        assert!(acme.covers("tools", "weather"));
        assert!(!acme.covers("tools", "other"));
        assert!(!acme.covers("chitin", "fs"));
        assert!(store.get(b.public()).unwrap().covers("chitin", "fs"));
        assert_eq!(TrustStore::parse(&text, Path::new("t")).unwrap(), store);
    }

    #[test]
    fn errors_name_the_line() {
        let (_, good) = line("acme", "acme/*");
        let cases = [
            ("ssh-ed25519 AAAA acme", "found 3 fields"),
            ("ssh-rsa AAAAB3NzaC1yc2E acme acme/*", "ssh-rsa"),
            (&good.replace("acme/*", "acme"), "scope \"acme\""),
            (&good.replace("acme/*", "Acme/*"), "namespace \"Acme\""),
            (&good.replace(" acme ", " ACME "), "publisher \"ACME\""),
        ];
        for (bad, expected) in cases {
            let text = format!("# header\n{good}\n{bad}\n");
            let err = TrustStore::parse(&text, Path::new("trusted_keys")).unwrap_err();
            let msg = err.to_string();
            assert!(msg.starts_with("trusted_keys:3: "), "{msg}");
            assert!(msg.contains(expected), "{msg} lacks {expected}");
        }
    }

    #[test]
    fn a_key_listed_twice_is_an_error() {
        let (_, l) = line("acme", "acme/*");
        let err = TrustStore::parse(&format!("{l}\n{l}\n"), Path::new("t")).unwrap_err();
        assert!(err.to_string().contains("t:2: "), "{err}");
    }

    #[test]
    fn add_remove_save_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trusted_keys");
        assert!(TrustStore::load(&path).unwrap().keys().is_empty());
        let key = SigningKey::generate();
        let mut store = TrustStore::empty();
        let entry = TrustedKey::new(
            key.public().clone(),
            "acme",
            vec![Scope::parse("acme/*").unwrap()],
        )
        .unwrap();
        store.add(entry.clone()).unwrap();
        assert!(matches!(
            store.add(entry),
            Err(TrustError::Duplicate { .. })
        ));
        store.save(&path).unwrap();
        let mut loaded = TrustStore::load(&path).unwrap();
        assert_eq!(loaded, store);
        let removed = loaded.remove(&key.public().fingerprint()).unwrap();
        assert_eq!(removed.len(), 1);
        assert!(matches!(loaded.remove("acme"), Err(TrustError::NoMatch(_))));
    }

    #[test]
    fn scopes_print_as_parsed() {
        for text in ["*", "acme/*", "acme/weather"] {
            assert_eq!(Scope::parse(text).unwrap().to_string(), text);
        }
        assert!(Scope::parse("acme/").is_err());
        assert!(Scope::parse("/x").is_err());
    }
}
