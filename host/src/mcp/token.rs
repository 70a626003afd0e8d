//! The bearer token that guards `chitin serve --http`: created once, kept 0600 in the data
//! directory, compared in constant time.

use std::path::{Path, PathBuf};

use chitin_registry::private_file::{self, PrivateFileError};
use subtle::ConstantTimeEq;

/// Random bytes in a token (rendered as hex).
const TOKEN_BYTES: usize = 32;

/// The token file could not be read or created.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Reading, creating or writing the file failed.
    #[error("cannot use the HTTP token file {path}: {cause}")]
    Io {
        /// The token file.
        path: PathBuf,
        /// What the OS said.
        cause: std::io::Error,
    },
    /// The file is readable or writable by other users, so the token may have leaked.
    #[error(
        "the HTTP token file {path} has mode {mode:o}, readable by others; delete it (a new token \
         is created on the next start) or `chmod 600` it"
    )]
    Exposed {
        /// The token file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file holds no usable token.
    #[error("the HTTP token file {path} is empty or not hex; delete it to create a new token")]
    Malformed {
        /// The token file.
        path: PathBuf,
    },
    /// The OS random source failed.
    #[error("cannot draw random bytes for the HTTP token: {0}")]
    Random(String),
}

/// A bearer token clients must present as `Authorization: Bearer <token>`.
pub struct BearerToken {
    value: String,
}

/// A loaded token and whether this start created it (then it is shown once).
pub struct LoadedToken {
    /// The token.
    pub token: BearerToken,
    /// True when the file did not exist and was created now.
    pub created: bool,
}

impl BearerToken {
    /// Read the token at `path`, or create it (mode 0600) when the file does not exist.
    pub fn load_or_create(path: &Path) -> Result<LoadedToken, TokenError> {
        let io = |cause| TokenError::Io {
            path: path.to_owned(),
            cause,
        };
        match private_file::read_to_string(path) {
            Ok(text) => {
                let value = text.trim().to_owned();
                if value.is_empty() || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(TokenError::Malformed {
                        path: path.to_owned(),
                    });
                }
                Ok(LoadedToken {
                    token: Self { value },
                    created: false,
                })
            }
            Err(PrivateFileError::Exposed { path, mode }) => {
                Err(TokenError::Exposed { path, mode })
            }
            Err(PrivateFileError::Io { cause, .. })
                if cause.kind() == std::io::ErrorKind::NotFound =>
            {
                let mut bytes = [0u8; TOKEN_BYTES];
                getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
                let value: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                // Never replacing a file: two servers starting at once cannot overwrite each
                // other's token.
                private_file::create_new(path, format!("{value}\n").as_bytes()).map_err(io)?;
                Ok(LoadedToken {
                    token: Self { value },
                    created: true,
                })
            }
            Err(PrivateFileError::Io { path, cause }) => Err(TokenError::Io { path, cause }),
        }
    }

    /// The token text (to show once when created).
    pub fn reveal(&self) -> &str {
        &self.value
    }

    /// Whether an `Authorization` header value carries this token (the scheme's name in any
    /// case, RFC 6750 §2.1). Constant time in the token's content; the length is not secret.
    pub fn accepts(&self, authorization: &[u8]) -> bool {
        match scheme_and_credentials(authorization) {
            Some((scheme, presented)) if scheme.eq_ignore_ascii_case(b"bearer") => {
                presented.ct_eq(self.value.as_bytes()).into()
            }
            _ => false,
        }
    }
}

/// An `Authorization` header value's scheme and credentials (`Bearer abc` → `Bearer`, `abc`).
pub fn scheme_and_credentials(authorization: &[u8]) -> Option<(&[u8], &[u8])> {
    let space = authorization.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = authorization.split_at(space);
    Some((scheme, rest.trim_ascii()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn creates_a_private_token_once_then_reads_it_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("http-token");
        let first = BearerToken::load_or_create(&path).expect("create");
        assert!(first.created);
        assert_eq!(first.token.reveal().len(), 2 * TOKEN_BYTES);
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let second = BearerToken::load_or_create(&path).expect("read");
        assert!(!second.created);
        assert_eq!(second.token.reveal(), first.token.reveal());
    }

    #[test]
    fn accepts_only_the_exact_bearer_token() {
        let token = BearerToken {
            value: "abc123".into(),
        };
        assert!(token.accepts(b"Bearer abc123"));
        assert!(token.accepts(b"bearer abc123"));
        assert!(token.accepts(b"BEARER abc123"));
        assert!(!token.accepts(b"Bearer abc124"));
        assert!(!token.accepts(b"Bearer abc12"));
        assert!(!token.accepts(b"abc123"));
        assert!(!token.accepts(b"Basic abc123"));
    }

    #[test]
    fn refuses_a_token_file_others_can_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("http-token");
        std::fs::write(&path, "abcd\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(matches!(
            BearerToken::load_or_create(&path),
            Err(TokenError::Exposed { .. })
        ));
    }
}
