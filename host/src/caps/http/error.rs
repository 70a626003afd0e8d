//! Why an outbound HTTP request was refused, in words a person can act on: each refusal names
//! what was refused and which rule refused it, and carries a short stable code ([`HttpRefusal::kind`])
//! for programs.

use std::net::IpAddr;

/// An outbound request the host refused to send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpRefusal {
    /// The URL cannot be parsed, is not HTTP(S), or is spelled in a way that could mean one
    /// thing to the host and another to the server.
    #[error("invalid URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No allow entry of the grant admits the request.
    #[error("{method} {url} is not allowed: {reason}")]
    NotAllowed {
        /// The request method.
        method: String,
        /// The URL as given.
        url: String,
        /// Which part matched no entry (scheme, host, port, path or method), or that the
        /// allowlist is empty.
        reason: String,
    },
    /// Plain HTTP to a host the grant admits over `http`, but the policy does not.
    #[error(
        "plain http:// to `{host}` refused: HTTPS only; the policy allows plain HTTP for no \
         such host (the operator can list it in the policy's http.plain_http_hosts)"
    )]
    PlainHttp {
        /// The host asked for.
        host: String,
    },
    /// The URL carries a user name or password before `@`, which can disguise the real host.
    #[error(
        "URL to `{host}` carries userinfo (`name:password@` before the host), which can disguise \
         the real destination; credentials belong in the grant, not the URL"
    )]
    Userinfo {
        /// The host the URL really goes to.
        host: String,
    },
    /// The destination address is one the host never connects to (SSRF defence).
    #[error(
        "`{host}` is at {addr}, a {class} address; requests to it are refused (the operator can \
         admit it in the policy's http.allow_addresses)"
    )]
    BlockedAddress {
        /// The host asked for.
        host: String,
        /// The address it is or resolved to.
        addr: IpAddr,
        /// What kind of address it is (`loopback`, `private`, `metadata`, ...).
        class: &'static str,
    },
    /// A name for this machine, refused without asking DNS.
    #[error("`{host}` names this machine (loopback); requests to it are refused")]
    LocalName {
        /// The host asked for.
        host: String,
    },
    /// The host name could not be resolved.
    #[error("cannot resolve `{host}`: {reason}")]
    Resolve {
        /// The host asked for.
        host: String,
        /// What the resolver said.
        reason: String,
    },
    /// Too many requests in a sliding window.
    #[error("rate limit of {limit} requests per {window} reached; retry in {retry_after_secs} s")]
    RateLimited {
        /// The window that is full: `minute` or `hour`.
        window: &'static str,
        /// The window's limit.
        limit: u32,
        /// Seconds until the oldest request in the full window leaves it.
        retry_after_secs: u64,
    },
    /// The rate-limit windows could not be read or written, so the request is not sent.
    #[error(
        "the request was not sent: its rate limit cannot be checked because the state database \
         is unavailable ({reason})"
    )]
    RateStore {
        /// The database's error, naming the file and what to do.
        reason: String,
    },
    /// The secrets store failed while credentials were being injected, so the request is not
    /// sent.
    #[error("the request was not sent: the secrets store failed ({reason})")]
    SecretStore {
        /// The store's error, naming what to do.
        reason: String,
    },
    /// The component has no `[capabilities.http]` grant.
    #[error("this component has no HTTP grant ([capabilities.http] in its manifest)")]
    NoGrant,
    /// The call has sent as many requests as one call may.
    #[error("one call may send at most {max} requests; this call has used them all")]
    TooManyRequests {
        /// The cap.
        max: u32,
    },
    /// The request body is over the cap.
    #[error("the request body exceeds the limit of {max} bytes")]
    RequestTooLarge {
        /// The cap in bytes.
        max: usize,
    },
    /// The response declared a body over the cap.
    #[error("the response body of {declared} bytes exceeds the limit of {max} bytes")]
    ResponseTooLarge {
        /// The cap in bytes.
        max: u64,
        /// What Content-Length said.
        declared: u64,
    },
    /// Something secret-shaped, or a secret's value, is in the outgoing request.
    #[error(
        "the request's {place} contains {what}; secrets are added by the host from the grant's \
         credential mappings, never sent by a component"
    )]
    Leak {
        /// Where: URL, a header, the body.
        place: String,
        /// The pattern or secret name (never the value).
        what: String,
    },
    /// A credential mapping could not be applied.
    #[error("credential injection failed: {reason}")]
    Credentials {
        /// Why.
        reason: String,
    },
    /// The call's deadline passed before the request could be sent.
    #[error("the call's deadline has passed")]
    DeadlinePassed,
}

impl HttpRefusal {
    /// Whether the host failed (its database or secret store) rather than a rule refusing the
    /// request: the call then ends as a host fault.
    pub fn is_host_fault(&self) -> bool {
        matches!(self, Self::RateStore { .. } | Self::SecretStore { .. })
    }

    /// A short stable code for the refusal: `invalid-url`, `not-allowed`, `plain-http`,
    /// `userinfo`, `blocked-address`, `resolve-failed` or `rate-limited`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidUrl { .. } => "invalid-url",
            Self::NotAllowed { .. } => "not-allowed",
            Self::PlainHttp { .. } => "plain-http",
            Self::Userinfo { .. } => "userinfo",
            Self::BlockedAddress { .. } | Self::LocalName { .. } => "blocked-address",
            Self::Resolve { .. } => "resolve-failed",
            Self::RateLimited { .. } => "rate-limited",
            Self::RateStore { .. } => "rate-store-unavailable",
            Self::SecretStore { .. } => "secret-store-unavailable",
            Self::NoGrant => "no-grant",
            Self::TooManyRequests { .. } => "too-many-requests",
            Self::RequestTooLarge { .. } => "request-too-large",
            Self::ResponseTooLarge { .. } => "response-too-large",
            Self::Leak { .. } => "leak",
            Self::Credentials { .. } => "credentials",
            Self::DeadlinePassed => "timeout",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_was_refused_and_kinds_are_stable() {
        let rows = [
            (
                HttpRefusal::RateLimited {
                    window: "minute",
                    limit: 60,
                    retry_after_secs: 12,
                },
                "rate-limited",
                "rate limit of 60 requests per minute reached; retry in 12 s",
            ),
            (
                HttpRefusal::BlockedAddress {
                    host: "evil.test".into(),
                    addr: "169.254.169.254".parse().unwrap(),
                    class: "metadata",
                },
                "blocked-address",
                "`evil.test` is at 169.254.169.254, a metadata address",
            ),
            (
                HttpRefusal::PlainHttp {
                    host: "x.com".into(),
                },
                "plain-http",
                "HTTPS only; the policy allows plain HTTP for no such host",
            ),
            (
                HttpRefusal::Resolve {
                    host: "nx.test".into(),
                    reason: "no such host".into(),
                },
                "resolve-failed",
                "cannot resolve `nx.test`",
            ),
        ];
        for (refusal, kind, says) in rows {
            assert_eq!(refusal.kind(), kind);
            assert!(refusal.to_string().contains(says), "{refusal}");
        }
    }
}
