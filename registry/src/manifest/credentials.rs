//! `[[capabilities.http.credentials]]`: secrets the host injects into the component's outgoing
//! HTTP requests, and where. The component never sees the value; it sends the request without
//! it (or with a placeholder) and the host adds it for the mapped hosts only.
//!
//! ```toml
//! [[capabilities.http.credentials]]
//! secret = "github_token"
//! hosts = ["api.github.com"]
//! inject = "bearer"                # Authorization: Bearer <value>
//!
//! [[capabilities.http.credentials]]
//! secret = "maps_key"
//! hosts = ["maps.example.com"]
//! path_prefix = "/v1"
//! inject = "query"                 # ?key=<value>
//! param = "key"
//! ```

use serde::{Deserialize, Serialize};

use super::ManifestError;
use super::audit_line::AuditLine;

/// Where a credential goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InjectKind {
    /// `Authorization: Bearer <value>`.
    Bearer,
    /// `Authorization: Basic base64(<username>:<value>)`; without `username` the value is the
    /// whole `user:password` pair (a value without `:` is a user with an empty password).
    Basic,
    /// `<header>: <prefix><value>`.
    Header,
    /// A query parameter `<param>=<value>`, percent-encoded, replacing one the request has.
    Query,
    /// The text `<placeholder>` in the URL's path or query, or in a header value, replaced.
    Placeholder,
}

impl InjectKind {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bearer => "bearer",
            Self::Basic => "basic",
            Self::Header => "header",
            Self::Query => "query",
            Self::Placeholder => "placeholder",
        }
    }
}

/// One credential mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialMapping {
    /// The secret's name; must also match `capabilities.secrets.names`.
    pub secret: String,
    /// Hosts it is sent to: exact names or `*.suffix` (any subdomain, not the suffix itself).
    pub hosts: Vec<String>,
    /// Only for paths under this prefix (on segment boundaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
    /// Where the value goes.
    pub inject: InjectKind,
    /// The header name (`inject = "header"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// Text before the value in the header (`inject = "header"`, e.g. `"Token "`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The query parameter (`inject = "query"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// The text replaced by the value (`inject = "placeholder"`, e.g. `"{{GITHUB_TOKEN}}"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    /// The user name (`inject = "basic"`, optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

impl CredentialMapping {
    /// Check the mapping at `field` (`capabilities.http.credentials[0]`): a known secret name,
    /// valid hosts and path, and exactly the keys its `inject` kind uses.
    pub fn validate(&self, field: &str) -> Result<(), ManifestError> {
        let at = |key: &str| format!("{field}.{key}");
        let name_ok = !self.secret.is_empty()
            && self.secret.len() <= 128
            && self
                .secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !name_ok {
            return Err(ManifestError::invalid(
                at("secret"),
                "a secret name is 1 to 128 of ASCII letters, digits, `_`, `.` and `-`",
            ));
        }
        if self.hosts.is_empty() {
            return Err(ManifestError::invalid(
                at("hosts"),
                "name at least one host the credential is sent to",
            ));
        }
        for (i, host) in self.hosts.iter().enumerate() {
            check_host(host)
                .map_err(|why| ManifestError::invalid(at(&format!("hosts[{i}]")), why))?;
        }
        if let Some(prefix) = &self.path_prefix
            && !prefix.starts_with('/')
        {
            return Err(ManifestError::invalid(
                at("path_prefix"),
                "a path prefix starts with `/`",
            ));
        }
        let (needs, allowed): (&[&str], &[&str]) = match self.inject {
            InjectKind::Bearer => (&[], &[]),
            InjectKind::Basic => (&[], &["username"]),
            InjectKind::Header => (&["header"], &["header", "prefix"]),
            InjectKind::Query => (&["param"], &["param"]),
            InjectKind::Placeholder => (&["placeholder"], &["placeholder"]),
        };
        let present = [
            ("header", self.header.as_deref()),
            ("prefix", self.prefix.as_deref()),
            ("param", self.param.as_deref()),
            ("placeholder", self.placeholder.as_deref()),
            ("username", self.username.as_deref()),
        ];
        let kind = self.inject.as_str();
        for (key, value) in present {
            match value {
                Some(_) if !allowed.contains(&key) => {
                    return Err(ManifestError::invalid(
                        at(key),
                        format!("`{key}` does not apply to inject = \"{kind}\""),
                    ));
                }
                None if needs.contains(&key) => {
                    return Err(ManifestError::invalid(
                        at(key),
                        format!("inject = \"{kind}\" needs `{key}`"),
                    ));
                }
                _ => {}
            }
        }
        if let Some(header) = &self.header {
            let token = !header.is_empty()
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                return Err(ManifestError::invalid(
                    at("header"),
                    "not a valid header name",
                ));
            }
            if header.eq_ignore_ascii_case("host") {
                return Err(ManifestError::invalid(
                    at("header"),
                    "a credential cannot go into the Host header",
                ));
            }
        }
        for (key, value, min) in [
            ("param", &self.param, 1),
            ("placeholder", &self.placeholder, 4),
            ("prefix", &self.prefix, 1),
        ] {
            if let Some(value) = value
                && (value.len() < min || value.chars().any(char::is_control))
            {
                return Err(ManifestError::invalid(
                    at(key),
                    format!("must be at least {min} characters, without control characters"),
                ));
            }
        }
        if let Some(placeholder) = &self.placeholder
            && placeholder.chars().any(char::is_whitespace)
        {
            return Err(ManifestError::invalid(
                at("placeholder"),
                "a placeholder has no whitespace",
            ));
        }
        if let Some(user) = &self.username
            && (user.contains(':') || user.chars().any(char::is_control))
        {
            return Err(ManifestError::invalid(
                at("username"),
                "a Basic user name has no `:` or control characters",
            ));
        }
        Ok(())
    }
}

/// A host pattern: a lower-case DNS name or `*.` followed by one, no port, scheme or path.
fn check_host(host: &str) -> Result<(), String> {
    let name = host.strip_prefix("*.").unwrap_or(host);
    let ok = !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{host}` is not a host name (lower-case, no scheme, port or path; `*.example.com` \
             for any subdomain)"
        ))
    }
}

impl CredentialMapping {
    /// The mapping in plain words: which secret the host sends, how and where.
    pub fn audit_line(&self) -> AuditLine {
        let path = self.path_prefix.as_deref().unwrap_or_default();
        let hosts = self
            .hosts
            .iter()
            .map(|h| format!("{h}{path}"))
            .collect::<Vec<_>>()
            .join(", ");
        AuditLine {
            name: "credential",
            scope: format!("{} as {} to {hosts}", self.secret, self.inject.as_str()),
            risk: format!(
                "the host sends secret `{}` with its requests to {hosts} (the component never \
                 sees the value)",
                self.secret
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CredentialMapping, String> {
        let m: CredentialMapping = toml::from_str(text).map_err(|e| e.to_string())?;
        m.validate("c").map_err(|e| e.to_string())?;
        Ok(m)
    }

    #[test]
    fn each_kind_parses_with_its_keys() {
        for text in [
            "secret = \"a\"\nhosts = [\"api.x.com\"]\ninject = \"bearer\"",
            "secret = \"a\"\nhosts = [\"*.x.com\"]\ninject = \"basic\"\nusername = \"me\"",
            "secret = \"a\"\nhosts = [\"x.com\"]\ninject = \"header\"\nheader = \"X-Api-Key\"\nprefix = \"Token \"",
            "secret = \"a\"\nhosts = [\"x.com\"]\npath_prefix = \"/v1\"\ninject = \"query\"\nparam = \"key\"",
            "secret = \"a\"\nhosts = [\"x.com\"]\ninject = \"placeholder\"\nplaceholder = \"{{A}}\"",
        ] {
            parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
    }

    #[test]
    fn missing_misplaced_and_unknown_keys_are_errors() {
        let cases = [
            (
                "secret = \"a\"\nhosts = [\"x.com\"]\ninject = \"header\"",
                "needs `header`",
            ),
            (
                "secret = \"a\"\nhosts = [\"x.com\"]\ninject = \"query\"",
                "needs `param`",
            ),
            (
                "secret = \"a\"\nhosts = [\"x.com\"]\ninject = \"placeholder\"",
                "needs `placeholder`",
            ),
            (
                "secret = \"a\"\nhosts = [\"x.com\"]\ninject = \"bearer\"\nparam = \"k\"",
                "does not apply",
            ),
            (
                "secret = \"a\"\nhosts = [\"x.com\"]\ninject = \"bearer\"\nheadr = \"k\"",
                "headr",
            ),
            (
                "secret = \"a\"\nhosts = [\"x.com\"]\ninject = \"cookie\"",
                "cookie",
            ),
            (
                "secret = \"a\"\nhosts = []\ninject = \"bearer\"",
                "at least one host",
            ),
            (
                "secret = \"a\"\nhosts = [\"https://x.com\"]\ninject = \"bearer\"",
                "not a host name",
            ),
            (
                "secret = \"a\"\nhosts = [\"x.com:443\"]\ninject = \"bearer\"",
                "not a host name",
            ),
            (
                "secret = \"a b\"\nhosts = [\"x.com\"]\ninject = \"bearer\"",
                "secret name",
            ),
            (
                "secret = \"a\"\nhosts = [\"x.com\"]\npath_prefix = \"v1\"\ninject = \"bearer\"",
                "starts with `/`",
            ),
            (
                "secret = \"a\"\nhosts = [\"x.com\"]\ninject = \"header\"\nheader = \"Host\"",
                "Host header",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }
}
