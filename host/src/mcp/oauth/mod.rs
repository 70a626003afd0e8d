//! chitin as an OAuth 2.1 resource server on Streamable HTTP: JWT access tokens (RFC 9068) are
//! checked against the configured issuer's keys, with the issuer, the audience (this server's
//! resource URI), expiry and not-before enforced, and only asymmetric algorithms the issuer's key
//! fits (never `none`, never a shared-secret HS*: a public key is no secret). What a token
//! reaches is decided by its scopes (`[oauth] scopes` in the policy).

pub mod jwks;
pub mod metadata;

use std::collections::BTreeSet;
use std::path::PathBuf;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde::Deserialize;
use url::Url;

use self::jwks::{JwksError, KeySource, SetupError};

/// Seconds of clock difference with the issuer tolerated on `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 30;

/// How the resource server is set up. The issuer and resource are identifiers compared exactly
/// as given (no URL normalisation: `https://a.example` and `https://a.example/` differ).
#[derive(Debug, Clone)]
pub struct OAuthOptions {
    /// The authorization server whose tokens are accepted (`iss`), an https:// URL.
    pub issuer: String,
    /// This server's resource URI: the audience a token must name.
    pub resource: String,
    /// The issuer's key-set URL; found in the issuer's metadata when not given.
    pub jwks_uri: Option<Url>,
    /// CA certificates trusted for the issuer's HTTPS besides the public roots.
    pub ca_files: Vec<PathBuf>,
}

/// The resource server: checks access tokens and names itself in challenges.
pub struct ResourceServer {
    issuer: String,
    resource: String,
    resource_url: Url,
    metadata_url: String,
    keys: KeySource,
}

/// What a checked token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenGrant {
    /// The application the token was issued to (`client_id`).
    pub client: Option<String>,
    /// The user it acts for (`sub`).
    pub subject: Option<String>,
    /// Its scopes.
    pub scopes: BTreeSet<String>,
}

impl TokenGrant {
    /// Who holds the token, for per-client bounds and for what belongs to a client (its
    /// sessions and tasks): the application and the user together, since the users of one
    /// application must not reach each other's tasks. Quoted, so no pair of names reads as
    /// another.
    pub fn holder(&self) -> String {
        match (&self.client, &self.subject) {
            (Some(client), Some(subject)) => format!("oauth:{client:?} for {subject:?}"),
            (Some(client), None) => format!("oauth:{client:?}"),
            (None, Some(subject)) => format!("oauth: for {subject:?}"),
            (None, None) => "oauth:(anonymous)".into(),
        }
    }

    /// Who the token acts for, for the per-client bounds: its user (`sub`), whichever
    /// application holds the token, since an issuer that lets anyone register applications
    /// would otherwise give one person a bound per application; a token for no user is its
    /// application's. Quoted, and prefixed apart from every [`TokenGrant::holder`].
    pub fn person(&self) -> String {
        match &self.subject {
            Some(subject) => format!("oauth user {subject:?}"),
            None => self.holder(),
        }
    }
}

/// Why a token is refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT, or its header or claims do not parse.
    #[error("the token is not a well-formed JWT: {0}")]
    Malformed(String),
    /// A shared-secret algorithm: anyone holding the public key could forge one.
    #[error(
        "the token is signed with {0:?}, a shared-secret algorithm; only tokens signed with the \
         issuer's public keys are accepted"
    )]
    Symmetric(Algorithm),
    /// The issuer publishes no key by the token's `kid`.
    #[error("the issuer publishes no signing key {0}")]
    UnknownKey(String),
    /// The token's algorithm does not fit the key.
    #[error("the token's algorithm {alg:?} does not fit the issuer's key: {reason}")]
    KeyMismatch {
        /// The token's `alg`.
        alg: Algorithm,
        /// Why not.
        reason: String,
    },
    /// Past `exp`.
    #[error("the token expired")]
    Expired,
    /// Before `nbf`.
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    /// `aud` does not name this server.
    #[error("the token's audience is not this server ({0})")]
    Audience(String),
    /// `iss` is not the configured issuer.
    #[error("the token was not issued by {0}")]
    Issuer(String),
    /// A required claim is missing.
    #[error("the token has no `{0}` claim")]
    MissingClaim(String),
    /// The signature does not verify with the issuer's key.
    #[error("the token's signature does not verify")]
    Signature,
    /// The issuer's keys cannot be had, so nothing can be checked.
    #[error("the issuer's signing keys are unavailable, so no token can be checked: {0}")]
    Unavailable(#[from] JwksError),
}

impl TokenError {
    /// The server, not the token, is at fault (answer 503, not 401).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    /// RFC 9068 §2.2.3: space-separated scopes.
    #[serde(default)]
    scope: Option<String>,
}

impl ResourceServer {
    /// A resource server for `options`.
    pub fn new(options: OAuthOptions) -> Result<Self, SetupError> {
        let resource_url = Url::parse(&options.resource).map_err(|e| SetupError::BadUrl {
            what: "--oauth-resource",
            url: options.resource.clone(),
            reason: e.to_string(),
        })?;
        if !matches!(resource_url.scheme(), "http" | "https") || resource_url.fragment().is_some() {
            return Err(SetupError::BadUrl {
                what: "--oauth-resource",
                url: options.resource,
                reason: "a resource URI is an http(s) URL without a fragment".into(),
            });
        }
        // The metadata is routed at a path made from the resource's: a segment the router
        // would read as a capture or a wildcard must be refused here, not panic at start.
        if let Some(segment) = resource_url
            .path_segments()
            .into_iter()
            .flatten()
            .find(|s| s.starts_with([':', '*']))
        {
            return Err(SetupError::BadUrl {
                what: "--oauth-resource",
                url: options.resource,
                reason: format!(
                    "the path segment `{segment}` cannot be routed (no segment may start with \
                     `:` or `*`)"
                ),
            });
        }
        let keys = KeySource::new(&options.issuer, options.jwks_uri, &options.ca_files)?;
        Ok(Self {
            metadata_url: metadata::url(&resource_url),
            issuer: options.issuer,
            resource: options.resource,
            resource_url,
            keys,
        })
    }

    /// The issuer, as configured.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// This server's resource URI, as configured.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// This server's resource URI, parsed.
    pub fn resource_url(&self) -> &Url {
        &self.resource_url
    }

    /// Where this server's protected-resource metadata is.
    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// Check an access token.
    pub async fn check(&self, token: &str) -> Result<TokenGrant, TokenError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| TokenError::Malformed(e.to_string()))?;
        let alg = header.alg;
        if alg.family() == AlgorithmFamily::Hmac {
            return Err(TokenError::Symmetric(alg));
        }
        let kid = header.kid.as_deref();
        let jwk = self.keys.key(kid).await?.ok_or_else(|| {
            TokenError::UnknownKey(match kid {
                Some(kid) => format!("`{kid}`"),
                None => "(the token names no `kid` and the issuer has several keys)".into(),
            })
        })?;
        fits(&jwk, alg).map_err(|reason| TokenError::KeyMismatch { alg, reason })?;
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| TokenError::KeyMismatch {
            alg,
            reason: e.to_string(),
        })?;
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECONDS;
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| self.refusal(e))?
            .claims;
        let scopes = claims
            .scope
            .as_deref()
            .unwrap_or_default()
            .split_ascii_whitespace()
            .map(str::to_owned)
            .collect();
        Ok(TokenGrant {
            client: claims.client_id,
            subject: claims.sub,
            scopes,
        })
    }

    fn refusal(&self, error: jsonwebtoken::errors::Error) -> TokenError {
        match error.kind() {
            ErrorKind::ExpiredSignature => TokenError::Expired,
            ErrorKind::ImmatureSignature => TokenError::NotYetValid,
            ErrorKind::InvalidAudience => TokenError::Audience(self.resource.clone()),
            ErrorKind::InvalidIssuer => TokenError::Issuer(self.issuer.clone()),
            ErrorKind::MissingRequiredClaim(claim) => TokenError::MissingClaim(claim.clone()),
            ErrorKind::InvalidSignature => TokenError::Signature,
            _ => TokenError::Malformed(error.to_string()),
        }
    }
}

/// Whether a token signed with `alg` may be checked with `jwk`: a signing key, of the algorithm
/// it declares, or else of the family (and curve) `alg` needs.
fn fits(jwk: &Jwk, alg: Algorithm) -> Result<(), String> {
    if let Some(usage) = &jwk.common.public_key_use
        && *usage != PublicKeyUse::Signature
    {
        return Err("the key is not a signing key (`use` is not `sig`)".into());
    }
    if let Some(declared) = jwk.common.key_algorithm {
        return if declared.to_string() == format!("{alg:?}") {
            Ok(())
        } else {
            Err(format!("the key is for {declared}"))
        };
    }
    let fits = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => alg.family() == AlgorithmFamily::Rsa,
        AlgorithmParameters::EllipticCurve(p) => matches!(
            (&p.curve, alg),
            (EllipticCurve::P256, Algorithm::ES256) | (EllipticCurve::P384, Algorithm::ES384)
        ),
        AlgorithmParameters::OctetKeyPair(p) => {
            p.curve == EllipticCurve::Ed25519 && alg == Algorithm::EdDSA
        }
        AlgorithmParameters::OctetKey(_) => false,
    };
    if fits {
        Ok(())
    } else {
        Err("the key is of another type or curve".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwk(value: serde_json::Value) -> Jwk {
        serde_json::from_value(value).expect("jwk")
    }

    fn grant(client: Option<&str>, subject: Option<&str>) -> TokenGrant {
        TokenGrant {
            client: client.map(str::to_owned),
            subject: subject.map(str::to_owned),
            scopes: BTreeSet::new(),
        }
    }

    #[test]
    fn the_holder_is_the_application_and_the_user_and_no_pair_reads_as_another() {
        let alice = grant(Some("app"), Some("alice")).holder();
        assert_eq!(alice, r#"oauth:"app" for "alice""#);
        assert_ne!(alice, grant(Some("app"), Some("bob")).holder());
        assert_ne!(alice, grant(Some("app"), None).holder());
        // Names holding the separator and quotes stay apart.
        assert_ne!(
            grant(Some(r#"app" for "x"#), Some("y")).holder(),
            grant(Some("app"), Some(r#"x" for "y"#)).holder()
        );
        assert_ne!(
            grant(None, Some("alice")).holder(),
            grant(Some("alice"), None).holder()
        );
        assert_eq!(grant(None, None).holder(), "oauth:(anonymous)");
    }

    #[test]
    fn the_person_is_the_user_whichever_application_and_never_reads_as_a_holder() {
        let alice = grant(Some("app"), Some("alice")).person();
        assert_eq!(alice, grant(Some("another app"), Some("alice")).person());
        assert_ne!(alice, grant(Some("app"), Some("bob")).person());
        assert_eq!(
            grant(Some("app"), None).person(),
            grant(Some("app"), None).holder()
        );
        let holders = [
            grant(Some("app"), Some("alice")),
            grant(None, Some("alice")),
            grant(Some("alice"), None),
            grant(Some(r#"user "alice""#), None),
        ];
        assert!(holders.iter().all(|g| g.holder() != alice), "{alice}");
    }

    #[test]
    fn a_resource_path_the_router_cannot_hold_is_refused_naming_the_segment() {
        for resource in ["http://127.0.0.1:1/mcp/:id", "http://127.0.0.1:1/*all"] {
            let refused = ResourceServer::new(OAuthOptions {
                issuer: "https://127.0.0.1:1".into(),
                resource: resource.into(),
                jwks_uri: None,
                ca_files: Vec::new(),
            });
            let Err(e) = refused else {
                panic!("{resource} was accepted")
            };
            assert!(
                e.to_string().contains("cannot be routed"),
                "{resource}: {e}"
            );
        }
    }

    #[test]
    fn an_algorithm_must_fit_the_key_it_is_checked_with() {
        let ec = jwk(serde_json::json!({"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}));
        assert!(fits(&ec, Algorithm::ES256).is_ok());
        assert!(fits(&ec, Algorithm::ES384).is_err());
        assert!(fits(&ec, Algorithm::RS256).is_err());
        let rsa = jwk(serde_json::json!({"kty": "RSA", "n": "AQAB", "e": "AQAB", "alg": "RS256"}));
        assert!(fits(&rsa, Algorithm::RS256).is_ok());
        assert!(fits(&rsa, Algorithm::PS256).is_err());
        let enc = jwk(serde_json::json!({"kty": "RSA", "n": "AQAB", "e": "AQAB", "use": "enc"}));
        assert!(fits(&enc, Algorithm::RS256).is_err());
        let secret = jwk(serde_json::json!({"kty": "oct", "k": "c2VjcmV0"}));
        assert!(fits(&secret, Algorithm::RS256).is_err());
    }
}
