//! `[capabilities.http]`: where the component may send HTTP requests, and how often.
//!
//! Each allow entry names a scheme (HTTPS unless it says `http`), a host (exact, or `*.suffix`
//! for any subdomain), a port (the scheme's default unless given), a path prefix (matched on
//! segment boundaries) and methods (GET and HEAD unless given). The host enforces the entries
//! (`chitin-host`'s `caps::http::allowlist`); this module defines and validates the syntax.

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::ManifestError;
use super::SecretsGrant;
use super::audit_line::AuditLine;
use super::credentials::CredentialMapping;
use crate::capability::Section;
use crate::manifest::Capabilities;
use crate::path_prefix::PathPrefix;
use crate::widening::limit;

/// Outbound HTTP the component may make. An empty allowlist allows nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpGrant {
    /// Allowed destinations.
    #[serde(default)]
    pub allow: Vec<HttpAllow>,
    /// Requests per window the component asks for; the policy's ceiling clamps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimitRequest>,
    /// Secrets the host injects into requests (`[[capabilities.http.credentials]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<CredentialMapping>,
}

impl Section for HttpGrant {
    const NAME: &'static str = "http";
    const IMPORTS: &'static [&'static str] = &["wasi:http"];
    const LINKED_WITHOUT_GRANT: bool = true;

    fn check(&self, all: &Capabilities) -> Result<(), ManifestError> {
        self.validate()?;
        check_credentials(self, all.secrets.as_ref())
    }

    fn widenings(&self, old: Option<&Self>, out: &mut Vec<String>) {
        widen(old, self, out);
    }

    fn audit_lines(&self) -> Vec<AuditLine> {
        HttpGrant::audit_lines(self)
    }
}

/// Each widening from `old` to `new`, as `key: what changed`.
fn widen(old: Option<&HttpGrant>, new: &HttpGrant, out: &mut Vec<String>) {
    let before: Vec<Destination> = old
        .map(|g| g.allow.as_slice())
        .unwrap_or_default()
        .iter()
        .map(Destination::of)
        .collect();
    for entry in &new.allow {
        let want = Destination::of(entry);
        let places: Vec<&Destination> = before.iter().filter(|d| d.covers_place(&want)).collect();
        let methods: BTreeSet<&String> = places.iter().flat_map(|d| &d.methods).collect();
        let extra: Vec<&String> = want
            .methods
            .iter()
            .filter(|m| !methods.contains(m))
            .collect();
        let target = entry.target();
        if places.is_empty() {
            out.push(format!("capabilities.http.allow: adds {target}"));
        } else if !extra.is_empty() {
            out.push(format!(
                "capabilities.http.allow: {target} adds method{} {}{}",
                if extra.len() == 1 { "" } else { "s" },
                extra
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                if entry.methods.is_empty() {
                    " (empty methods mean GET and HEAD)"
                } else {
                    ""
                }
            ));
        }
    }
    let none = RateLimitRequest {
        per_minute: None,
        per_hour: None,
    };
    let old_rate = old.and_then(|g| g.rate_limit).unwrap_or(none);
    let new_rate = new.rate_limit.unwrap_or(none);
    limit(
        "capabilities.http.rate_limit.per_minute",
        old_rate.per_minute.map(u64::from),
        new_rate.per_minute.map(u64::from),
        old.is_some(),
        out,
    );
    limit(
        "capabilities.http.rate_limit.per_hour",
        old_rate.per_hour.map(u64::from),
        new_rate.per_hour.map(u64::from),
        old.is_some(),
        out,
    );
    let mappings = old.map(|g| g.credentials.as_slice()).unwrap_or_default();
    for mapping in &new.credentials {
        // Covered by an old mapping that injects the same way into at least these hosts.
        let covered = mappings.iter().any(|o| {
            let mut same = mapping.clone();
            same.hosts.clone_from(&o.hosts);
            same == *o && mapping.hosts.iter().all(|h| o.hosts.contains(h))
        });
        if !covered {
            out.push(format!(
                "capabilities.http.credentials: injects secret `{}` into requests to {} ({})",
                mapping.secret,
                mapping.hosts.join(", "),
                mapping.inject.as_str()
            ));
        }
    }
}

/// One allowed destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpAllow {
    /// `https` (the default) or `http`; `http` also admits HTTPS, and plain HTTP only to hosts
    /// the operator's policy lists in `http.plain_http_hosts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// Host name, exact or `*.suffix` (any subdomain of suffix, not suffix itself), or an IP
    /// address (IPv6 in brackets).
    pub host: String,
    /// Port; absent means the request scheme's default port (443, or 80 for plain HTTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Path prefix, matched on segment boundaries (`/api/v1` admits `/api/v1/x`, never
    /// `/api/v1-evil`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
    /// Allowed methods; empty means GET and HEAD.
    #[serde(default)]
    pub methods: Vec<String>,
}

impl HttpAllow {
    /// The entry as a URL prefix (`https://api.example.com:8443/v1`), for people to read.
    pub fn target(&self) -> String {
        format!(
            "{}://{}{}{}",
            self.scheme.as_deref().unwrap_or("https"),
            self.host,
            self.port.map(|p| format!(":{p}")).unwrap_or_default(),
            self.path_prefix.as_deref().unwrap_or_default()
        )
    }
}

/// Requests per window a component asks for; an absent window takes the policy's ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitRequest {
    /// Requests per minute (sliding window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_minute: Option<u32>,
    /// Requests per hour (sliding window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_hour: Option<u32>,
}

/// Methods no grant can allow: CONNECT opens a tunnel (a raw socket in disguise), TRACE and
/// TRACK echo the request back, credentials the host injected included.
pub const FORBIDDEN_METHODS: [&str; 3] = ["CONNECT", "TRACE", "TRACK"];

/// A parsed host pattern: what an allow entry's `host` (or a policy's plain-HTTP host) matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// Exactly this domain (lowercase ASCII, IDN in punycode, no trailing dot).
    Domain(String),
    /// Any proper subdomain of this domain (`*.x.com` holds `x.com`).
    Subdomains(String),
    /// Exactly this IP address.
    Ip(IpAddr),
    /// `*`: any host. The address rules still refuse every non-public address; an audit shows
    /// this grant as reaching the whole public internet.
    Any,
}

impl HostPattern {
    /// Parse `*.suffix`, a domain (case-insensitive, IDN allowed, one trailing dot ignored) or
    /// an IP address (IPv6 with or without brackets).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("must not be empty".into());
        }
        if text == "*" {
            return Ok(Self::Any);
        }
        if let Some(suffix) = text.strip_prefix("*.") {
            return match Self::parse(suffix)? {
                Self::Domain(d) if d.contains('.') => Ok(Self::Subdomains(d)),
                // A wildcard over a top-level domain would admit half the internet.
                Self::Domain(d) => Err(format!(
                    "`*.{d}` covers a whole top-level domain; name at least two labels"
                )),
                Self::Subdomains(_) | Self::Any => {
                    Err(format!("`{text}`: only one leading `*.` is allowed"))
                }
                Self::Ip(_) => {
                    Err("a wildcard needs a domain after `*.`, not an IP address".into())
                }
            };
        }
        if text.contains('*') {
            return Err(format!(
                "`{text}`: a wildcard is only allowed as a leading `*.` (as in `*.example.com`)"
            ));
        }
        let bare = text.strip_prefix('[').and_then(|t| t.strip_suffix(']'));
        if let Ok(ip) = bare.unwrap_or(text).parse::<IpAddr>() {
            return Ok(Self::Ip(ip));
        }
        let host = url::Host::parse(text).map_err(|e| format!("`{text}` is not a host: {e}"))?;
        match host {
            url::Host::Domain(d) => {
                let d = d.strip_suffix('.').unwrap_or(&d);
                let valid = !d.is_empty()
                    && d.split('.').all(|label| {
                        !label.is_empty()
                            && label
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                    });
                if valid {
                    Ok(Self::Domain(d.to_owned()))
                } else {
                    Err(format!(
                        "`{text}` is not a host name (letters, digits, `-` and `_` in \
                         dot-separated labels)"
                    ))
                }
            }
            // Spellings such as `0x7f.1` or `2130706433` are IPv4 addresses to a URL parser.
            url::Host::Ipv4(ip) => Ok(Self::Ip(ip.into())),
            url::Host::Ipv6(ip) => Ok(Self::Ip(ip.into())),
        }
    }

    /// Whether a request's host (as the URL parser normalised it) matches.
    pub fn matches(&self, host: &url::Host<String>) -> bool {
        match (self, host) {
            (Self::Any, _) => true,
            (Self::Ip(want), url::Host::Ipv4(ip)) => *want == IpAddr::V4(*ip),
            (Self::Ip(want), url::Host::Ipv6(ip)) => *want == IpAddr::V6(*ip),
            (Self::Domain(want), url::Host::Domain(d)) => {
                d.strip_suffix('.').unwrap_or(d).eq_ignore_ascii_case(want)
            }
            (Self::Subdomains(suffix), url::Host::Domain(d)) => {
                let d = d.strip_suffix('.').unwrap_or(d);
                // `a.x.com` ends with `.x.com` after a non-empty label; `x.com` and `evilx.com`
                // do not.
                let Some(dot) = d.len().checked_sub(suffix.len() + 1) else {
                    return false;
                };
                dot > 0
                    && d.as_bytes()[dot] == b'.'
                    && d.get(dot + 1..)
                        .is_some_and(|t| t.eq_ignore_ascii_case(suffix))
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Any => f.write_str("*"),
            Self::Domain(d) => f.write_str(d),
            Self::Subdomains(d) => write!(f, "*.{d}"),
            Self::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Self::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

impl HttpGrant {
    /// Every entry's scheme, host, port, path prefix and methods are well formed; rate limits
    /// are above zero.
    pub fn validate(&self) -> Result<(), ManifestError> {
        for (i, a) in self.allow.iter().enumerate() {
            let field = |key: &str| format!("capabilities.http.allow[{i}].{key}");
            if let Some(scheme) = &a.scheme
                && !matches!(scheme.as_str(), "https" | "http")
            {
                return Err(ManifestError::invalid(
                    field("scheme"),
                    format!("`{scheme}` is not `https` or `http`"),
                ));
            }
            HostPattern::parse(&a.host)
                .map_err(|reason| ManifestError::invalid(field("host"), reason))?;
            if a.port == Some(0) {
                return Err(ManifestError::invalid(
                    field("port"),
                    "port 0 is not a port",
                ));
            }
            if let Some(prefix) = &a.path_prefix {
                check_path_prefix(prefix)
                    .map_err(|r| ManifestError::invalid(field("path_prefix"), r))?;
            }
            for (j, m) in a.methods.iter().enumerate() {
                check_method(m)
                    .map_err(|r| ManifestError::invalid(field(&format!("methods[{j}]")), r))?;
            }
        }
        if let Some(rate) = &self.rate_limit {
            for (key, value) in [("per_minute", rate.per_minute), ("per_hour", rate.per_hour)] {
                if value == Some(0) {
                    return Err(ManifestError::invalid(
                        format!("capabilities.http.rate_limit.{key}"),
                        "must be greater than zero (omit it to take the policy's ceiling)",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A path prefix starts with `/` and holds no dot segment, query, fragment, backslash or
/// percent sign: it is compared with the request's normalised path, segment by segment.
fn check_path_prefix(prefix: &str) -> Result<(), String> {
    if !prefix.starts_with('/') {
        return Err(format!("`{prefix}` must start with `/`"));
    }
    if let Some(c) = prefix
        .chars()
        .find(|c| matches!(c, '?' | '#' | '\\' | '%') || c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "`{prefix}` contains {c:?}; a prefix is a plain path (no query, fragment, backslash, \
             escape or whitespace)"
        ));
    }
    if prefix.split('/').any(|s| s == "." || s == "..") {
        return Err(format!("`{prefix}` contains a `.` or `..` segment"));
    }
    Ok(())
}

/// A method is an HTTP token of ASCII letters (and `-`), never one of [`FORBIDDEN_METHODS`].
fn check_method(method: &str) -> Result<(), String> {
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-') {
        return Err(format!("`{method}` is not an HTTP method"));
    }
    let upper = method.to_ascii_uppercase();
    if FORBIDDEN_METHODS.contains(&upper.as_str()) {
        return Err(format!(
            "{upper} is never allowed (tunnels and request echoes)"
        ));
    }
    Ok(())
}

/// Each credential mapping is valid and names a secret the secrets globs cover: a manifest
/// cannot have the host inject a secret it does not declare to an auditor.
fn check_credentials(
    http: &HttpGrant,
    secrets: Option<&SecretsGrant>,
) -> Result<(), ManifestError> {
    let globs = match secrets {
        Some(s) => s.glob_set()?,
        None => globset::GlobSet::empty(),
    };
    for (i, mapping) in http.credentials.iter().enumerate() {
        let field = format!("capabilities.http.credentials[{i}]");
        mapping.validate(&field)?;
        if !globs.is_match(&mapping.secret) {
            return Err(ManifestError::invalid(
                format!("{field}.secret"),
                format!(
                    "secret `{}` is not covered by capabilities.secrets.names; add it there so \
                     the grant shows it",
                    mapping.secret
                ),
            ));
        }
    }
    Ok(())
}

/// An HTTP allow entry with its defaults made explicit.
struct Destination {
    host: Option<HostPattern>,
    plain_http: bool,
    ports: BTreeSet<u16>,
    prefix: PathPrefix,
    methods: BTreeSet<String>,
}

impl Destination {
    fn of(a: &HttpAllow) -> Self {
        let plain_http = a.scheme.as_deref() == Some("http");
        let ports = match (a.port, plain_http) {
            (Some(p), _) => BTreeSet::from([p]),
            (None, false) => BTreeSet::from([443]),
            (None, true) => BTreeSet::from([443, 80]),
        };
        let methods = if a.methods.is_empty() {
            BTreeSet::from(["GET".to_owned(), "HEAD".to_owned()])
        } else {
            a.methods.iter().map(|m| m.to_ascii_uppercase()).collect()
        };
        Self {
            host: HostPattern::parse(&a.host).ok(),
            plain_http,
            ports,
            prefix: PathPrefix::new(a.path_prefix.as_deref().unwrap_or_default()),
            methods,
        }
    }

    /// Whether every request `other` admits, this admits too, methods aside.
    fn covers_place(&self, other: &Destination) -> bool {
        let host = match (&self.host, &other.host) {
            (Some(a), Some(b)) => host_covers(a, b),
            _ => false,
        };
        host && (self.plain_http || !other.plain_http)
            && other.ports.is_subset(&self.ports)
            && self.prefix.covers(&other.prefix)
    }
}

/// Whether host pattern `a` matches every host `b` does.
fn host_covers(a: &HostPattern, b: &HostPattern) -> bool {
    let under = |d: &str, suffix: &str| {
        d.len() > suffix.len()
            && d.to_ascii_lowercase()
                .ends_with(&format!(".{}", suffix.to_ascii_lowercase()))
    };
    match (a, b) {
        (HostPattern::Any, _) => true,
        (_, HostPattern::Any) => false,
        (HostPattern::Domain(x), HostPattern::Domain(y)) => x.eq_ignore_ascii_case(y),
        (HostPattern::Ip(x), HostPattern::Ip(y)) => x == y,
        (HostPattern::Subdomains(s), HostPattern::Domain(d)) => under(d, s),
        (HostPattern::Subdomains(s), HostPattern::Subdomains(t)) => {
            s.eq_ignore_ascii_case(t) || under(t, s)
        }
        _ => false,
    }
}

impl HttpGrant {
    /// Each allowed destination in plain words (the credentials have lines of their own, see
    /// [`CredentialMapping::audit_line`]).
    pub fn audit_lines(&self) -> Vec<AuditLine> {
        self.allow
            .iter()
            .map(|entry| {
                let methods = if entry.methods.is_empty() {
                    "GET/HEAD".to_owned()
                } else {
                    entry.methods.join("/")
                };
                let target = entry.target();
                let whom = if entry.host.trim() == "*" {
                    "ANY public host (only non-public addresses are refused)".to_owned()
                } else {
                    target.clone()
                };
                AuditLine {
                    name: "http",
                    scope: format!("{methods} {target}"),
                    risk: format!(
                        "can send {methods} requests to {whom}, carrying data off this machine"
                    ),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(host: &str) -> HttpAllow {
        HttpAllow {
            scheme: None,
            host: host.into(),
            port: None,
            path_prefix: None,
            methods: vec![],
        }
    }

    fn refusal(grant: HttpGrant) -> (String, String) {
        match grant.validate() {
            Err(ManifestError::Invalid { field, reason }) => (field, reason),
            other => panic!("expected an invalid field, got {other:?}"),
        }
    }

    fn one(a: HttpAllow) -> HttpGrant {
        HttpGrant {
            credentials: Vec::new(),
            allow: vec![a],
            rate_limit: None,
        }
    }

    #[test]
    fn a_lone_star_is_any_host() {
        let any = HostPattern::parse("*").expect("`*` parses");
        assert_eq!(any, HostPattern::Any);
        assert!(any.matches(&url::Host::Domain("example.com".into())));
        assert!(any.matches(&url::Host::Ipv4("93.184.216.34".parse().expect("ip"))));
        assert_eq!(any.to_string(), "*");
    }

    #[test]
    fn malformed_entries_are_refused_naming_the_key() {
        let rows: Vec<(HttpAllow, &str, &str)> = vec![
            (
                HttpAllow {
                    scheme: Some("ftp".into()),
                    ..entry("x.com")
                },
                "allow[0].scheme",
                "ftp",
            ),
            (entry(""), "allow[0].host", "empty"),
            (entry("   "), "allow[0].host", "empty"),
            (entry("*.com"), "allow[0].host", "top-level"),
            (entry("a.*.com"), "allow[0].host", "leading `*.`"),
            (entry("*.1.2.3.4"), "allow[0].host", "IP address"),
            (entry("x.com/path"), "allow[0].host", "not a host"),
            (entry("x.com:8443"), "allow[0].host", "not a host"),
            (
                HttpAllow {
                    port: Some(0),
                    ..entry("x.com")
                },
                "allow[0].port",
                "port 0",
            ),
            (
                HttpAllow {
                    path_prefix: Some("api".into()),
                    ..entry("x.com")
                },
                "allow[0].path_prefix",
                "start with `/`",
            ),
            (
                HttpAllow {
                    path_prefix: Some("/api/../admin".into()),
                    ..entry("x.com")
                },
                "allow[0].path_prefix",
                "`..`",
            ),
            (
                HttpAllow {
                    path_prefix: Some("/api%2fv1".into()),
                    ..entry("x.com")
                },
                "allow[0].path_prefix",
                "escape",
            ),
            (
                HttpAllow {
                    methods: vec!["GET".into(), "CONNECT".into()],
                    ..entry("x.com")
                },
                "allow[0].methods[1]",
                "CONNECT is never allowed",
            ),
            (
                HttpAllow {
                    methods: vec!["trace".into()],
                    ..entry("x.com")
                },
                "allow[0].methods[0]",
                "TRACE",
            ),
            (
                HttpAllow {
                    methods: vec!["GET\r\nX".into()],
                    ..entry("x.com")
                },
                "allow[0].methods[0]",
                "not an HTTP method",
            ),
        ];
        for (a, key, says) in rows {
            let (field, reason) = refusal(one(a.clone()));
            assert_eq!(field, format!("capabilities.http.{key}"), "{a:?}");
            assert!(reason.contains(says), "{a:?}: {reason}");
        }
    }

    #[test]
    fn well_formed_entries_pass() {
        for host in [
            "api.github.com",
            "API.GitHub.com.",
            "*.x.com",
            "bücher.de",
            "93.184.216.34",
            "[2606:2800:220:1::1]",
            "2606:2800:220:1::1",
        ] {
            one(entry(host))
                .validate()
                .unwrap_or_else(|e| panic!("{host}: {e}"));
        }
        let full = HttpGrant {
            credentials: Vec::new(),
            allow: vec![HttpAllow {
                scheme: Some("http".into()),
                host: "x.com".into(),
                port: Some(8080),
                path_prefix: Some("/api/v1.2/".into()),
                methods: vec!["post".into(), "GET".into()],
            }],
            rate_limit: Some(RateLimitRequest {
                per_minute: Some(10),
                per_hour: None,
            }),
        };
        full.validate().expect("valid");
    }

    #[test]
    fn a_zero_rate_limit_is_refused() {
        let grant = HttpGrant {
            credentials: Vec::new(),
            allow: vec![],
            rate_limit: Some(RateLimitRequest {
                per_minute: None,
                per_hour: Some(0),
            }),
        };
        let (field, reason) = refusal(grant);
        assert_eq!(field, "capabilities.http.rate_limit.per_hour");
        assert!(reason.contains("greater than zero"));
    }

    #[test]
    fn host_patterns_normalise_and_match() {
        let p = |s: &str| HostPattern::parse(s).expect(s);
        let h = |s: &str| url::Host::parse(s).expect(s);
        assert_eq!(
            p("API.Example.COM."),
            HostPattern::Domain("api.example.com".into())
        );
        assert_eq!(
            p("bücher.de"),
            HostPattern::Domain("xn--bcher-kva.de".into())
        );
        assert_eq!(p("0x7f.1"), HostPattern::Ip("127.0.0.1".parse().unwrap()));
        let wild = p("*.x.com");
        for (host, hit) in [
            ("a.x.com", true),
            ("a.b.x.com", true),
            ("A.X.COM", true),
            ("a.x.com.", true),
            ("x.com", false),
            ("evilx.com", false),
            ("a.evilx.com", false),
            ("x.com.evil.net", false),
        ] {
            assert_eq!(wild.matches(&h(host)), hit, "*.x.com vs {host}");
        }
        let exact = p("x.com");
        assert!(exact.matches(&h("X.com.")));
        assert!(!exact.matches(&h("a.x.com")));
        assert!(p("[::1]").matches(&h("[0:0::1]")));
        assert!(!p("127.0.0.1").matches(&h("localhost")));
    }

    #[test]
    fn the_new_keys_round_trip_and_unknown_keys_are_refused() {
        let text = r#"
            allow = [{ scheme = "http", host = "x.com", port = 8080, path_prefix = "/a", methods = ["POST"] }]
            rate_limit = { per_minute = 5, per_hour = 100 }
        "#;
        let grant: HttpGrant = toml::from_str(text).expect("parses");
        assert_eq!(grant.allow[0].port, Some(8080));
        assert_eq!(grant.rate_limit.and_then(|r| r.per_minute), Some(5));
        let back: HttpGrant = toml::from_str(&toml::to_string(&grant).unwrap()).unwrap();
        assert_eq!(back, grant);
        let typo = r#"allow = [{ host = "x.com", prot = 1 }]"#;
        assert!(toml::from_str::<HttpGrant>(typo).is_err());
        let typo = "rate_limit = { per_second = 1 }";
        assert!(toml::from_str::<HttpGrant>(typo).is_err());
    }
}
