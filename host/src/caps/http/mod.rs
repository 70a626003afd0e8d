//! Outbound HTTP (`wasi:http/outgoing-handler`), the policy half: which requests a grant admits
//! ([`allowlist`]), which addresses they may reach ([`address`], the SSRF and DNS-rebinding
//! defence), how often ([`rate`]), and why a request was refused ([`error`]). Pure checks, no
//! I/O besides one DNS lookup; the request path calls them before anything is sent.

pub mod address;
pub mod allowlist;
pub mod error;
pub mod rate;
