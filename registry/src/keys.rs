//! Signing keys: Ed25519 key pairs kept in a key directory (private keys PKCS#8 PEM, mode 0600;
//! public keys one OpenSSH line each), and the public-key forms people copy around (OpenSSH
//! `ssh-ed25519 AAAA…`, key id, fingerprint).

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use wasmsign2::reexports::ct_codecs::{Base64NoPadding, Encoder, Hex};
use wasmsign2::reexports::hmac_sha256;

use crate::private_file::{self, PrivateFileError};

/// A key could not be created, read or used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A key name with characters that do not belong in a file name.
    #[error("invalid key name {0:?}: use letters, digits, `.`, `_` and `-`, not starting with `.`")]
    InvalidName(String),
    /// `generate` would overwrite an existing key.
    #[error("key {name:?} already exists at {}", path.display())]
    Exists {
        /// The key name.
        name: String,
        /// Its private key file.
        path: PathBuf,
    },
    /// No key by that name in the key directory, and no such file either.
    #[error("no key {name:?} in {} (see `chitin key list`, or pass a key file path)", dir.display())]
    NotFound {
        /// The name asked for.
        name: String,
        /// The key directory searched.
        dir: PathBuf,
    },
    /// A private key file that others can read.
    #[error(
        "private key {} is readable by other users (mode {mode:o}): run `chmod 600` on it",
        path.display()
    )]
    TooOpen {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is not an Ed25519 key in a format chitin reads.
    #[error(
        "{}: not an Ed25519 key (expected PKCS#8 PEM, DER, or an unencrypted OpenSSH key)",
        path.display()
    )]
    Format {
        /// The key file.
        path: PathBuf,
    },
    /// A public key text that is not `ssh-ed25519 <base64>`.
    #[error("not an OpenSSH Ed25519 public key (`ssh-ed25519 AAAA…`): {0}")]
    PublicFormat(String),
    /// File-system failure.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> KeyError + '_ {
    move |cause| KeyError::Io {
        path: path.to_owned(),
        cause,
    }
}

/// The short identifier a signature carries for its key: the tool-conventions default key id
/// (HMAC-SHA256 of the public key under `"key_id"`, first 12 bytes).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub Vec<u8>);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = Hex::encode_to_string(&self.0).map_err(|_| fmt::Error)?;
        f.write_str(&hex)
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An Ed25519 public key.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PublicKey {
    inner: wasmsign2::PublicKey,
}

impl PublicKey {
    fn from_raw(raw: [u8; 32]) -> Result<Self, KeyError> {
        let mut bytes = vec![0x01];
        bytes.extend_from_slice(&raw);
        let inner = wasmsign2::PublicKey::from_bytes(&bytes)
            .map_err(|e| KeyError::PublicFormat(e.to_string()))?;
        Ok(Self {
            inner: inner.attach_default_key_id(),
        })
    }

    /// Parse the OpenSSH form `ssh-ed25519 <base64> [comment]`.
    pub fn from_openssh(text: &str) -> Result<Self, KeyError> {
        let text = text.trim();
        let kind = text.split_whitespace().next().unwrap_or_default();
        if kind != "ssh-ed25519" {
            return Err(KeyError::PublicFormat(format!(
                "key type {kind:?} (only ssh-ed25519 is accepted)"
            )));
        }
        match ssh_keys::openssh::parse_public_key(text) {
            Ok(ssh_keys::PublicKey::Ed25519(raw)) => Self::from_raw(raw),
            Ok(_) => Err(KeyError::PublicFormat("not an Ed25519 key".into())),
            Err(e) => Err(KeyError::PublicFormat(e.to_string())),
        }
    }

    /// The OpenSSH form `ssh-ed25519 <base64>` (no comment).
    pub fn to_openssh(&self) -> String {
        ssh_keys::PublicKey::Ed25519(self.raw()).to_string()
    }

    /// The 32 raw key bytes.
    pub fn raw(&self) -> [u8; 32] {
        *self.inner.pk
    }

    /// The key id signatures made with this key carry.
    pub fn key_id(&self) -> KeyId {
        KeyId(self.inner.key_id().cloned().unwrap_or_default())
    }

    /// The OpenSSH-style fingerprint `SHA256:<base64>` of the key blob, as `ssh-keygen -l` prints.
    pub fn fingerprint(&self) -> String {
        let mut blob = Vec::with_capacity(51);
        for part in [b"ssh-ed25519".as_slice(), self.raw().as_slice()] {
            blob.extend_from_slice(&(part.len() as u32).to_be_bytes());
            blob.extend_from_slice(part);
        }
        let digest = hmac_sha256::Hash::hash(&blob);
        let b64 = Base64NoPadding::encode_to_string(digest).unwrap_or_default();
        format!("SHA256:{b64}")
    }

    /// The wasmsign2 key, with its key id attached.
    pub(crate) fn wasmsign(&self) -> &wasmsign2::PublicKey {
        &self.inner
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint())
    }
}

/// A private signing key and its public half.
#[derive(Clone)]
pub struct SigningKey {
    secret: wasmsign2::SecretKey,
    public: PublicKey,
}

impl SigningKey {
    /// A fresh random key.
    pub fn generate() -> Self {
        let pair = wasmsign2::KeyPair::generate();
        Self::from_secret(pair.sk)
    }

    fn from_secret(secret: wasmsign2::SecretKey) -> Self {
        let inner = wasmsign2::PublicKey {
            pk: secret.sk.public_key(),
            key_id: None,
        }
        .attach_default_key_id();
        Self {
            secret,
            public: PublicKey { inner },
        }
    }

    /// Read a private key file (PKCS#8 PEM as chitin writes it, DER, or an unencrypted OpenSSH
    /// Ed25519 key). On Unix, a file other users can read is refused, as OpenSSH does.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let bytes = private_file::read(path).map_err(|e| match e {
            PrivateFileError::Exposed { path, mode } => KeyError::TooOpen { path, mode },
            PrivateFileError::Io { path, cause } => KeyError::Io { path, cause },
        })?;
        let secret = wasmsign2::SecretKey::from_any(&bytes).map_err(|_| KeyError::Format {
            path: path.to_owned(),
        })?;
        Ok(Self::from_secret(secret))
    }

    /// The public half.
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The private key as PKCS#8 PEM.
    fn to_pem(&self) -> String {
        self.secret.to_pem()
    }

    /// The wasmsign2 secret key.
    pub(crate) fn wasmsign(&self) -> &wasmsign2::SecretKey {
        &self.secret
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({})", self.public.fingerprint())
    }
}

/// A key in the key directory, as listed.
#[derive(Debug, Clone)]
pub struct KeyInfo {
    /// The key's name (its file stem).
    pub name: String,
    /// Its public half.
    pub public: PublicKey,
    /// Its private key file.
    pub path: PathBuf,
}

/// The key directory: `<name>.key` (private, 0600) and `<name>.pub` (OpenSSH public line).
#[derive(Debug, Clone)]
pub struct KeyStore {
    dir: PathBuf,
}

impl KeyStore {
    /// The key store in `dir` (created on first write, mode 0700).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the private key `name` lives.
    pub fn private_path(&self, name: &str) -> Result<PathBuf, KeyError> {
        check_name(name)?;
        Ok(self.dir.join(format!("{name}.key")))
    }

    /// Where the public key `name` lives.
    pub fn public_path(&self, name: &str) -> Result<PathBuf, KeyError> {
        check_name(name)?;
        Ok(self.dir.join(format!("{name}.pub")))
    }

    /// Generate and store a new key `name`; refuses to overwrite one.
    pub fn generate(&self, name: &str) -> Result<KeyInfo, KeyError> {
        let private = self.private_path(name)?;
        let public_path = self.public_path(name)?;
        self.create_dir()?;
        let key = SigningKey::generate();
        private_file::create_new(&private, key.to_pem().as_bytes()).map_err(|cause| {
            if cause.kind() == std::io::ErrorKind::AlreadyExists {
                KeyError::Exists {
                    name: name.to_owned(),
                    path: private.clone(),
                }
            } else {
                KeyError::Io {
                    path: private.clone(),
                    cause,
                }
            }
        })?;
        let line = format!("{} {name}\n", key.public().to_openssh());
        fs::write(&public_path, line).map_err(io_err(&public_path))?;
        Ok(KeyInfo {
            name: name.to_owned(),
            public: key.public().clone(),
            path: private,
        })
    }

    /// Load the private key `name_or_path`: a key name in this store, else a file path.
    pub fn load(&self, name_or_path: &str) -> Result<SigningKey, KeyError> {
        if check_name(name_or_path).is_ok() {
            let path = self.private_path(name_or_path)?;
            if path.exists() {
                return SigningKey::from_file(&path);
            }
        }
        let path = Path::new(name_or_path);
        if path.is_file() {
            return SigningKey::from_file(path);
        }
        Err(KeyError::NotFound {
            name: name_or_path.to_owned(),
            dir: self.dir.clone(),
        })
    }

    /// The public key `name` (from its `.pub` file, or derived from the private key).
    pub fn public(&self, name: &str) -> Result<PublicKey, KeyError> {
        let path = self.public_path(name)?;
        match fs::read_to_string(&path) {
            Ok(text) => PublicKey::from_openssh(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(self.load(name)?.public().clone())
            }
            Err(cause) => Err(KeyError::Io { path, cause }),
        }
    }

    /// Every key in the store, sorted by name.
    pub fn list(&self) -> Result<Vec<KeyInfo>, KeyError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(cause) => {
                return Err(KeyError::Io {
                    path: self.dir.clone(),
                    cause,
                });
            }
        };
        let mut keys = Vec::new();
        for entry in entries {
            let path = entry.map_err(io_err(&self.dir))?.path();
            if path.extension().is_none_or(|e| e != "key") {
                continue;
            }
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if check_name(name).is_err() {
                continue;
            }
            keys.push(KeyInfo {
                name: name.to_owned(),
                public: self.public(name)?,
                path,
            });
        }
        keys.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(keys)
    }

    fn create_dir(&self) -> Result<(), KeyError> {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(&self.dir).map_err(io_err(&self.dir))
    }
}

fn check_name(name: &str) -> Result<(), KeyError> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(KeyError::InvalidName(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_private_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::new(dir.path().join("keys"));
        let info = store.generate("acme").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&info.path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
            let dir_mode = fs::metadata(store.dir()).unwrap().permissions().mode() & 0o777;
            assert_eq!(dir_mode, 0o700);
        }
        let loaded = store.load("acme").unwrap();
        assert_eq!(loaded.public(), &info.public);
        assert_eq!(store.public("acme").unwrap(), info.public);
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name, "acme");
    }

    #[test]
    fn generate_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::new(dir.path());
        store.generate("k").unwrap();
        assert!(matches!(store.generate("k"), Err(KeyError::Exists { .. })));
    }

    #[test]
    fn names_that_escape_the_directory_are_refused() {
        let store = KeyStore::new("/nonexistent");
        for bad in ["../x", ".hidden", "a/b", ""] {
            assert!(
                matches!(store.private_path(bad), Err(KeyError::InvalidName(_))),
                "{bad}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_private_key_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::new(dir.path());
        let info = store.generate("k").unwrap();
        fs::set_permissions(&info.path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            store.load("k"),
            Err(KeyError::TooOpen { mode: 0o644, .. })
        ));
    }

    #[test]
    fn openssh_form_round_trips_and_rejects_other_types() {
        let key = SigningKey::generate();
        let line = key.public().to_openssh();
        assert!(
            line.starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"),
            "{line}"
        );
        let parsed = PublicKey::from_openssh(&format!("{line} comment")).unwrap();
        assert_eq!(&parsed, key.public());
        assert_eq!(parsed.key_id().0.len(), 12);
        assert!(parsed.fingerprint().starts_with("SHA256:"));
        assert!(PublicKey::from_openssh("ssh-rsa AAAAB3NzaC1yc2E").is_err());
        assert!(PublicKey::from_openssh("ssh-ed25519 !!!").is_err());
    }
}
