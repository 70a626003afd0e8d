//! Which requests a component's HTTP grant admits: scheme, host, port, path prefix and method,
//! checked on a URL that is first made unambiguous.
//!
//! The URL is parsed the WHATWG way (the `url` crate), so every spelling of a host comes out in
//! one form (`0x7f.1`, `2130706433` and `0177.0.0.1` are all `127.0.0.1`; `EXAMPLE.com.` is
//! `example.com.`), and the request goes to [`Target::url`], the normalised URL — never to the
//! string the component gave. Before that, the raw string is refused if it could mean one thing
//! here and another to a server or proxy:
//!
//! - userinfo (`user:pass@host`, `allowed.com@evil.com`), whitespace, control characters and
//!   backslashes (which WHATWG parsers read as `/`);
//! - malformed escapes (`%zz`, `%4`, a trailing `%`) in the path or query;
//! - encoded separators (`%2f`, `%5c`), an encoded NUL, and double-encoded dots and separators
//!   (`%252e`) in the path;
//! - dot segments spelled with escapes (`%2e`, `.%2e`, `%2e%2e`), and dot segments with
//!   parameters (`..;`, which some servers read as `..`).
//!
//! Literal `.` and `..` segments are resolved as every client does, and the resolved path is
//! what must lie under the entry's prefix and what is sent; a `..` that climbs out of the
//! prefix is therefore refused, with a reason saying the path was resolved. An escape that does
//! not form a whole dot segment (`file%2etxt`, `%20`, `%C3%A9`) is ordinary and passes.
//!
//! Paths are compared with the prefix segment by segment after decoding escapes, so
//! `/api/v1` admits `/api/v1`, `/api/v1/` and `/api/%76%31/x` but never `/api/v1-evil`.

use chitin_registry::manifest::http::{FORBIDDEN_METHODS, HostPattern, HttpGrant};
use chitin_registry::path_prefix::PathPrefix;
use url::Url;

use super::error::HttpRefusal;

/// Where an admitted request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The normalised URL to send (dot segments resolved, no fragment).
    pub url: Url,
    /// The host, as parsed: a domain (lowercase ASCII) or an IP address.
    pub host: url::Host<String>,
    /// The port to connect to.
    pub port: u16,
    /// Whether the request uses TLS.
    pub scheme_is_https: bool,
}

/// One allow entry, parsed.
#[derive(Debug, Clone)]
struct Entry {
    /// The entry says `scheme = "http"`: plain HTTP is admitted where the policy agrees.
    plain_http: bool,
    host: HostPattern,
    port: Option<u16>,
    /// The prefix as written (for messages), and as matched.
    prefix: Option<(String, PathPrefix)>,
    /// Uppercase methods; never empty.
    methods: Vec<String>,
}

/// A grant's allow entries plus the policy's plain-HTTP hosts, ready to check requests.
#[derive(Debug, Clone)]
pub struct Allowlist {
    entries: Vec<Entry>,
    plain_http_hosts: Vec<HostPattern>,
}

/// How far a request got through one entry before it failed: the furthest across entries is
/// what the refusal explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Host,
    Scheme,
    Port,
    Path,
    Method,
}

impl Allowlist {
    /// The allowlist of `grant` (none: nothing is allowed); plain HTTP only to hosts matching
    /// `plain_http_hosts` (the policy's, as `HostPattern` syntax).
    pub fn new(grant: Option<&HttpGrant>, plain_http_hosts: &[String]) -> Self {
        // Manifests and policies are validated when loaded, so every pattern parses; one that
        // somehow does not is dropped, which can only narrow what is allowed.
        let entries = grant
            .map(|g| g.allow.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|a| {
                Some(Entry {
                    plain_http: a.scheme.as_deref() == Some("http"),
                    host: HostPattern::parse(&a.host).ok()?,
                    port: a.port,
                    prefix: a
                        .path_prefix
                        .as_ref()
                        .map(|p| (p.clone(), PathPrefix::new(p))),
                    methods: if a.methods.is_empty() {
                        vec!["GET".into(), "HEAD".into()]
                    } else {
                        a.methods.iter().map(|m| m.to_ascii_uppercase()).collect()
                    },
                })
            })
            .collect();
        let plain_http_hosts = plain_http_hosts
            .iter()
            .filter_map(|h| HostPattern::parse(h).ok())
            .collect();
        Self {
            entries,
            plain_http_hosts,
        }
    }

    /// Admit `method url` and say where it goes, or refuse it naming the part that matched no
    /// entry.
    pub fn check(&self, method: &str, url: &str) -> Result<Target, HttpRefusal> {
        let not_allowed = |reason: String| HttpRefusal::NotAllowed {
            method: method.to_owned(),
            url: url.to_owned(),
            reason,
        };
        if self.entries.is_empty() {
            return Err(not_allowed(
                "the allowlist is empty: this component's grant allows no HTTP destination".into(),
            ));
        }
        let method_upper = method.to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-') {
            return Err(not_allowed(format!(
                "method `{method}` is not an HTTP method"
            )));
        }
        if FORBIDDEN_METHODS.contains(&method_upper.as_str()) {
            return Err(not_allowed(format!(
                "method {method_upper} is never allowed (tunnels and request echoes)"
            )));
        }
        let parsed = Parsed::new(url)?;
        let host = parsed.host_text();
        let https = parsed.url.scheme() == "https";
        let port = parsed.port;
        let default_port = if https { 443 } else { 80 };
        let plain_ok = !https
            && self
                .plain_http_hosts
                .iter()
                .any(|p| p.matches(&parsed.host));

        // For each entry, the stage at which the request fails it, if any.
        let stage_of = |e: &Entry| -> Option<Stage> {
            if !e.host.matches(&parsed.host) {
                return Some(Stage::Host);
            }
            // Plain HTTP needs both the grant's `scheme = "http"` and the policy's consent.
            let scheme_ok = https || (e.plain_http && plain_ok);
            if !scheme_ok {
                return Some(Stage::Scheme);
            }
            if port != e.port.unwrap_or(default_port) {
                return Some(Stage::Port);
            }
            if let Some((_, prefix)) = &e.prefix
                && !prefix.admits(&parsed.segments)
            {
                return Some(Stage::Path);
            }
            if !e.methods.contains(&method_upper) {
                return Some(Stage::Method);
            }
            None
        };
        let stages: Vec<Option<Stage>> = self.entries.iter().map(stage_of).collect();
        if stages.contains(&None) {
            return Ok(Target {
                host: parsed.host,
                url: parsed.url,
                port,
                scheme_is_https: https,
            });
        }
        let furthest = stages
            .iter()
            .flatten()
            .max()
            .copied()
            .unwrap_or(Stage::Host);
        // The entries that got as far as the furthest stage: what they allow explains the
        // refusal.
        let near: Vec<&Entry> = self
            .entries
            .iter()
            .zip(&stages)
            .filter(|(_, stage)| **stage == Some(furthest))
            .map(|(e, _)| e)
            .collect();
        let reason = match furthest {
            Stage::Host => format!(
                "host `{host}` matches no allow entry (allowed hosts: {})",
                join(self.entries.iter().map(|e| e.host.to_string()))
            ),
            Stage::Scheme if near.iter().any(|e| e.plain_http) => {
                return Err(HttpRefusal::PlainHttp { host });
            }
            Stage::Scheme => format!(
                "scheme http: the grant allows only https for `{host}` (plain http:// is refused)"
            ),
            Stage::Port => format!(
                "port {port} is not allowed for `{host}` (allowed: {})",
                join(
                    near.iter()
                        .map(|e| e.port.unwrap_or(default_port).to_string())
                )
            ),
            Stage::Path => format!(
                "path `{}`{} is outside the allowed path prefixes for `{host}` ({})",
                parsed.url.path(),
                if parsed.had_dot_segments {
                    " (after resolving `.` and `..` segments)"
                } else {
                    ""
                },
                join(
                    near.iter()
                        .filter_map(|e| e.prefix.as_ref().map(|(p, _)| p.clone()))
                )
            ),
            Stage::Method => format!(
                "method {method_upper} is not allowed for `{host}{}` (allowed: {})",
                parsed.url.path(),
                join(near.iter().flat_map(|e| e.methods.iter().cloned()))
            ),
        };
        Err(not_allowed(reason))
    }
}

/// A URL that passed the raw-string checks, normalised.
struct Parsed {
    url: Url,
    host: url::Host<String>,
    port: u16,
    /// The normalised path's segments, escapes decoded.
    segments: Vec<Vec<u8>>,
    /// The raw path held literal `.` or `..` segments (resolved by the parser).
    had_dot_segments: bool,
}

impl Parsed {
    fn new(raw: &str) -> Result<Self, HttpRefusal> {
        let invalid = |reason: String| HttpRefusal::InvalidUrl {
            url: raw.to_owned(),
            reason,
        };
        // WHATWG parsers silently drop tabs and newlines and read `\` as `/`: refuse them, so
        // the raw string checked below is the URL the parser sees.
        if let Some(c) = raw
            .chars()
            .find(|c| c.is_whitespace() || c.is_control() || *c == '\\')
        {
            return Err(invalid(format!(
                "contains {c:?}; percent-encode it (a backslash must be `%5C`, and is refused \
                 in paths)"
            )));
        }
        let mut url = Url::parse(raw).map_err(|e| invalid(e.to_string()))?;
        let scheme = url.scheme().to_owned();
        if scheme != "https" && scheme != "http" {
            return Err(invalid(format!(
                "scheme `{scheme}:` is not HTTP; only https:// (and http:// where the policy \
                 allows it) can be requested"
            )));
        }
        let rest = raw
            .get(..scheme.len() + 3)
            .filter(|head| head.eq_ignore_ascii_case(&format!("{scheme}://")))
            .map(|_| &raw[scheme.len() + 3..])
            .filter(|rest| !rest.starts_with('/'))
            .ok_or_else(|| invalid(format!("write the URL as {scheme}://host/path")))?;
        let (authority, after) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        let host = url
            .host()
            .map(|h| h.to_owned())
            .ok_or_else(|| invalid("the URL has no host".into()))?;
        if authority.contains('@') {
            return Err(HttpRefusal::Userinfo {
                host: host_text(&host),
            });
        }
        let before_fragment = after.split_once('#').map_or(after, |(before, _)| before);
        let (path, query) = before_fragment
            .split_once('?')
            .unwrap_or((before_fragment, ""));
        let mut had_dot_segments = false;
        for segment in path.split('/') {
            check_segment(segment)
                .map_err(|r| invalid(format!("path segment `{segment}`: {r}")))?;
            had_dot_segments |= segment == "." || segment == "..";
        }
        decode(query).map_err(|r| invalid(format!("query: {r}")))?;
        // Fragments stay on the client; never send one.
        url.set_fragment(None);
        let port = url
            .port_or_known_default()
            .ok_or_else(|| invalid("the URL has no port".into()))?;
        let segments = url
            .path()
            .split('/')
            .skip(1)
            .map(decode)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|r| invalid(format!("path: {r}")))?;
        Ok(Self {
            url,
            host,
            port,
            segments,
            had_dot_segments,
        })
    }

    fn host_text(&self) -> String {
        host_text(&self.host)
    }
}

/// A host as it appears in a URL (IPv6 in brackets, domains without a trailing dot).
fn host_text(host: &url::Host<String>) -> String {
    match host {
        url::Host::Domain(d) => d.strip_suffix('.').unwrap_or(d).to_owned(),
        other => other.to_string(),
    }
}

/// Refuse a raw path segment that a server could read differently from the parser.
fn check_segment(segment: &str) -> Result<(), String> {
    let decoded = decode(segment)?;
    if let Some(b) = decoded.iter().find(|b| matches!(b, b'/' | b'\\' | 0)) {
        let what = match b {
            0 => "an encoded NUL (`%00`)",
            b'/' => "an encoded `/` (`%2F`)",
            _ => "an encoded `\\` (`%5C`)",
        };
        return Err(format!("{what}; a path may not hide separators"));
    }
    let lower = segment.to_ascii_lowercase();
    if ["%252e", "%252f", "%255c"]
        .iter()
        .any(|d| lower.contains(d))
    {
        return Err("a double-encoded `.`, `/` or `\\` (`%252e`, `%252f`, `%255c`)".into());
    }
    let dots = |s: &[u8]| s == b"." || s == b"..";
    if dots(&decoded) && segment.contains('%') {
        return Err("a `.` or `..` segment spelled with escapes (`%2e`)".into());
    }
    // `..;x` is `..` to servers that strip path parameters (Tomcat, Spring).
    if let Some(before) = decoded.split(|b| *b == b';').next()
        && dots(before)
        && decoded.contains(&b';')
    {
        return Err("a `.` or `..` segment with parameters (`..;`)".into());
    }
    Ok(())
}

/// Percent-decode strictly: every `%` must start a two-hex-digit escape. (The `percent-encoding`
/// crate passes malformed escapes through as text, which would let `%zz` mean one thing here
/// and another to a server.)
fn decode(text: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let digit = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
            let Some(byte) = digit(i + 1)
                .zip(digit(i + 2))
                .map(|(h, l)| (h * 16 + l) as u8)
            else {
                let shown: String = text[i..].chars().take(3).collect();
                return Err(format!("malformed percent-escape `{shown}`"));
            };
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

fn join(items: impl Iterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chitin_registry::manifest::http::HttpAllow;

    fn allow(host: &str) -> HttpAllow {
        HttpAllow {
            scheme: None,
            host: host.into(),
            port: None,
            path_prefix: None,
            methods: vec![],
        }
    }

    fn list(entries: Vec<HttpAllow>, plain: &[&str]) -> Allowlist {
        let grant = HttpGrant {
            allow: entries,
            rate_limit: None,
            credentials: Vec::new(),
        };
        let plain: Vec<String> = plain.iter().map(|s| (*s).to_owned()).collect();
        Allowlist::new(Some(&grant), &plain)
    }

    /// The allowlist most rows run against.
    fn standard() -> Allowlist {
        list(
            vec![
                HttpAllow {
                    path_prefix: Some("/api/v1".into()),
                    methods: vec!["GET".into(), "post".into()],
                    ..allow("api.example.com")
                },
                allow("*.x.com"),
                HttpAllow {
                    port: Some(8443),
                    ..allow("alt.example.com")
                },
                HttpAllow {
                    scheme: Some("http".into()),
                    ..allow("plain.example.com")
                },
                HttpAllow {
                    scheme: Some("http".into()),
                    ..allow("legacy.example.com")
                },
                allow("93.184.216.34"),
                allow("[2606:2800:220:1::1]"),
                HttpAllow {
                    path_prefix: Some("/files/".into()),
                    ..allow("files.example.com")
                },
            ],
            &["legacy.example.com"],
        )
    }

    /// Each row: method, URL, the refusal kind, and words the message must hold.
    fn assert_refused(list: &Allowlist, rows: &[(&str, &str, &str, &str)]) {
        for (method, url, kind, says) in rows {
            match list.check(method, url) {
                Ok(t) => panic!("{method} {url} was admitted as {}", t.url),
                Err(e) => {
                    assert_eq!(e.kind(), *kind, "{method} {url}: {e}");
                    assert!(
                        e.to_string().contains(says),
                        "{method} {url}: `{e}` lacks `{says}`"
                    );
                }
            }
        }
    }

    #[test]
    fn userinfo_tricks_are_refused() {
        assert_refused(
            &standard(),
            &[
                (
                    "GET",
                    "https://user:pass@api.example.com/api/v1",
                    "userinfo",
                    "userinfo",
                ),
                (
                    "GET",
                    "https://api.example.com@evil.com/api/v1",
                    "userinfo",
                    "`evil.com`",
                ),
                (
                    "GET",
                    "https://a.x.com:443@evil.com/",
                    "userinfo",
                    "`evil.com`",
                ),
                (
                    "GET",
                    "https://@api.example.com/api/v1",
                    "userinfo",
                    "userinfo",
                ),
                (
                    "GET",
                    "https://:@api.example.com/api/v1",
                    "userinfo",
                    "userinfo",
                ),
                (
                    "GET",
                    "https://api.example.com%40evil.com/api/v1",
                    "invalid-url",
                    "invalid URL",
                ),
            ],
        );
        // `#@` and `?@` do not make userinfo: the host is what comes before them.
        assert_refused(
            &standard(),
            &[(
                "GET",
                "https://evil.com#@api.example.com/api/v1",
                "not-allowed",
                "host `evil.com`",
            )],
        );
        let t = standard()
            .check("GET", "https://a.x.com?@evil.com")
            .expect("query, not userinfo");
        assert_eq!(t.host, url::Host::Domain("a.x.com".to_owned()));
    }

    #[test]
    fn dot_segments_encoded_separators_and_malformed_escapes_are_refused() {
        assert_refused(
            &standard(),
            &[
                // Literal dot segments are resolved; climbing out of the prefix is refused.
                (
                    "GET",
                    "https://api.example.com/api/v1/../admin",
                    "not-allowed",
                    "`/api/admin` (after resolving",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/../../etc/passwd",
                    "not-allowed",
                    "path `/etc/passwd`",
                ),
                (
                    "GET",
                    "https://api.example.com/api/./v1/../../admin",
                    "not-allowed",
                    "path `/admin`",
                ),
                // Escaped dot segments are refused outright.
                (
                    "GET",
                    "https://api.example.com/api/v1/%2e%2e/admin",
                    "invalid-url",
                    "spelled with escapes",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/%2E%2E/admin",
                    "invalid-url",
                    "spelled with escapes",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/.%2e/admin",
                    "invalid-url",
                    "spelled with escapes",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/%2e./admin",
                    "invalid-url",
                    "spelled with escapes",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/%2e/x",
                    "invalid-url",
                    "spelled with escapes",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/%252e%252e/admin",
                    "invalid-url",
                    "double-encoded",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/..;/admin",
                    "invalid-url",
                    "with parameters",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/..;x=1/admin",
                    "invalid-url",
                    "with parameters",
                ),
                // Encoded separators.
                (
                    "GET",
                    "https://api.example.com/api/v1%2f..%2fadmin",
                    "invalid-url",
                    "encoded `/`",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/a%2Fb",
                    "invalid-url",
                    "encoded `/`",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/a%5cb",
                    "invalid-url",
                    "encoded `\\`",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/a%5C..%5Cadmin",
                    "invalid-url",
                    "encoded `\\`",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/a%00.json",
                    "invalid-url",
                    "NUL",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/a%252fb",
                    "invalid-url",
                    "double-encoded",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1\\..\\admin",
                    "invalid-url",
                    "'\\\\'",
                ),
                // Malformed escapes, in the path and the query.
                (
                    "GET",
                    "https://api.example.com/api/v1/%zz",
                    "invalid-url",
                    "malformed percent-escape `%zz`",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/a%4",
                    "invalid-url",
                    "malformed percent-escape `%4`",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/a%",
                    "invalid-url",
                    "malformed percent-escape `%`",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/a%+1",
                    "invalid-url",
                    "malformed",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/x?q=%g1",
                    "invalid-url",
                    "query: malformed",
                ),
                // Whitespace and control characters the parser would drop.
                (
                    "GET",
                    "https://api.example.com/api/v1/.\t./admin",
                    "invalid-url",
                    "'\\t'",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1/x\n",
                    "invalid-url",
                    "'\\n'",
                ),
                (
                    "GET",
                    " https://api.example.com/api/v1",
                    "invalid-url",
                    "' '",
                ),
            ],
        );
    }

    #[test]
    fn legitimate_escapes_and_dotted_names_pass() {
        let list = standard();
        for url in [
            "https://api.example.com/api/v1/hello%20world",
            "https://api.example.com/api/v1/caf%C3%A9",
            "https://api.example.com/api/v1/café",
            "https://api.example.com/api/v1/a.b.c",
            "https://api.example.com/api/v1/v1.2/x",
            "https://api.example.com/api/v1/file%2etxt",
            "https://api.example.com/api/v1/...",
            "https://api.example.com/api/v1/.well-known",
            "https://api.example.com/api/v1/..hidden",
            "https://api.example.com/api/v1/a;b",
            "https://api.example.com/api/v1/100%25",
            "https://api.example.com/api/v1/x?q=a%2Fb&r=%2e%2e",
            "https://api.example.com/api/v1/x/./y/../z",
            "https://api.example.com/api/%76%31/x",
            "https://api.example.com/api/v1#frag",
        ] {
            let t = list
                .check("GET", url)
                .unwrap_or_else(|e| panic!("{url} refused: {e}"));
            assert!(t.scheme_is_https && t.port == 443, "{url}");
            assert_eq!(t.url.fragment(), None, "{url}");
        }
        let resolved = list
            .check("GET", "https://api.example.com/api/v1/x/./y/../z")
            .unwrap();
        assert_eq!(resolved.url.as_str(), "https://api.example.com/api/v1/x/z");
    }

    #[test]
    fn path_prefixes_match_on_segment_boundaries() {
        let list = standard();
        for url in [
            "https://api.example.com/api/v1",
            "https://api.example.com/api/v1/",
            "https://api.example.com/api/v1/x",
            "https://api.example.com/api/v1/x/y?z=1",
            "https://files.example.com/files",
            "https://files.example.com/files/",
            "https://files.example.com/files/a.txt",
        ] {
            list.check("GET", url)
                .unwrap_or_else(|e| panic!("{url} refused: {e}"));
        }
        assert_refused(
            &list,
            &[
                (
                    "GET",
                    "https://api.example.com/api/v1-evil",
                    "not-allowed",
                    "path `/api/v1-evil` is outside the allowed path prefixes for `api.example.com` (/api/v1)",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v1evil",
                    "not-allowed",
                    "path `/api/v1evil`",
                ),
                (
                    "GET",
                    "https://api.example.com/api/v",
                    "not-allowed",
                    "path `/api/v`",
                ),
                (
                    "GET",
                    "https://api.example.com/api",
                    "not-allowed",
                    "path `/api`",
                ),
                ("GET", "https://api.example.com/", "not-allowed", "path `/`"),
                (
                    "GET",
                    "https://api.example.com/API/V1",
                    "not-allowed",
                    "path `/API/V1`",
                ),
                (
                    "GET",
                    "https://api.example.com//api/v1",
                    "not-allowed",
                    "path `//api/v1`",
                ),
                (
                    "GET",
                    "https://files.example.com/filesystem",
                    "not-allowed",
                    "(/files/)",
                ),
            ],
        );
    }

    #[test]
    fn hosts_wildcards_case_and_ip_spellings() {
        let list = standard();
        for url in [
            "https://a.x.com/",
            "https://a.b.x.com/anything",
            "https://A.X.COM/",
            "https://a.x.com./",
            "https://API.Example.COM/api/v1",
            "https://93.184.216.34/",
            "https://0x5d.0xb8.0xd8.0x22/",
            "https://1572395042/",
            "https://[2606:2800:220:1:0::1]/",
        ] {
            list.check("GET", url)
                .unwrap_or_else(|e| panic!("{url} refused: {e}"));
        }
        assert_refused(
            &list,
            &[
                (
                    "GET",
                    "https://x.com/",
                    "not-allowed",
                    "host `x.com` matches no allow entry",
                ),
                (
                    "GET",
                    "https://evilx.com/",
                    "not-allowed",
                    "host `evilx.com`",
                ),
                (
                    "GET",
                    "https://x.com.evil.net/",
                    "not-allowed",
                    "host `x.com.evil.net`",
                ),
                (
                    "GET",
                    "https://api.example.com.evil.net/api/v1",
                    "not-allowed",
                    "host `api.example.com.evil.net`",
                ),
                (
                    "GET",
                    "https://sub.api.example.com/api/v1",
                    "not-allowed",
                    "allowed hosts: api.example.com, *.x.com",
                ),
                (
                    "GET",
                    "https://127.0.0.1/",
                    "not-allowed",
                    "host `127.0.0.1`",
                ),
            ],
        );
        // The parser puts every IPv4 spelling into one form, so a host check sees through them.
        for spelling in [
            "0x7f.1",
            "2130706433",
            "0177.0.0.1",
            "127.1",
            "0x7f000001",
            "127.0.1",
        ] {
            let t = list
                .check("GET", &format!("https://{spelling}/"))
                .unwrap_err();
            assert!(
                t.to_string().contains("host `127.0.0.1`"),
                "{spelling}: {t}"
            );
        }
        let target = list.check("GET", "https://A.b.X.com./p").unwrap();
        assert_eq!(target.host, url::Host::Domain("a.b.x.com.".to_owned()));
    }

    #[test]
    fn ports_schemes_and_plain_http() {
        let list = standard();
        let t = list
            .check("GET", "https://a.x.com:443/")
            .expect("explicit default port");
        assert_eq!(t.port, 443);
        let t = list.check("GET", "https://alt.example.com:8443/").unwrap();
        assert_eq!(t.port, 8443);
        let t = list
            .check("GET", "http://legacy.example.com/")
            .expect("plain HTTP the grant and the policy both allow");
        assert!(!t.scheme_is_https && t.port == 80);
        list.check("GET", "https://legacy.example.com/")
            .expect("an http entry admits https too");
        assert_refused(
            &list,
            &[
                (
                    "GET",
                    "https://a.x.com:8443/",
                    "not-allowed",
                    "port 8443 is not allowed for `a.x.com` (allowed: 443)",
                ),
                ("GET", "https://a.x.com:80/", "not-allowed", "port 80"),
                (
                    "GET",
                    "https://alt.example.com/",
                    "not-allowed",
                    "port 443 is not allowed for `alt.example.com` (allowed: 8443)",
                ),
                (
                    "GET",
                    "http://a.x.com/",
                    "not-allowed",
                    "scheme http: the grant allows only https",
                ),
                (
                    "GET",
                    "http://api.example.com/api/v1",
                    "not-allowed",
                    "scheme http",
                ),
                (
                    "GET",
                    "http://plain.example.com/",
                    "plain-http",
                    "HTTPS only; the policy allows plain HTTP for no such host",
                ),
                (
                    "GET",
                    "http://legacy.example.com:443/",
                    "not-allowed",
                    "port 443",
                ),
                (
                    "GET",
                    "ftp://a.x.com/",
                    "invalid-url",
                    "scheme `ftp:` is not HTTP",
                ),
                ("GET", "file:///etc/passwd", "invalid-url", "scheme `file:`"),
                (
                    "GET",
                    "gopher://a.x.com:70/_x",
                    "invalid-url",
                    "scheme `gopher:`",
                ),
                ("GET", "data:text/plain,hi", "invalid-url", "scheme `data:`"),
                ("GET", "ws://a.x.com/", "invalid-url", "scheme `ws:`"),
                (
                    "GET",
                    "https:a.x.com/",
                    "invalid-url",
                    "write the URL as https://host/path",
                ),
                (
                    "GET",
                    "https:///a.x.com/",
                    "invalid-url",
                    "write the URL as",
                ),
                ("GET", "https:/a.x.com/", "invalid-url", "write the URL as"),
                ("GET", "//a.x.com/", "invalid-url", "relative URL"),
                (
                    "GET",
                    "https://a.x.com:99999/",
                    "invalid-url",
                    "invalid port",
                ),
            ],
        );
    }

    #[test]
    fn methods_default_to_get_and_head_and_odd_ones_are_refused() {
        let standard = standard();
        standard
            .check("HEAD", "https://a.x.com/")
            .expect("HEAD by default");
        standard
            .check("get", "https://a.x.com/")
            .expect("case-insensitive");
        standard
            .check("POST", "https://api.example.com/api/v1/x")
            .expect("listed in lowercase");
        assert_refused(
            &standard,
            &[
                (
                    "POST",
                    "https://a.x.com/",
                    "not-allowed",
                    "method POST is not allowed for `a.x.com/` (allowed: GET, HEAD)",
                ),
                (
                    "DELETE",
                    "https://api.example.com/api/v1/x",
                    "not-allowed",
                    "(allowed: GET, POST)",
                ),
                (
                    "HEAD",
                    "https://api.example.com/api/v1/x",
                    "not-allowed",
                    "method HEAD",
                ),
                (
                    "CONNECT",
                    "https://a.x.com/",
                    "not-allowed",
                    "CONNECT is never allowed",
                ),
                (
                    "trace",
                    "https://a.x.com/",
                    "not-allowed",
                    "TRACE is never allowed",
                ),
                (
                    "TRACK",
                    "https://a.x.com/",
                    "not-allowed",
                    "TRACK is never allowed",
                ),
                (
                    "GET /x HTTP/1.1\r\n",
                    "https://a.x.com/",
                    "not-allowed",
                    "is not an HTTP method",
                ),
                (
                    "",
                    "https://a.x.com/",
                    "not-allowed",
                    "is not an HTTP method",
                ),
            ],
        );
        let connect = list(
            vec![HttpAllow {
                methods: vec!["CONNECT".into()],
                ..allow("a.x.com")
            }],
            &[],
        );
        assert!(connect.check("CONNECT", "https://a.x.com/").is_err());
    }

    #[test]
    fn an_empty_allowlist_denies_everything_and_says_so() {
        let none = Allowlist::new(None, &[]);
        let empty = list(vec![], &["a.x.com"]);
        for list in [none, empty] {
            let err = list.check("GET", "https://a.x.com/").unwrap_err();
            assert!(matches!(err, HttpRefusal::NotAllowed { .. }));
            assert!(err.to_string().contains("the allowlist is empty"), "{err}");
        }
    }

    #[test]
    fn the_furthest_matching_entry_explains_the_refusal() {
        let list = list(
            vec![
                HttpAllow {
                    path_prefix: Some("/a".into()),
                    ..allow("h.example.com")
                },
                HttpAllow {
                    path_prefix: Some("/b".into()),
                    methods: vec!["PUT".into()],
                    ..allow("h.example.com")
                },
            ],
            &[],
        );
        // Both entries fail on the path: both prefixes are named.
        assert_refused(
            &list,
            &[("GET", "https://h.example.com/c", "not-allowed", "(/a, /b)")],
        );
        // The second entry admits the path but not the method; the first fails earlier.
        assert_refused(
            &list,
            &[(
                "DELETE",
                "https://h.example.com/b/1",
                "not-allowed",
                "method DELETE is not allowed for `h.example.com/b/1` (allowed: PUT)",
            )],
        );
    }
}
