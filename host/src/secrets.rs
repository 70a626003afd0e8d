//! The secrets store: values the operator sets with `chitin secret set`, kept in the shared
//! state database (SQLite or PostgreSQL, which only ever sees ciphertext) encrypted with
//! XChaCha20-Poly1305 under a master key that never enters the database.
//!
//! Each value is sealed with a fresh random 24-byte nonce and the secret's NAME as associated
//! data, so a ciphertext copied onto another name fails to open instead of silently answering
//! for it. A key-check record sealed at first use tells a wrong master key ("the key does not
//! match the store") apart from a tampered value. Values leave this module only as
//! [`Zeroizing`] strings, for the host's credential injection; no error, log line or `Debug`
//! output carries one.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use chitin_registry::private_file::{self, PrivateFileError};
use zeroize::Zeroizing;

use crate::state_db::{Records, StateDb, StateError};

/// Name → `version ‖ nonce ‖ ciphertext`.
const VALUES: Records = Records::Secrets;
/// The key-check record, sealed under the master key when the store is first opened.
const META: Records = Records::SecretsMeta;
/// Key of the key-check record in [`META`].
const KEY_CHECK: &str = "key-check";
/// Associated data of the key-check record; no secret name can equal it (names have no space).
const KEY_CHECK_AAD: &[u8] = b"chitin secrets key check";
/// What the key-check record holds.
const KEY_CHECK_PLAINTEXT: &[u8] = b"chitin";
/// Format version of a sealed record, so a later scheme can be told apart.
const RECORD_V1: u8 = 1;
/// XChaCha20 nonce length.
const NONCE_LEN: usize = 24;
/// Master key length.
const KEY_LEN: usize = 32;
/// Longest secret name.
pub const MAX_NAME_LEN: usize = 128;
/// Largest secret value: credentials are short, and a value is held in memory for every call.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Environment variable holding the master key (64 hex digits or base64 of 32 bytes).
pub const KEY_ENV: &str = "CHITIN_SECRETS_KEY";
/// File name of the master key in the data directory.
pub const KEY_FILE: &str = "secrets.key";

/// The secrets store cannot be used, or a request to it is invalid. Never carries a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// A name outside `[A-Za-z0-9_.-]{1,128}`.
    #[error(
        "`{0}` is not a valid secret name (1 to 128 of ASCII letters, digits, `_`, `.` and `-`)"
    )]
    InvalidName(String),
    /// An empty value.
    #[error("the value of secret `{0}` is empty; an empty secret is refused")]
    EmptyValue(String),
    /// A value above [`MAX_VALUE_BYTES`].
    #[error("the value of secret `{name}` is {len} bytes; at most {MAX_VALUE_BYTES} are stored")]
    TooLarge {
        /// The secret.
        name: String,
        /// Its size.
        len: usize,
    },
    /// The master key file is readable by group or others.
    #[error(
        "the secrets master key {path} has mode {mode:o}, so other users may read it; run \
         `chmod 600 {path}` (and consider the stored secrets exposed)",
        path = path.display()
    )]
    KeyExposed {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The master key (file or environment variable) does not decode to 32 bytes.
    #[error("the secrets master key from {source_name} is malformed: {reason}")]
    KeyMalformed {
        /// Where the key came from (the file path or the variable's name).
        source_name: String,
        /// What is wrong (never the key itself).
        reason: String,
    },
    /// The master key opens nothing in this store.
    #[error(
        "the secrets master key from {source_name} does not match the secrets store in the data \
         directory's database: use the key the store was created with ({KEY_ENV}, or {KEY_FILE} \
         in the data directory)"
    )]
    WrongKey {
        /// Where the key came from.
        source_name: String,
    },
    /// A stored value does not open under a key that opens the store: it was altered or copied
    /// from another name.
    #[error(
        "the stored value of secret `{0}` fails its integrity check (altered, or copied from \
         another name); set it again with `chitin secret set {0}`"
    )]
    Tampered(String),
    /// Reading or creating the key file failed.
    #[error("secrets master key {path}: {cause}", path = path.display())]
    KeyIo {
        /// The key file.
        path: PathBuf,
        /// What the OS said.
        cause: std::io::Error,
    },
    /// The OS random source failed.
    #[error("cannot draw random bytes for the secrets store: {0}")]
    Random(String),
    /// The database failed.
    #[error("secrets database: {0}")]
    Database(String),
}

impl From<StateError> for SecretError {
    fn from(e: StateError) -> Self {
        Self::Database(e.to_string())
    }
}

/// Check a secret name: `[A-Za-z0-9_.-]{1,128}`.
pub fn validate_name(name: &str) -> Result<(), SecretError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        // A name that is not valid may be a value pasted by mistake: show only a short prefix.
        let shown: String = name.chars().take(24).collect();
        let shown = if shown.len() < name.len() {
            format!("{shown}…")
        } else {
            shown
        };
        Err(SecretError::InvalidName(shown))
    }
}

/// The 32-byte master key and where it came from.
pub struct MasterKey {
    key: Zeroizing<[u8; KEY_LEN]>,
    source: String,
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MasterKey")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl MasterKey {
    /// The key from `env_value` (the content of [`KEY_ENV`]) when given, else from
    /// `<data_dir>/secrets.key`, created with mode 0600 when it does not exist.
    pub fn load(data_dir: &Path, env_value: Option<&str>) -> Result<Self, SecretError> {
        match env_value {
            Some(text) => Self::decode(text, KEY_ENV),
            None => Self::load_file(&data_dir.join(KEY_FILE)),
        }
    }

    /// A key from text: 64 hex digits, or base64 (standard or URL-safe, padded or not).
    fn decode(text: &str, source: &str) -> Result<Self, SecretError> {
        let text = text.trim();
        let malformed = |reason: String| SecretError::KeyMalformed {
            source_name: source.to_owned(),
            reason,
        };
        let bytes = Zeroizing::new(if text.len() == 2 * KEY_LEN && is_hex(text.as_bytes()) {
            decode_hex(text.as_bytes())
        } else {
            let unpadded = text.trim_end_matches('=');
            let engine = if unpadded.contains(['-', '_']) {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
            } else {
                base64::engine::general_purpose::STANDARD_NO_PAD
            };
            engine.decode(unpadded).map_err(|_| {
                malformed(format!(
                    "expected {} hex digits or base64 of {KEY_LEN} bytes",
                    2 * KEY_LEN
                ))
            })?
        });
        let key: [u8; KEY_LEN] = bytes.as_slice().try_into().map_err(|_| {
            malformed(format!(
                "it decodes to {} bytes; the key is {KEY_LEN} bytes ({} hex digits)",
                bytes.len(),
                2 * KEY_LEN
            ))
        })?;
        Ok(Self {
            key: Zeroizing::new(key),
            source: source.to_owned(),
        })
    }

    /// Read the key file, or create it with a random key.
    fn load_file(path: &Path) -> Result<Self, SecretError> {
        let io = |cause| SecretError::KeyIo {
            path: path.to_owned(),
            cause,
        };
        match private_file::read_to_string(path) {
            Ok(text) => {
                let text = Zeroizing::new(text);
                Self::decode(&text, &path.display().to_string())
            }
            Err(PrivateFileError::Exposed { path, mode }) => {
                Err(SecretError::KeyExposed { path, mode })
            }
            Err(PrivateFileError::Io { cause, .. })
                if cause.kind() == std::io::ErrorKind::NotFound =>
            {
                let mut key = Zeroizing::new([0u8; KEY_LEN]);
                getrandom::fill(&mut key[..]).map_err(|e| SecretError::Random(e.to_string()))?;
                // Hex, so the operator can copy it into CHITIN_SECRETS_KEY on another machine.
                let hex = Zeroizing::new(encode_hex(&key[..]));
                let text = Zeroizing::new(format!("{}\n", hex.as_str()));
                // Never replacing a file: two processes starting at once cannot overwrite each
                // other's key, and the one that loses reads the winner's.
                match private_file::create_new(path, text.as_bytes()) {
                    Ok(()) => Ok(Self {
                        key,
                        source: path.display().to_string(),
                    }),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        Self::load_file(path)
                    }
                    Err(e) => Err(io(e)),
                }
            }
            Err(PrivateFileError::Io { path, cause }) => Err(SecretError::KeyIo { path, cause }),
        }
    }
}

/// Secrets sealed in the shared database.
pub struct SecretStore {
    db: Arc<StateDb>,
    cipher: XChaCha20Poly1305,
    /// Where the master key came from, for [`SecretError::WrongKey`].
    source: String,
    /// Set once the key has been checked against the store.
    checked: OnceLock<()>,
}

impl fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretStore").finish_non_exhaustive()
    }
}

impl SecretStore {
    /// The store in `db`, under the master key from [`KEY_ENV`] or `<data_dir>/secrets.key`.
    pub fn open(db: Arc<StateDb>, data_dir: &Path) -> Result<Self, SecretError> {
        let env = std::env::var(KEY_ENV).ok().map(Zeroizing::new);
        let key = MasterKey::load(data_dir, env.as_deref().map(String::as_str))?;
        Self::with_key(db, key)
    }

    /// The store in `db` under `key`. The key is checked against the store on first use (so
    /// opening touches no database), failing then with [`SecretError::WrongKey`] when the store
    /// was created under another key.
    pub fn with_key(db: Arc<StateDb>, key: MasterKey) -> Result<Self, SecretError> {
        let cipher = XChaCha20Poly1305::new(Key::from_slice(&key.key[..]));
        Ok(Self {
            db,
            cipher,
            source: key.source,
            checked: OnceLock::new(),
        })
    }

    /// Check the key once: open the key-check record, or seal it when the store is new.
    fn check_key(&self) -> Result<(), SecretError> {
        if self.checked.get().is_some() {
            return Ok(());
        }
        let wrong = || SecretError::WrongKey {
            source_name: self.source.clone(),
        };
        let record = self.seal(KEY_CHECK_PLAINTEXT, KEY_CHECK_AAD)?;
        // One transaction: two processes starting at once keep the first record sealed.
        let stored = self.db.record_put_if_absent(META, KEY_CHECK, &record)?;
        match self.open_record(&stored, KEY_CHECK_AAD) {
            Some(plain) if plain.as_slice() == KEY_CHECK_PLAINTEXT => {
                let _ = self.checked.set(());
                Ok(())
            }
            _ => Err(wrong()),
        }
    }

    /// `version ‖ nonce ‖ ciphertext` of `plain` with associated data `aad`.
    fn seal(&self, plain: &[u8], aad: &[u8]) -> Result<Vec<u8>, SecretError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| SecretError::Random(e.to_string()))?;
        let sealed = self
            .cipher
            .encrypt(XNonce::from_slice(&nonce), Payload { msg: plain, aad })
            // Encryption fails only for inputs far beyond MAX_VALUE_BYTES.
            .map_err(|_| SecretError::Random("encryption failed".into()))?;
        let mut record = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        record.push(RECORD_V1);
        record.extend_from_slice(&nonce);
        record.extend_from_slice(&sealed);
        Ok(record)
    }

    /// The plaintext of a sealed record, or `None` when it does not open.
    fn open_record(&self, record: &[u8], aad: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
        let (&version, rest) = record.split_first()?;
        if version != RECORD_V1 || rest.len() < NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        self.cipher
            .decrypt(XNonce::from_slice(nonce), Payload { msg: sealed, aad })
            .ok()
            .map(Zeroizing::new)
    }

    /// Store `value` under `name`, replacing any earlier value.
    pub fn set(&self, name: &str, value: &str) -> Result<(), SecretError> {
        validate_name(name)?;
        if value.is_empty() {
            return Err(SecretError::EmptyValue(name.to_owned()));
        }
        if value.len() > MAX_VALUE_BYTES {
            return Err(SecretError::TooLarge {
                name: name.to_owned(),
                len: value.len(),
            });
        }
        self.check_key()?;
        let record = self.seal(value.as_bytes(), name.as_bytes())?;
        Ok(self.db.record_put(VALUES, name, &record)?)
    }

    /// Remove `name`; whether it existed.
    pub fn remove(&self, name: &str) -> Result<bool, SecretError> {
        validate_name(name)?;
        self.check_key()?;
        Ok(self.db.record_remove(VALUES, &[name])? > 0)
    }

    /// Every stored name, sorted.
    pub fn names(&self) -> Result<Vec<String>, SecretError> {
        Ok(self
            .db
            .record_all(VALUES)?
            .into_iter()
            .map(|(name, _)| name)
            .collect())
    }

    /// Whether `name` is stored.
    pub fn exists(&self, name: &str) -> Result<bool, SecretError> {
        Ok(self.record(name)?.is_some())
    }

    /// The value of `name` — for the host only (credential injection, leak scanning); it must
    /// never be handed to a component.
    pub fn get(&self, name: &str) -> Result<Option<Zeroizing<String>>, SecretError> {
        let Some(record) = self.record(name)? else {
            return Ok(None);
        };
        let plain = self
            .open_record(&record, name.as_bytes())
            .ok_or_else(|| SecretError::Tampered(name.to_owned()))?;
        // Values are stored from `&str`; a record that is not UTF-8 was not written by `set`.
        let text =
            std::str::from_utf8(&plain).map_err(|_| SecretError::Tampered(name.to_owned()))?;
        Ok(Some(Zeroizing::new(text.to_owned())))
    }

    /// The sealed record of `name`.
    fn record(&self, name: &str) -> Result<Option<Vec<u8>>, SecretError> {
        validate_name(name)?;
        self.check_key()?;
        Ok(self.db.record_get(VALUES, name)?)
    }
}

/// Whether every byte is an ASCII hex digit.
pub(crate) fn is_hex(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_hexdigit)
}

/// Bytes of an even-length run of hex digits (checked by the caller with [`is_hex`]).
pub(crate) fn decode_hex(hex: &[u8]) -> Vec<u8> {
    fn nibble(b: u8) -> u8 {
        match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => 0,
        }
    }
    hex.chunks_exact(2)
        .map(|pair| (nibble(pair[0]) << 4) | nibble(pair[1]))
        .collect()
}

/// Lower-case hex of `bytes`.
fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const KEY_A: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const KEY_B: &str = "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    fn db(dir: &Path) -> Arc<StateDb> {
        Arc::new(StateDb::new(&dir.join("chitin.db")))
    }

    /// A store under `key`, its key checked as its first use would.
    fn store(db: &Arc<StateDb>, key: &str) -> Result<SecretStore, SecretError> {
        let store =
            SecretStore::with_key(db.clone(), MasterKey::decode(key, "test").expect("key"))?;
        store.check_key()?;
        Ok(store)
    }

    #[test]
    fn values_round_trip_and_are_not_stored_in_plaintext() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = db(dir.path());
        let s = store(&db, KEY_A).expect("open");
        s.set("github_token", "ghp_plaintext-marker-123")
            .expect("set");
        s.set("b.name-2", "other").expect("set");
        assert_eq!(
            s.get("github_token")
                .expect("get")
                .as_deref()
                .map(String::as_str),
            Some("ghp_plaintext-marker-123")
        );
        assert_eq!(s.names().expect("names"), ["b.name-2", "github_token"]);
        assert!(s.exists("github_token").expect("exists"));
        assert!(!s.exists("nope").expect("exists"));
        assert!(s.get("nope").expect("get").is_none());
        assert!(s.remove("b.name-2").expect("remove"));
        assert!(!s.remove("b.name-2").expect("remove again"));
        drop((s, db));
        // The file and its write-ahead log, whichever holds the pages now.
        let mut bytes = std::fs::read(dir.path().join("chitin.db")).expect("read db");
        bytes.extend(std::fs::read(dir.path().join("chitin.db-wal")).unwrap_or_default());
        assert!(
            bytes
                .windows(b"github_token".len())
                .any(|w| w == b"github_token"),
            "the names are stored as they are, so this reads the file that holds the secrets"
        );
        assert!(
            !bytes
                .windows(b"plaintext-marker".len())
                .any(|w| w == b"plaintext-marker"),
            "the value is in the database file in plaintext"
        );
    }

    #[test]
    fn a_wrong_key_is_refused_without_showing_values() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = db(dir.path());
        store(&db, KEY_A)
            .expect("open")
            .set("x", "value-1234")
            .expect("set");
        let err = store(&db, KEY_B).unwrap_err();
        assert!(matches!(err, SecretError::WrongKey { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("does not match"), "{text}");
        assert!(
            !text.contains("value-1234") && !text.contains("ff01"),
            "{text}"
        );
    }

    #[test]
    fn a_tampered_ciphertext_fails_its_check() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = db(dir.path());
        let s = store(&db, KEY_A).expect("open");
        s.set("x", "value-1234").expect("set");
        let mut record = s.record("x").expect("record").expect("some");
        let last = record.len() - 1;
        record[last] ^= 1;
        write_raw(&db, "x", &record);
        let err = s.get("x").unwrap_err();
        assert!(
            matches!(err, SecretError::Tampered(ref n) if n == "x"),
            "{err}"
        );
        assert!(!err.to_string().contains("value-1234"));
    }

    #[test]
    fn the_name_is_bound_to_its_value() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = db(dir.path());
        let s = store(&db, KEY_A).expect("open");
        s.set("cheap", "cheap-value-1").expect("set");
        s.set("precious", "precious-value-2").expect("set");
        let precious = s.record("precious").expect("record").expect("some");
        write_raw(&db, "cheap", &precious);
        assert!(matches!(s.get("cheap"), Err(SecretError::Tampered(_))));
    }

    fn write_raw(db: &StateDb, name: &str, record: &[u8]) {
        db.record_put(VALUES, name, record).expect("write");
    }

    #[test]
    fn names_are_checked_and_empty_values_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = store(&db(dir.path()), KEY_A).expect("open");
        for bad in ["", "a b", "a/b", "ü", &"x".repeat(129)] {
            assert!(
                matches!(s.set(bad, "v"), Err(SecretError::InvalidName(_))),
                "{bad:?}"
            );
        }
        s.set(&"x".repeat(128), "v").expect("128 chars is fine");
        assert!(matches!(s.set("a", ""), Err(SecretError::EmptyValue(_))));
    }

    #[test]
    fn the_key_file_is_created_private_and_an_exposed_one_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = MasterKey::load(dir.path(), None).expect("create");
        let path = dir.path().join(KEY_FILE);
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = MasterKey::load(dir.path(), None).expect("read");
        assert_eq!(*first.key, *again.key);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let err = MasterKey::load(dir.path(), None).unwrap_err();
        assert!(matches!(err, SecretError::KeyExposed { mode: 0o640, .. }));
        assert!(
            err.to_string()
                .contains(&format!("chmod 600 {}", path.display())),
            "{err}"
        );
    }

    #[test]
    fn env_keys_take_hex_or_base64_of_32_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let hex = MasterKey::load(dir.path(), Some(KEY_A)).expect("hex");
        let b64 = base64::engine::general_purpose::STANDARD.encode(*hex.key);
        let from_b64 = MasterKey::load(dir.path(), Some(b64.as_str())).expect("base64");
        assert_eq!(*hex.key, *from_b64.key);
        let err = MasterKey::load(dir.path(), Some("abcd")).unwrap_err();
        assert!(matches!(err, SecretError::KeyMalformed { .. }), "{err}");
        assert!(err.to_string().contains("32 bytes"), "{err}");
        assert!(
            !dir.path().join(KEY_FILE).exists(),
            "no key file when the env sets one"
        );
        assert!(
            !format!("{hex:?}").contains("0001"),
            "Debug shows no key bytes"
        );
    }
}
