//! Credential injection: the host adds the secrets a manifest maps
//! (`[[capabilities.http.credentials]]`) to a component's outgoing request, after the request
//! passed the allowlist and the outbound leak scan. The component never holds the value.
//!
//! For each injection target (the `Authorization` header, another header, a query parameter, a
//! placeholder) the most specific mapping that applies to the request's host and path wins:
//! an exact host beats a wildcard, a longer wildcard suffix a shorter one, a longer path prefix
//! a shorter one, and on a tie the mapping declared first. A placeholder is replaced only in
//! requests to its own hosts; anywhere else it stays literal text.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use chitin_registry::manifest::{CredentialMapping, HttpGrant, InjectKind};
use chitin_registry::path_prefix::PathPrefix;
use http::header::{AUTHORIZATION, HOST, HeaderName, HeaderValue};
use http::uri::{PathAndQuery, Uri};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use zeroize::Zeroizing;

use chitin_registry::manifest::SecretsGrant;

use crate::capability::Cut;
use crate::secrets::{SecretError, SecretStore};

/// Bytes left as they are when a value goes into a URL: RFC 3986's unreserved characters.
const URL_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A credential could not be injected. Names the secret, never its value.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The mapped secret is not set.
    #[error(
        "secret `{secret}`, mapped for requests to {host}, is not set; set it with `chitin \
         secret set {secret}`"
    )]
    Missing {
        /// The secret.
        secret: String,
        /// The request's host.
        host: String,
    },
    /// The value cannot be carried where the mapping puts it.
    #[error("the value of secret `{secret}` cannot go into {target} (characters it cannot carry)")]
    InvalidValue {
        /// The secret.
        secret: String,
        /// Where it was to go.
        target: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] SecretError),
}

/// What was injected into a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Injected {
    /// Names of the secrets whose values the request now carries, in declaration order: the
    /// output scrubber redacts these values from the response.
    pub secrets: Vec<String>,
}

/// The mappings of an HTTP grant whose secret the effective secrets grant (`secrets`, after the
/// policy) covers; each other is recorded in `cuts` (the manifest itself must cover them, so
/// only a policy cut leaves one uncovered).
pub fn configure(
    http: Option<&HttpGrant>,
    secrets: Option<&SecretsGrant>,
    cuts: &mut Vec<Cut>,
) -> Arc<[CredentialMapping]> {
    let Some(http) = http else {
        return Arc::new([]);
    };
    // The manifest's globs were checked when it was parsed; one that no longer compiles covers
    // nothing, so the mapping is cut.
    let globs = secrets.and_then(|s| s.glob_set().ok());
    let mut kept = Vec::new();
    for (i, mapping) in http.credentials.iter().enumerate() {
        if globs.as_ref().is_some_and(|g| g.is_match(&mapping.secret)) {
            kept.push(mapping.clone());
        } else {
            cuts.push(Cut {
                what: format!("capabilities.http.credentials[{i}]"),
                reason: format!(
                    "secret `{}` is outside the effective secrets grant (the policy cut \
                     capabilities.secrets)",
                    mapping.secret
                ),
            });
        }
    }
    kept.into()
}

/// Where a mapping puts its value; two mappings with the same target compete.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Target {
    /// A header, by lower-case name (`bearer` and `basic` are `authorization`).
    Header(String),
    /// A query parameter.
    Query(String),
    /// A placeholder text.
    Placeholder(String),
}

fn target(m: &CredentialMapping) -> Target {
    match m.inject {
        InjectKind::Bearer | InjectKind::Basic => Target::Header("authorization".into()),
        InjectKind::Header => {
            Target::Header(m.header.as_deref().unwrap_or("").to_ascii_lowercase())
        }
        InjectKind::Query => Target::Query(m.param.clone().unwrap_or_default()),
        InjectKind::Placeholder => Target::Placeholder(m.placeholder.clone().unwrap_or_default()),
    }
}

/// How specifically `m` matches a request to `host` and `path` (greater is more specific), or
/// `None` when it does not apply.
fn specificity(m: &CredentialMapping, host: &str, path: &str) -> Option<(bool, usize, usize)> {
    let (exact, host_len) = m
        .hosts
        .iter()
        .filter_map(|pattern| match pattern.strip_prefix("*.") {
            Some(suffix) => {
                let dotted = host.strip_suffix(suffix)?;
                (dotted.len() > 1 && dotted.ends_with('.')).then_some((false, suffix.len()))
            }
            None => (pattern.eq_ignore_ascii_case(host)).then_some((true, pattern.len())),
        })
        .max()?;
    let path_len = match &m.path_prefix {
        None => 0,
        Some(prefix) if path_is_plain(path) && PathPrefix::new(prefix).admits_path(path) => {
            prefix.len()
        }
        Some(_) => return None,
    };
    Some((exact, host_len, path_len))
}

/// Whether `path` means what it says: no dot segments and no encoded dots, slashes or
/// backslashes, which a server may resolve to a path outside the prefix after the credential
/// was added for the prefix. Path-scoped credentials are never sent on such a path.
fn path_is_plain(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    !["%2e", "%2f", "%5c", "\\"]
        .iter()
        .any(|bad| lower.contains(bad))
        && !path.split('/').any(|seg| seg == "." || seg == "..")
}

/// The mappings that apply to a request to `host` (lower-case, as in the URL) and `path`: for
/// each target, the most specific one. In declaration order.
pub fn select<'a>(
    mappings: &'a [CredentialMapping],
    host: &str,
    path: &str,
) -> Vec<&'a CredentialMapping> {
    let host = normalize_host(host);
    let mut best: HashMap<Target, (usize, (bool, usize, usize))> = HashMap::new();
    for (i, m) in mappings.iter().enumerate() {
        let Some(score) = specificity(m, &host, path) else {
            continue;
        };
        best.entry(target(m))
            // Strictly greater: on a tie the mapping declared first stays.
            .and_modify(|(at, s)| {
                if score > *s {
                    (*at, *s) = (i, score);
                }
            })
            .or_insert((i, score));
    }
    let mut chosen: Vec<usize> = best.into_values().map(|(i, _)| i).collect();
    chosen.sort_unstable();
    chosen.into_iter().map(|i| &mappings[i]).collect()
}

/// Lower case, without a trailing dot (`API.X.com.` is `api.x.com`).
fn normalize_host(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// Inject the credentials of `mappings` that apply to the request in `parts`, reading values
/// from `store`. Call after the outbound leak scan: a placeholder for another host stays
/// literal, and the scan has already seen the request as the component sent it.
pub fn inject(
    parts: &mut http::request::Parts,
    mappings: &[CredentialMapping],
    store: &SecretStore,
) -> Result<Injected, CredentialError> {
    let Some(host) = parts.uri.host().map(normalize_host) else {
        return Ok(Injected::default());
    };
    let path = parts.uri.path().to_owned();
    let mut injected = Injected::default();
    for m in select(mappings, &host, &path) {
        let value = store
            .get(&m.secret)?
            .ok_or_else(|| CredentialError::Missing {
                secret: m.secret.clone(),
                host: host.clone(),
            })?;
        let applied = match m.inject {
            InjectKind::Bearer => {
                let text = Zeroizing::new(format!("Bearer {}", value.as_str()));
                set_header(parts, AUTHORIZATION, &text, m)?;
                true
            }
            InjectKind::Basic => {
                let pair = Zeroizing::new(match &m.username {
                    Some(user) => format!("{user}:{}", value.as_str()),
                    None if value.contains(':') => value.to_string(),
                    None => format!("{}:", value.as_str()),
                });
                let text = Zeroizing::new(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair.as_bytes())
                ));
                set_header(parts, AUTHORIZATION, &text, m)?;
                true
            }
            InjectKind::Header => {
                let name = m.header.as_deref().unwrap_or("");
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| invalid(m, format!("header `{name}`")))?;
                let text = Zeroizing::new(format!(
                    "{}{}",
                    m.prefix.as_deref().unwrap_or(""),
                    value.as_str()
                ));
                set_header(parts, name, &text, m)?;
                true
            }
            InjectKind::Query => {
                set_query_param(parts, m.param.as_deref().unwrap_or(""), &value, m)?;
                true
            }
            InjectKind::Placeholder => {
                substitute(parts, m.placeholder.as_deref().unwrap_or(""), &value, m)?
            }
        };
        if applied && !injected.secrets.contains(&m.secret) {
            injected.secrets.push(m.secret.clone());
        }
    }
    Ok(injected)
}

fn invalid(m: &CredentialMapping, target: String) -> CredentialError {
    CredentialError::InvalidValue {
        secret: m.secret.clone(),
        target,
    }
}

/// A header value that holds a secret: marked sensitive, so HTTP/2 never indexes it and
/// `Debug` of the request does not show it.
fn secret_header(
    text: &str,
    m: &CredentialMapping,
    target: &str,
) -> Result<HeaderValue, CredentialError> {
    let mut value = HeaderValue::from_str(text).map_err(|_| invalid(m, target.to_owned()))?;
    value.set_sensitive(true);
    Ok(value)
}

/// Set `name` to `text`, replacing what the component sent: the host's credential is the one
/// the mapping promises.
fn set_header(
    parts: &mut http::request::Parts,
    name: HeaderName,
    text: &str,
    m: &CredentialMapping,
) -> Result<(), CredentialError> {
    let value = secret_header(text, m, &format!("header `{name}`"))?;
    parts.headers.insert(name, value);
    Ok(())
}

/// Replace any `param` in the query with `param=<value>`, percent-encoded.
fn set_query_param(
    parts: &mut http::request::Parts,
    param: &str,
    value: &str,
    m: &CredentialMapping,
) -> Result<(), CredentialError> {
    let path = parts.uri.path();
    let mut pairs: Vec<&str> = parts
        .uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|pair| {
            let name = pair.split('=').next().unwrap_or("");
            !pair.is_empty() && percent_decode_str(name).decode_utf8_lossy() != param
        })
        .collect();
    let own = Zeroizing::new(format!(
        "{}={}",
        utf8_percent_encode(param, URL_VALUE),
        utf8_percent_encode(value, URL_VALUE)
    ));
    pairs.push(&own);
    let text = Zeroizing::new(format!("{path}?{}", pairs.join("&")));
    set_path_and_query(parts, &text, m, "the query")
}

/// Replace `placeholder` (as written, or percent-encoded) in the URL's path and query and in
/// every header value but `Host`. Whether it occurred anywhere.
fn substitute(
    parts: &mut http::request::Parts,
    placeholder: &str,
    value: &str,
    m: &CredentialMapping,
) -> Result<bool, CredentialError> {
    if placeholder.is_empty() {
        return Ok(false);
    }
    let mut found = false;
    let encoded_placeholder = utf8_percent_encode(placeholder, URL_VALUE).to_string();
    let encoded_value = Zeroizing::new(utf8_percent_encode(value, URL_VALUE).to_string());
    if let Some(pq) = parts.uri.path_and_query().map(PathAndQuery::as_str)
        && (pq.contains(placeholder) || pq.contains(&encoded_placeholder))
    {
        let text = Zeroizing::new(
            pq.replace(placeholder, &encoded_value)
                .replace(&encoded_placeholder, &encoded_value),
        );
        set_path_and_query(parts, &text, m, "the URL")?;
        found = true;
    }
    let mut replaced = Vec::new();
    for (name, header) in &parts.headers {
        if name == HOST {
            continue;
        }
        let Ok(text) = header.to_str() else {
            continue;
        };
        if text.contains(placeholder) {
            let text = Zeroizing::new(text.replace(placeholder, value));
            replaced.push((
                name.clone(),
                secret_header(&text, m, &format!("header `{name}`"))?,
            ));
        }
    }
    for (name, new) in replaced {
        found = true;
        // A header may repeat: replace every value that carried the placeholder, keep the rest.
        let others: Vec<HeaderValue> = parts
            .headers
            .get_all(&name)
            .iter()
            .filter(|v| v.to_str().map_or(true, |t| !t.contains(placeholder)))
            .cloned()
            .collect();
        parts.headers.remove(&name);
        for other in others {
            parts.headers.append(&name, other);
        }
        parts.headers.append(&name, new);
    }
    Ok(found)
}

/// Put `text` as the URL's path and query.
fn set_path_and_query(
    parts: &mut http::request::Parts,
    text: &str,
    m: &CredentialMapping,
    target: &str,
) -> Result<(), CredentialError> {
    let mut uri = parts.uri.clone().into_parts();
    uri.path_and_query = Some(PathAndQuery::try_from(text).map_err(|_| invalid(m, target.into()))?);
    parts.uri = Uri::from_parts(uri).map_err(|_| invalid(m, target.into()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::MasterKey;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    fn store(dir: &std::path::Path) -> SecretStore {
        let db = Arc::new(crate::state_db::StateDb::new(&dir.join("db.sqlite")));
        let s = SecretStore::with_key(db, MasterKey::load(dir, Some(KEY)).expect("key"))
            .expect("store");
        s.set("gh", "ghtoken-1234").expect("set");
        s.set("user_pw", "alice:pa ss").expect("set");
        s.set("key", "k/y+1&2").expect("set");
        s
    }

    fn mapping(toml_text: &str) -> CredentialMapping {
        let m: CredentialMapping = toml::from_str(toml_text).expect("mapping");
        m.validate("c").expect("valid");
        m
    }

    fn parts(uri: &str, headers: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder().uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).expect("request").into_parts().0
    }

    fn header(p: &http::request::Parts, name: &str) -> Option<String> {
        p.headers
            .get(name)
            .map(|v| v.to_str().expect("ascii").to_owned())
    }

    #[test]
    fn each_kind_is_injected() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = store(dir.path());
        type Check = Box<dyn Fn(&http::request::Parts)>;
        let cases: Vec<(&str, &str, Check)> = vec![
            (
                "secret = \"gh\"\nhosts = [\"api.x.com\"]\ninject = \"bearer\"",
                "https://api.x.com/repos",
                Box::new(|p| {
                    assert_eq!(
                        header(p, "authorization").as_deref(),
                        Some("Bearer ghtoken-1234")
                    )
                }),
            ),
            (
                "secret = \"gh\"\nhosts = [\"api.x.com\"]\ninject = \"basic\"\nusername = \"bob\"",
                "https://api.x.com/",
                Box::new(|p| {
                    let want = base64::engine::general_purpose::STANDARD.encode("bob:ghtoken-1234");
                    assert_eq!(header(p, "authorization"), Some(format!("Basic {want}")));
                }),
            ),
            (
                "secret = \"user_pw\"\nhosts = [\"api.x.com\"]\ninject = \"basic\"",
                "https://api.x.com/",
                Box::new(|p| {
                    let want = base64::engine::general_purpose::STANDARD.encode("alice:pa ss");
                    assert_eq!(header(p, "authorization"), Some(format!("Basic {want}")));
                }),
            ),
            (
                "secret = \"gh\"\nhosts = [\"api.x.com\"]\ninject = \"header\"\nheader = \"X-Api-Key\"\nprefix = \"Token \"",
                "https://api.x.com/",
                Box::new(|p| {
                    assert_eq!(
                        header(p, "x-api-key").as_deref(),
                        Some("Token ghtoken-1234")
                    )
                }),
            ),
            (
                "secret = \"key\"\nhosts = [\"api.x.com\"]\ninject = \"query\"\nparam = \"key\"",
                "https://api.x.com/v1/find?q=a%20b&key=mine",
                Box::new(|p| {
                    assert_eq!(
                        p.uri.to_string(),
                        "https://api.x.com/v1/find?q=a%20b&key=k%2Fy%2B1%262"
                    )
                }),
            ),
            (
                "secret = \"gh\"\nhosts = [\"api.x.com\"]\ninject = \"placeholder\"\nplaceholder = \"{{GH}}\"",
                "https://api.x.com/bot%7B%7BGH%7D%7D/send",
                Box::new(|p| assert_eq!(p.uri.path(), "/botghtoken-1234/send")),
            ),
        ];
        for (toml_text, uri, check) in cases {
            let m = mapping(toml_text);
            let mut p = parts(uri, &[("authorization", "Bearer from-the-component")]);
            let got = inject(&mut p, std::slice::from_ref(&m), &s).expect("inject");
            assert_eq!(got.secrets, std::slice::from_ref(&m.secret), "{toml_text}");
            check(&p);
        }
    }

    #[test]
    fn placeholders_in_headers_are_replaced_only_for_their_own_hosts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = store(dir.path());
        let m = [mapping(
            "secret = \"gh\"\nhosts = [\"a.example\"]\ninject = \"placeholder\"\nplaceholder = \"{{GH}}\"",
        )];
        let mut p = parts("https://a.example/x", &[("authorization", "token {{GH}}")]);
        assert_eq!(inject(&mut p, &m, &s).expect("inject").secrets, ["gh"]);
        assert_eq!(
            header(&p, "authorization").as_deref(),
            Some("token ghtoken-1234")
        );
        assert!(p.headers["authorization"].is_sensitive());

        let mut p = parts(
            "https://b.example/{{GH}}",
            &[("authorization", "token {{GH}}")],
        );
        assert_eq!(inject(&mut p, &m, &s).expect("inject"), Injected::default());
        assert_eq!(header(&p, "authorization").as_deref(), Some("token {{GH}}"));
        assert_eq!(p.uri.path(), "/{{GH}}");
        // A placeholder that does not occur injects nothing.
        let mut p = parts("https://a.example/plain", &[]);
        assert_eq!(inject(&mut p, &m, &s).expect("inject"), Injected::default());
    }

    #[test]
    fn the_most_specific_mapping_wins_per_target() {
        let ms = [
            mapping("secret = \"a\"\nhosts = [\"*.x.com\"]\ninject = \"bearer\""),
            mapping("secret = \"b\"\nhosts = [\"*.api.x.com\"]\ninject = \"bearer\""),
            mapping("secret = \"c\"\nhosts = [\"v2.api.x.com\"]\ninject = \"bearer\""),
            mapping(
                "secret = \"d\"\nhosts = [\"*.api.x.com\"]\npath_prefix = \"/v1\"\ninject = \"bearer\"",
            ),
            mapping(
                "secret = \"e\"\nhosts = [\"*.api.x.com\"]\npath_prefix = \"/v1\"\ninject = \"bearer\"",
            ),
            mapping(
                "secret = \"f\"\nhosts = [\"*.x.com\"]\ninject = \"header\"\nheader = \"X-Key\"",
            ),
        ];
        let names = |host: &str, path: &str| -> Vec<String> {
            select(&ms, host, path)
                .iter()
                .map(|m| m.secret.clone())
                .collect()
        };
        assert_eq!(names("www.x.com", "/"), ["a", "f"]);
        assert_eq!(names("eu.api.x.com", "/"), ["b", "f"]);
        assert_eq!(
            names("eu.api.x.com", "/v1/items"),
            ["d", "f"],
            "longer path; first of a tie"
        );
        assert_eq!(
            names("v2.api.x.com", "/v1/items"),
            ["c", "f"],
            "exact host beats all"
        );
        assert_eq!(names("V2.API.X.COM.", "/"), ["c", "f"]);
        assert!(
            names("x.com", "/").is_empty(),
            "a wildcard does not cover its suffix"
        );
        assert!(names("evilx.com", "/").is_empty());
    }

    #[test]
    fn path_scoped_mappings_stay_inside_their_prefix() {
        let ms = [mapping(
            "secret = \"gh\"\nhosts = [\"api.x.com\"]\npath_prefix = \"/v1\"\ninject = \"bearer\"",
        )];
        assert_eq!(select(&ms, "api.x.com", "/v1").len(), 1);
        assert_eq!(select(&ms, "api.x.com", "/v1/a").len(), 1);
        for path in [
            "/",
            "/v10",
            "/v2/a",
            "/v1/../admin",
            "/v1/%2e%2e/admin",
            "/v1%2fadmin",
            "/V1",
        ] {
            assert!(select(&ms, "api.x.com", path).is_empty(), "{path}");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = parts("https://api.x.com/v2/a", &[]);
        assert_eq!(
            inject(&mut p, &ms, &store(dir.path())).expect("inject"),
            Injected::default()
        );
        assert!(p.headers.get("authorization").is_none());
    }

    #[test]
    fn a_missing_secret_or_an_unsendable_value_is_an_error_without_the_value() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = store(dir.path());
        s.set("crlf", "line1\r\nX-Evil: 1").expect("set");
        let ms = [mapping(
            "secret = \"nope\"\nhosts = [\"api.x.com\"]\ninject = \"bearer\"",
        )];
        let err = inject(&mut parts("https://api.x.com/", &[]), &ms, &s).unwrap_err();
        assert!(err.to_string().contains("chitin secret set nope"), "{err}");
        let ms = [mapping(
            "secret = \"crlf\"\nhosts = [\"api.x.com\"]\ninject = \"bearer\"",
        )];
        let err = inject(&mut parts("https://api.x.com/", &[]), &ms, &s).unwrap_err();
        assert!(matches!(err, CredentialError::InvalidValue { .. }), "{err}");
        assert!(!err.to_string().contains("line1"), "{err}");
    }
}
