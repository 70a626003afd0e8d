//! The issuer's signing keys (its JWKS): found through the issuer's metadata (RFC 8414, then
//! OpenID Connect discovery) unless configured, fetched over HTTPS only, and cached for at most
//! [`MAX_AGE`]. A key id the cache does not know refetches at most once per
//! [`REFETCH_INTERVAL`], and so does a failed fetch, so no stream of tokens can make this server
//! hammer the issuer. Without fresh keys nothing is accepted.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::Jwk;
use serde::Deserialize;
use url::Url;

use crate::caps::http::tls;

/// The longest a fetched key set is used before it is fetched again.
pub const MAX_AGE: Duration = Duration::from_secs(300);
/// The least time between two fetches caused by an unknown key id or a failed fetch.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// Largest metadata or key-set document read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Time allowed for one fetch, connection included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The issuer's keys cannot be had.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JwksError {
    /// The request failed or the answer was not 200.
    #[error("cannot fetch {url}: {reason}")]
    Fetch {
        /// What was fetched.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The answer is not the document expected.
    #[error("{url} is not a usable {what}: {reason}")]
    Document {
        /// What was fetched.
        url: String,
        /// The kind of document expected.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The issuer's metadata names another issuer (RFC 8414 §3.3).
    #[error("the metadata at {url} names the issuer `{found}`, not the configured `{expected}`")]
    IssuerMismatch {
        /// The metadata document.
        url: String,
        /// Its `issuer`.
        found: String,
        /// The configured issuer.
        expected: String,
    },
}

/// The key source cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A URL does not parse or is not the kind needed.
    #[error("{what} `{url}`: {reason}")]
    BadUrl {
        /// Which URL.
        what: &'static str,
        /// The URL given.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The issuer or key-set URL is not `https://`.
    #[error("{what} must be an https:// URL (keys are never fetched in the clear): {url}")]
    NotHttps {
        /// Which URL.
        what: &'static str,
        /// The URL given.
        url: String,
    },
    /// A CA file cannot be used.
    #[error("--oauth-ca-file: {0}")]
    Tls(#[from] tls::TlsError),
    /// The HTTP client cannot be built.
    #[error("cannot build the HTTP client for the issuer's keys: {0}")]
    Client(String),
}

/// The keys of one issuer, fetched and cached.
pub struct KeySource {
    client: reqwest::Client,
    /// The issuer identifier, as configured (its metadata must name exactly this).
    issuer_id: String,
    issuer: Url,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The key-set URL: configured, or found in the issuer's metadata.
    jwks_uri: Option<Url>,
    keys: Vec<Jwk>,
    fetched_at: Option<Instant>,
    last_attempt: Option<Instant>,
    last_error: Option<JwksError>,
}

#[derive(Deserialize)]
struct ServerMetadata {
    issuer: String,
    jwks_uri: Option<String>,
}

#[derive(Deserialize)]
struct KeySet {
    keys: Vec<serde_json::Value>,
}

impl KeySource {
    /// The keys of `issuer`, from `jwks_uri` or else from the issuer's metadata; `ca_files` are
    /// trusted for HTTPS besides the public roots.
    pub fn new(
        issuer_id: &str,
        jwks_uri: Option<Url>,
        ca_files: &[PathBuf],
    ) -> Result<Self, SetupError> {
        let issuer = Url::parse(issuer_id).map_err(|e| SetupError::BadUrl {
            what: "--oauth-issuer",
            url: issuer_id.to_owned(),
            reason: e.to_string(),
        })?;
        for (what, url) in std::iter::once(("--oauth-issuer", &issuer))
            .chain(jwks_uri.iter().map(|u| ("--oauth-jwks-uri", u)))
        {
            if url.scheme() != "https" {
                return Err(SetupError::NotHttps {
                    what,
                    url: url.to_string(),
                });
            }
        }
        let tls = tls::client_config(ca_files)?;
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured((*tls).clone())
            .https_only(true)
            // A redirect could lead anywhere; an issuer names its real URLs in its metadata.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|e| SetupError::Client(e.to_string()))?;
        Ok(Self {
            client,
            issuer_id: issuer_id.to_owned(),
            issuer,
            state: tokio::sync::Mutex::new(State {
                jwks_uri,
                ..State::default()
            }),
        })
    }

    /// The signing key named `kid` (or the only key, for a token naming none); `Ok(None)` when
    /// the issuer has no such key.
    pub async fn key(&self, kid: Option<&str>) -> Result<Option<Jwk>, JwksError> {
        // One lookup at a time: concurrent tokens wait for one fetch rather than each starting one.
        let mut state = self.state.lock().await;
        let now = Instant::now();
        let fresh = state
            .fetched_at
            .is_some_and(|at| now.duration_since(at) < MAX_AGE);
        if fresh && let Some(key) = find(&state.keys, kid) {
            return Ok(Some(key));
        }
        let may_fetch = state
            .last_attempt
            .is_none_or(|at| now.duration_since(at) >= REFETCH_INTERVAL);
        if !may_fetch {
            if fresh {
                return Ok(None);
            }
            // Not fresh and fetched moments ago: that fetch failed.
            return Err(state
                .last_error
                .clone()
                .unwrap_or_else(|| JwksError::Fetch {
                    url: self.issuer_id.clone(),
                    reason: "no keys fetched yet".into(),
                }));
        }
        state.last_attempt = Some(now);
        match self.fetch(&mut state).await {
            Ok(keys) => {
                state.keys = keys;
                state.fetched_at = Some(now);
                state.last_error = None;
                Ok(find(&state.keys, kid))
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot fetch the OAuth issuer's keys");
                state.last_error = Some(e.clone());
                Err(e)
            }
        }
    }

    async fn fetch(&self, state: &mut State) -> Result<Vec<Jwk>, JwksError> {
        let jwks_uri = match &state.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover().await?;
                state.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let set: KeySet = self.get_json(&jwks_uri, "JWK set").await?;
        // Keys of other kinds (encryption keys, unknown types) are skipped, not fatal.
        let keys: Vec<Jwk> = set
            .keys
            .into_iter()
            .filter_map(|k| serde_json::from_value(k).ok())
            .collect();
        if keys.is_empty() {
            return Err(JwksError::Document {
                url: jwks_uri.to_string(),
                what: "JWK set",
                reason: "it holds no usable key".into(),
            });
        }
        Ok(keys)
    }

    /// The key-set URL from the issuer's RFC 8414 metadata, else its OpenID configuration.
    async fn discover(&self) -> Result<Url, JwksError> {
        let path = self.issuer.path().trim_end_matches('/');
        let mut rfc8414 = self.issuer.clone();
        rfc8414.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
        let mut oidc = self.issuer.clone();
        oidc.set_path(&format!("{path}/.well-known/openid-configuration"));
        let metadata = match self.get_json::<ServerMetadata>(&rfc8414, "metadata").await {
            Ok(metadata) => (rfc8414, metadata),
            Err(first) => match self.get_json::<ServerMetadata>(&oidc, "metadata").await {
                Ok(metadata) => (oidc, metadata),
                Err(_) => return Err(first),
            },
        };
        let (url, metadata) = metadata;
        if metadata.issuer != self.issuer_id {
            return Err(JwksError::IssuerMismatch {
                url: url.to_string(),
                found: metadata.issuer,
                expected: self.issuer_id.clone(),
            });
        }
        let document = |reason: String| JwksError::Document {
            url: url.to_string(),
            what: "authorization server metadata",
            reason,
        };
        let jwks_uri = metadata
            .jwks_uri
            .ok_or_else(|| document("it names no jwks_uri".into()))?;
        let jwks_uri =
            Url::parse(&jwks_uri).map_err(|e| document(format!("jwks_uri `{jwks_uri}`: {e}")))?;
        if jwks_uri.scheme() != "https" {
            return Err(document(format!("jwks_uri `{jwks_uri}` is not https://")));
        }
        Ok(jwks_uri)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: &Url,
        what: &'static str,
    ) -> Result<T, JwksError> {
        let fetch = |reason: String| JwksError::Fetch {
            url: url.to_string(),
            reason,
        };
        let mut response = self
            .client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| fetch(error_chain(&e)))?;
        if !response.status().is_success() {
            return Err(fetch(format!("HTTP {}", response.status())));
        }
        let too_big = || fetch(format!("the answer is over {MAX_DOCUMENT_BYTES} bytes"));
        if response
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(too_big());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| fetch(error_chain(&e)))? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_DOCUMENT_BYTES {
                return Err(too_big());
            }
        }
        serde_json::from_slice(&body).map_err(|e| JwksError::Document {
            url: url.to_string(),
            what,
            reason: e.to_string(),
        })
    }
}

/// The key named `kid`; a token naming no key may use the only key of a one-key set.
fn find(keys: &[Jwk], kid: Option<&str>) -> Option<Jwk> {
    match kid {
        Some(kid) => keys
            .iter()
            .find(|k| k.common.key_id.as_deref() == Some(kid))
            .cloned(),
        None => match keys {
            [only] => Some(only.clone()),
            _ => None,
        },
    }
}

/// An error with its causes (reqwest's own message hides the TLS or connection reason).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kid: Option<&str>) -> Jwk {
        let mut value = serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"});
        if let Some(kid) = kid {
            value["kid"] = kid.into();
        }
        serde_json::from_value(value).expect("jwk")
    }

    #[test]
    fn a_key_is_found_by_its_id_and_a_token_without_one_needs_a_one_key_set() {
        let keys = [key(Some("a")), key(Some("b"))];
        assert!(find(&keys, Some("b")).is_some());
        assert!(find(&keys, Some("c")).is_none());
        assert!(find(&keys, None).is_none());
        assert!(find(&keys[..1], None).is_some());
    }

    #[test]
    fn an_issuer_in_the_clear_is_refused() {
        assert!(matches!(
            KeySource::new("http://issuer.example", None, &[]),
            Err(SetupError::NotHttps { .. })
        ));
    }
}
