//! The operator's policy: limit ceilings, which capabilities may be granted at all, which tools
//! are offered (tool groups, a profile, allow and deny lists), protected built-in names, and
//! approval rules per tool (parameter-aware), and outbound HTTP rules (plain-HTTP hosts, address
//! exceptions to the SSRF rules, rate-limit ceilings), and which tools an OAuth scope reaches on
//! `chitin serve --http`. Strict TOML: an unknown key is an error that
//! names it.
//!
//! The effective grant of a component is its manifest ∩ this policy (see `grant.rs`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use chitin_registry::capability;
use chitin_registry::manifest::http::HostPattern;
use chitin_registry::manifest::{ApprovalHint, Capabilities, Limit};
use ipnet::IpNet;
use serde::{Deserialize, Deserializer};

use crate::limits::{MAX_MEMORY_BYTES, MAX_TIMEOUT_MS, PolicyLimits};
use crate::slots::Bounds;

/// The policy schema version this host reads.
pub const POLICY_SCHEMA: u32 = 1;

/// The policy shipped with chitin (`policies/default.toml`), used when none is given.
pub const DEFAULT_POLICY: &str = include_str!("../../policies/default.toml");

/// The namespace of first-party components: the only one that may carry protected tool names.
pub const FIRST_PARTY: &str = "chitin";

/// The positions of the approval rules that name one tool, in the policy's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalRules(Box<[usize]>);

/// The operator's policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Schema version; must be [`POLICY_SCHEMA`].
    pub schema: u32,
    /// Per-call limits: the defaults, and the ceiling a manifest's requests are clamped to.
    pub limits: PolicyLimits,
    /// Whether granted programs may run without Landlock where the kernel lacks it (off: such
    /// a host refuses to start processes).
    #[serde(default)]
    pub allow_unconfined_processes: bool,
    /// Which capabilities may be granted at all.
    #[serde(default)]
    pub capabilities: CapabilityPolicy,
    /// Named sets of tools, referred to as `group:NAME`.
    #[serde(default)]
    pub groups: BTreeMap<String, Vec<String>>,
    /// Which tools are offered.
    #[serde(default)]
    pub tools: ToolPolicy,
    /// Approval rules, first match wins; a tool no rule matches keeps its manifest's hint.
    #[serde(default)]
    pub approval: Vec<ApprovalRule>,
    /// Outbound HTTP rules.
    #[serde(default)]
    pub http: HttpPolicy,
    /// Key-value storage rules.
    #[serde(default)]
    pub kv: KvPolicy,
    /// How many granted programs run at once.
    #[serde(default)]
    pub processes: ProcessPolicy,
    /// How many tool calls one OAuth user runs at once.
    #[serde(default)]
    pub calls: CallPolicy,
    /// What OAuth access tokens may reach over `chitin serve --http`.
    #[serde(default)]
    pub oauth: OAuthPolicy,
}

/// The tools each OAuth scope reaches: a token's calls are limited to the tools its scopes
/// cover, on top of `[tools]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthPolicy {
    /// Scope → entries (tool names, `group:NAME` or "*"), e.g. `"tools:fs" = ["group:fs"]`.
    #[serde(default)]
    pub scopes: BTreeMap<String, Vec<String>>,
}

/// The operator's key-value storage rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KvPolicy {
    /// The most bytes (keys plus values, all buckets) one component may store; a manifest's
    /// `[capabilities.kv] max_bytes` may ask for less, never more.
    pub max_bytes: u64,
}

impl Default for KvPolicy {
    /// 64 MiB per component.
    fn default() -> Self {
        Self {
            max_bytes: 64 * 1024 * 1024,
        }
    }
}

/// How many granted programs run at once: a process over either bound is refused as busy
/// (`rate-limited`), never queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProcessPolicy {
    /// Processes the whole host runs at once, for every component and caller.
    pub max_running: usize,
    /// Of them, the most one OAuth user runs at once, through whichever applications (the
    /// operator's own calls are bounded by `max_running` only).
    pub max_running_per_user: usize,
}

impl ProcessPolicy {
    /// The bounds the process slots keep.
    pub fn bounds(&self) -> Bounds {
        Bounds {
            host: self.max_running,
            user: self.max_running_per_user,
        }
    }
}

impl Default for ProcessPolicy {
    /// 5 on the host, 2 of them for one OAuth user: fewer than half, so one user always leaves
    /// most slots to the others.
    fn default() -> Self {
        Self {
            max_running: 5,
            max_running_per_user: 2,
        }
    }
}

/// How many top-level tool calls run at once: a call over either bound is refused as
/// `rate-limited`, never queued. Calls a tool invokes are part of their top-level call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CallPolicy {
    /// The most top-level calls the whole host runs at once, for every caller, the operator's
    /// own included; the engine's instance slots bound it too.
    pub max_running: usize,
    /// Of them, the most one OAuth user runs at once, through whichever applications and
    /// connections.
    pub max_running_per_user: usize,
}

impl CallPolicy {
    /// The bounds the call slots keep on an engine with room for `instance_slots` calls
    /// (`None`: unbounded by the engine).
    pub fn bounds(&self, instance_slots: Option<u32>) -> Bounds {
        let engine = instance_slots.map_or(usize::MAX, |n| n as usize);
        Bounds {
            host: self.max_running.min(engine),
            user: self.max_running_per_user,
        }
    }
}

impl Default for CallPolicy {
    /// 1000 on the host, as many as the engine has room for; 16 for one OAuth user: more than
    /// an agent runs side by side, and a small share of the host's.
    fn default() -> Self {
        Self {
            max_running: 1000,
            max_running_per_user: 16,
        }
    }
}

/// The operator's outbound HTTP rules, on top of each component's grant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpPolicy {
    /// Hosts (exact, `*.suffix` or IP) that may be reached over plain `http://` when a grant's
    /// entry says `scheme = "http"`; everything else is HTTPS only.
    #[serde(default)]
    pub plain_http_hosts: Vec<String>,
    /// Addresses and CIDRs a request may reach although they are not public (loopback, private,
    /// ...): for tests and labs.
    #[serde(default, deserialize_with = "ip_nets")]
    pub allow_addresses: Vec<IpNet>,
    /// The most requests per (user, tool) a manifest can be granted, per window.
    #[serde(default)]
    pub rate_limit: RateLimits,
    /// PEM files of CA certificates trusted for HTTPS besides the public roots (a lab's or a
    /// test's own CA).
    #[serde(default)]
    pub ca_files: Vec<PathBuf>,
}

/// Read `allow_addresses`: each an IP address (IPv6 with or without brackets) or a CIDR.
fn ip_nets<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<IpNet>, D::Error> {
    Vec::<String>::deserialize(deserializer)?
        .iter()
        .map(|entry| {
            let bare = entry.strip_prefix('[').and_then(|e| e.strip_suffix(']'));
            let text = bare.unwrap_or(entry);
            text.parse::<IpNet>()
                .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    serde::de::Error::custom(format!(
                        "`{entry}` is neither an IP address nor a CIDR (like 127.0.0.1, \
                         10.20.0.0/16 or fd00::/8)"
                    ))
                })
        })
        .collect()
}

/// Requests allowed per sliding window (also the policy's `[http] rate_limit` ceiling, where a
/// missing window takes the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimits {
    /// Requests in any 60 seconds.
    pub per_minute: u32,
    /// Requests in any 3600 seconds.
    pub per_hour: u32,
}

impl Default for RateLimits {
    /// 60 per minute, 1000 per hour.
    fn default() -> Self {
        Self {
            per_minute: 60,
            per_hour: 1000,
        }
    }
}

/// Which capabilities may be granted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityPolicy {
    /// Capabilities a manifest may be granted (`files`, `kv`, `http`, `secrets`, `process`,
    /// `env`, `invoke`, `client`); a section for any other is cut from every grant.
    pub allow: Vec<String>,
}

/// Which tools are offered to agents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPolicy {
    /// The tools offered: names, `group:NAME` or `*`. Empty offers nothing.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Tools never offered, even if allowed: names or `group:NAME`.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Built-in tool names only first-party (`chitin` namespace) components may carry: names or
    /// `group:NAME`.
    #[serde(default)]
    pub protected: Vec<String>,
}

/// When a rule applies and what it decides.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRule {
    /// The tool (name, `group:NAME` or `*`).
    pub tool: String,
    /// Only when this top-level string argument matches one of `matches` (glob patterns).
    #[serde(default)]
    pub arg: Option<String>,
    /// Glob patterns for `arg` (`*`, `?`, `[...]`).
    #[serde(default)]
    pub matches: Vec<String>,
    /// What the rule decides.
    pub mode: ApprovalHint,
}

/// A policy file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("policy {path}: cannot read: {cause}")]
    Read {
        /// The policy file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The TOML is malformed, has an unknown key, or lacks a required one.
    #[error("policy {path}: {message}")]
    Parse {
        /// The policy file.
        path: PathBuf,
        /// The parser's message, naming the key and line.
        message: String,
    },
    /// The schema version is not one this host reads.
    #[error(
        "policy {path}: schema {found} is not supported (this host reads schema {POLICY_SCHEMA})"
    )]
    Schema {
        /// The policy file.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
    /// A value is zero, out of range or refers to something that does not exist.
    #[error("policy {path}: {message}")]
    Invalid {
        /// The policy file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Why a tool is or is not offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolVerdict {
    /// Offered; the entry of `tools.allow` that lets it in.
    Offered(String),
    /// Not in `tools.allow`.
    NotAllowed,
    /// In `tools.deny`; the entry that denies it.
    Denied(String),
}

impl Policy {
    /// The built-in default policy.
    pub fn builtin() -> Result<Self, PolicyError> {
        Self::parse(
            DEFAULT_POLICY,
            Path::new("<built-in policies/default.toml>"),
        )
    }

    /// Read a policy file.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|cause| PolicyError::Read {
            path: path.to_owned(),
            cause,
        })?;
        Self::parse(&text, path)
    }

    /// Parse policy text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, PolicyError> {
        let policy: Policy = toml::from_str(text).map_err(|e| PolicyError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        if policy.schema != POLICY_SCHEMA {
            return Err(PolicyError::Schema {
                path: path.to_owned(),
                found: policy.schema,
            });
        }
        policy.validate().map_err(|message| PolicyError::Invalid {
            path: path.to_owned(),
            message,
        })?;
        Ok(policy)
    }

    fn validate(&self) -> Result<(), String> {
        let (l, c) = (&self.limits.default, &self.limits.ceiling);
        let pairs = Limit::ALL
            .map(|limit| (limit.key(), l.get(limit), c.get(limit)))
            .into_iter()
            .chain([("log_entry_bytes", l.log_entry_bytes as u64, u64::MAX)])
            .collect::<Vec<_>>();
        if self.kv.max_bytes == 0 {
            return Err("kv.max_bytes must be greater than zero".to_owned());
        }
        let ProcessPolicy {
            max_running,
            max_running_per_user,
        } = self.processes;
        if max_running == 0 || max_running_per_user == 0 {
            return Err(
                "processes.max_running and processes.max_running_per_user must be greater than \
                 zero (to run no process at all, leave `process` out of capabilities.allow)"
                    .to_owned(),
            );
        }
        let CallPolicy {
            max_running: calls,
            max_running_per_user: calls_per_user,
        } = self.calls;
        if calls == 0 || calls_per_user == 0 {
            return Err(
                "calls.max_running and calls.max_running_per_user must be greater than zero"
                    .to_owned(),
            );
        }
        if calls_per_user > calls {
            return Err(format!(
                "calls.max_running_per_user ({calls_per_user}) is above calls.max_running \
                 ({calls}); one user's share must be within the host's"
            ));
        }
        if max_running_per_user > max_running {
            return Err(format!(
                "processes.max_running_per_user ({max_running_per_user}) is above \
                 processes.max_running ({max_running}); one user's share must be within the \
                 host's"
            ));
        }
        for &(key, default, ceiling) in &pairs {
            for (part, value) in [("default", default), ("ceiling", ceiling)] {
                if value == 0 {
                    return Err(format!("limits.{part}.{key} must be greater than zero"));
                }
            }
        }
        if let Some((key, default, ceiling)) = pairs.into_iter().find(|(_, d, c)| d > c) {
            return Err(format!(
                "limits.default.{key} ({default}) is above limits.ceiling.{key} ({ceiling}); a \
                 default must be within the ceiling"
            ));
        }
        if c.memory_bytes > MAX_MEMORY_BYTES {
            return Err(format!(
                "limits.ceiling.memory_bytes ({}) is above {MAX_MEMORY_BYTES}: a 32-bit linear \
                 memory cannot grow past 4 GiB",
                c.memory_bytes
            ));
        }
        if c.timeout_ms > MAX_TIMEOUT_MS {
            return Err(format!(
                "limits.ceiling.timeout_ms ({}) is above {MAX_TIMEOUT_MS} (one day), the longest \
                 a call can be given",
                c.timeout_ms
            ));
        }
        if let Some(c) = self
            .capabilities
            .allow
            .iter()
            .find(|c| capability::section(c).is_none())
        {
            return Err(format!(
                "capabilities.allow: unknown capability `{c}` (known: {})",
                capability::names().collect::<Vec<_>>().join(", ")
            ));
        }
        let lists = [
            ("tools.allow", &self.tools.allow),
            ("tools.deny", &self.tools.deny),
            ("tools.protected", &self.tools.protected),
        ];
        let rules = self.approval.iter().map(|r| ("approval.tool", &r.tool));
        let scopes = self
            .oauth
            .scopes
            .values()
            .flat_map(|list| list.iter().map(|e| ("oauth.scopes", e)));
        let entries = lists
            .into_iter()
            .flat_map(|(key, list)| list.iter().map(move |e| (key, e)))
            .chain(rules)
            .chain(scopes);
        for (key, entry) in entries {
            if let Some(group) = entry.strip_prefix("group:")
                && !self.groups.contains_key(group)
            {
                return Err(format!("{key}: `{entry}` names no group in [groups]"));
            }
        }
        // A scope is one token of RFC 6749's `scope` grammar: printable ASCII but space, `"`, `\`.
        if let Some(scope) = self.oauth.scopes.keys().find(|s| {
            s.is_empty()
                || !s
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
        }) {
            return Err(format!(
                "oauth.scopes: `{scope}` is not a valid OAuth scope (printable ASCII without \
                 spaces, quotes or backslashes)"
            ));
        }
        for host in &self.http.plain_http_hosts {
            // Plain HTTP is an exception for named hosts, never a switch for all of them.
            if HostPattern::parse(host)
                .map_err(|e| format!("http.plain_http_hosts: `{host}`: {e}"))?
                == HostPattern::Any
            {
                return Err(format!(
                    "http.plain_http_hosts: `{host}` would allow plain HTTP everywhere; name the \
                     hosts"
                ));
            }
        }
        let rate = &self.http.rate_limit;
        for (key, value) in [("per_minute", rate.per_minute), ("per_hour", rate.per_hour)] {
            if value == 0 {
                return Err(format!("http.rate_limit.{key} must be greater than zero"));
            }
        }
        for (i, rule) in self.approval.iter().enumerate() {
            if rule.arg.is_some() == rule.matches.is_empty() {
                return Err(format!(
                    "approval[{i}] (tool `{}`): `arg` and `matches` go together",
                    rule.tool
                ));
            }
            for pattern in &rule.matches {
                glob::Pattern::new(pattern)
                    .map_err(|e| format!("approval[{i}]: pattern `{pattern}`: {e}"))?;
            }
        }
        Ok(())
    }

    /// Whether `entry` (a name, `group:NAME` or `*`) covers `tool`.
    fn entry_covers(&self, entry: &str, tool: &str) -> bool {
        match entry.strip_prefix("group:") {
            Some(group) => self
                .groups
                .get(group)
                .is_some_and(|members| members.iter().any(|m| m == tool || m == "*")),
            None => entry == tool || entry == "*",
        }
    }

    /// Whether `tool` is offered, and why.
    pub fn tool_verdict(&self, tool: &str) -> ToolVerdict {
        if let Some(entry) = self.tools.deny.iter().find(|e| self.entry_covers(e, tool)) {
            return ToolVerdict::Denied(entry.clone());
        }
        match self.tools.allow.iter().find(|e| self.entry_covers(e, tool)) {
            Some(entry) => ToolVerdict::Offered(entry.clone()),
            None => ToolVerdict::NotAllowed,
        }
    }

    /// The OAuth scopes (`[oauth] scopes`) that reach `tool`.
    pub fn scopes_reaching(&self, tool: &str) -> Vec<&str> {
        self.oauth
            .scopes
            .iter()
            .filter(|(_, entries)| entries.iter().any(|e| self.entry_covers(e, tool)))
            .map(|(scope, _)| scope.as_str())
            .collect()
    }

    /// Whether `tool` is a protected built-in name, which only the first-party namespace may
    /// carry.
    pub fn is_protected(&self, tool: &str) -> bool {
        self.tools
            .protected
            .iter()
            .any(|e| self.entry_covers(e, tool))
    }

    /// Whether the capability `name` may be granted at all.
    pub fn allows_capability(&self, name: &str) -> bool {
        self.capabilities.allow.iter().any(|c| c == name)
    }

    /// Hosts that may be reached over plain HTTP (`http.plain_http_hosts`).
    pub fn plain_http_hosts(&self) -> &[String] {
        &self.http.plain_http_hosts
    }

    /// The most outbound requests per (user, tool) and window a grant can get.
    pub fn http_rate_ceiling(&self) -> RateLimits {
        self.http.rate_limit
    }

    /// The most bytes one component may keep in key-value storage (`kv.max_bytes`).
    pub fn kv_quota_ceiling(&self) -> u64 {
        self.kv.max_bytes
    }

    /// The manifest's capabilities with every section the policy does not allow removed, and
    /// the names of those removed.
    pub fn intersect(&self, asked: &Capabilities) -> (Capabilities, Vec<&'static str>) {
        let mut granted = asked.clone();
        let mut cut = Vec::new();
        for section in capability::SECTIONS {
            if (section.present)(asked) && !self.allows_capability(section.name) {
                (section.remove)(&mut granted);
                cut.push(section.name);
            }
        }
        (granted, cut)
    }

    /// The approval mode of a call to `tool` with `args` (a JSON object): the first matching
    /// rule's, else the manifest's `hint`. Also returns why, for the person asked.
    pub fn approval_mode(
        &self,
        tool: &str,
        args: &serde_json::Value,
        hint: ApprovalHint,
    ) -> (ApprovalHint, Cow<'static, str>) {
        self.approval_mode_among(&self.approval_rules_for(tool), args, hint)
    }

    /// The approval rules that name `tool` (directly, by a group or by `*`), by position: what
    /// [`Policy::approval_mode_among`] takes, so a host can match them once per tool, not per
    /// call.
    pub fn approval_rules_for(&self, tool: &str) -> ApprovalRules {
        ApprovalRules(
            (0..self.approval.len())
                .filter(|&i| self.entry_covers(&self.approval[i].tool, tool))
                .collect(),
        )
    }

    /// [`Policy::approval_mode`] of a call to the tool whose rules (from this policy's
    /// [`Policy::approval_rules_for`]) are `rules`.
    pub fn approval_mode_among(
        &self,
        rules: &ApprovalRules,
        args: &serde_json::Value,
        hint: ApprovalHint,
    ) -> (ApprovalHint, Cow<'static, str>) {
        for rule in rules.0.iter().filter_map(|&i| self.approval.get(i)) {
            let Some(arg) = &rule.arg else {
                return (
                    rule.mode,
                    format!("the policy's rule for `{}`", rule.tool).into(),
                );
            };
            let Some(value) = args.get(arg).and_then(serde_json::Value::as_str) else {
                continue;
            };
            let hit = rule
                .matches
                .iter()
                .find(|p| glob::Pattern::new(p).is_ok_and(|pattern| pattern.matches(value)));
            if let Some(pattern) = hit {
                return (
                    rule.mode,
                    format!("the policy's rule: `{arg}` matches `{pattern}`").into(),
                );
            }
        }
        // Most calls end here: a borrowed reason, since few are ever shown to anyone.
        (hint, Cow::Borrowed("the component's manifest"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PROFILES: [(&str, &str); 4] = [
        ("minimal", include_str!("../../policies/minimal.toml")),
        ("coding", include_str!("../../policies/coding.toml")),
        ("messaging", include_str!("../../policies/messaging.toml")),
        ("full", include_str!("../../policies/full.toml")),
    ];

    #[test]
    fn the_shipped_policy_parses_to_the_documented_defaults() {
        let policy = Policy::builtin().expect("built-in policy");
        assert_eq!(policy.limits, PolicyLimits::default());
        assert_eq!(policy.http, HttpPolicy::default());
        assert_eq!(policy.http_rate_ceiling(), RateLimits::default());
        assert_eq!(policy.kv_quota_ceiling(), 64 * 1024 * 1024);
        assert_eq!(policy.kv, KvPolicy::default());
        assert_eq!(policy.processes, ProcessPolicy::default());
        assert_eq!(policy.calls, CallPolicy::default());
    }

    #[test]
    fn the_process_bounds_are_read_and_nonsense_is_refused_naming_the_key() {
        let set = |host: &str, user: &str| {
            DEFAULT_POLICY
                .replace("max_running = 5", &format!("max_running = {host}"))
                .replace(
                    "max_running_per_user = 2",
                    &format!("max_running_per_user = {user}"),
                )
        };
        let policy = Policy::parse(&set("8", "8"), Path::new("p")).unwrap();
        assert_eq!(
            policy.processes,
            ProcessPolicy {
                max_running: 8,
                max_running_per_user: 8
            }
        );
        for (host, user, says) in [
            ("0", "1", "must be greater than zero"),
            ("5", "0", "must be greater than zero"),
            (
                "3",
                "4",
                "max_running_per_user (4) is above processes.max_running (3)",
            ),
            ("-1", "2", "max_running"),
        ] {
            let err = Policy::parse(&set(host, user), Path::new("p")).unwrap_err();
            assert!(err.to_string().contains(says), "{host}/{user}: {err}");
        }
        for (name, text) in PROFILES {
            let profile = Policy::parse(text, Path::new(name)).unwrap();
            assert_eq!(profile.processes, ProcessPolicy::default(), "{name}");
        }
    }

    #[test]
    fn the_call_bounds_are_read_within_the_engine_and_nonsense_is_refused() {
        let set = |host: &str, user: &str| {
            DEFAULT_POLICY
                .replace("max_running = 1000", &format!("max_running = {host}"))
                .replace(
                    "max_running_per_user = 16",
                    &format!("max_running_per_user = {user}"),
                )
        };
        let policy = Policy::parse(&set("40", "4"), Path::new("p")).unwrap();
        assert_eq!(
            policy.calls.bounds(Some(1000)),
            Bounds { host: 40, user: 4 }
        );
        // The engine's slots bound the host whatever the policy says.
        let policy = Policy::parse(&set("5000", "4"), Path::new("p")).unwrap();
        assert_eq!(
            policy.calls.bounds(Some(1000)),
            Bounds {
                host: 1000,
                user: 4
            }
        );
        assert_eq!(policy.calls.bounds(None).host, 5000);
        for (host, user, says) in [
            (
                "0",
                "1",
                "calls.max_running and calls.max_running_per_user must be greater",
            ),
            ("5", "0", "must be greater than zero"),
            (
                "3",
                "4",
                "calls.max_running_per_user (4) is above calls.max_running (3)",
            ),
        ] {
            let err = Policy::parse(&set(host, user), Path::new("p")).unwrap_err();
            assert!(err.to_string().contains(says), "{host}/{user}: {err}");
        }
        for (name, text) in PROFILES {
            let profile = Policy::parse(text, Path::new(name)).unwrap();
            assert_eq!(profile.calls, CallPolicy::default(), "{name}");
        }
    }

    #[test]
    fn the_kv_ceiling_is_read_and_zero_is_refused() {
        let set =
            |n: &str| DEFAULT_POLICY.replace("max_bytes = 67108864", &format!("max_bytes = {n}"));
        let policy = Policy::parse(&set("4096"), Path::new("p")).unwrap();
        assert_eq!(policy.kv_quota_ceiling(), 4096);
        let err = Policy::parse(&set("0"), Path::new("p")).unwrap_err();
        assert!(
            err.to_string()
                .contains("kv.max_bytes must be greater than zero"),
            "{err}"
        );
        for (name, text) in PROFILES {
            let profile = Policy::parse(text, Path::new(name)).unwrap();
            assert_eq!(profile.kv_quota_ceiling(), 64 * 1024 * 1024, "{name}");
        }
    }

    #[test]
    fn the_http_section_builds_address_plain_host_and_rate_rules() {
        let text = format!(
            "{}\n[http]\nplain_http_hosts = [\"legacy.lab\", \"*.test.lab\"]\n\
             allow_addresses = [\"127.0.0.1\", \"10.20.0.0/16\", \"[::1]\", \"fd00::/8\"]\n\
             rate_limit = {{ per_minute = 10 }}\n",
            without_default_http(DEFAULT_POLICY)
        );
        let policy = Policy::parse(&text, Path::new("p")).unwrap();
        assert_eq!(policy.plain_http_hosts(), ["legacy.lab", "*.test.lab"]);
        assert_eq!(
            policy.http_rate_ceiling(),
            RateLimits {
                per_minute: 10,
                per_hour: 1000
            }
        );
        let addresses = policy.address_policy();
        for ok in ["127.0.0.1", "10.20.3.4", "::1", "fd00::5"] {
            addresses
                .check("h", ok.parse().unwrap())
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        assert!(addresses.check("h", "127.0.0.2".parse().unwrap()).is_err());
    }

    /// The shipped policy with its `[http]` section removed, so a test can append its own.
    fn without_default_http(text: &str) -> String {
        let start = text
            .find("\n[http]\n")
            .expect("the shipped policy has [http]");
        let end = text[start + 1..]
            .find("\n[")
            .map_or(text.len(), |i| start + 1 + i);
        format!("{}{}", &text[..start], &text[end..])
    }

    #[test]
    fn bad_http_entries_are_errors_naming_them() {
        let rows = [
            (
                "allow_addresses = [\"10.0.0.0/33\"]",
                "`10.0.0.0/33` is neither",
            ),
            (
                "allow_addresses = [\"localhost\"]",
                "`localhost` is neither",
            ),
            ("plain_http_hosts = [\"*\"]", "http.plain_http_hosts: `*`"),
            ("rate_limit = { per_hour = 0 }", "http.rate_limit.per_hour"),
            ("rate_limit = { per_second = 1 }", "per_second"),
            ("allow_adresses = []", "allow_adresses"),
        ];
        for (line, says) in rows {
            let text = format!("{}\n[http]\n{line}\n", without_default_http(DEFAULT_POLICY));
            let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
            assert!(err.to_string().contains(says), "{line}: {err}");
        }
    }

    #[test]
    fn every_shipped_profile_parses() {
        for (name, text) in PROFILES {
            Policy::parse(text, Path::new(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn profiles_offer_the_right_tools() {
        let get = |n: &str| {
            let text = PROFILES.iter().find(|(p, _)| *p == n).unwrap().1;
            Policy::parse(text, Path::new(n)).unwrap()
        };
        let offered = |p: &Policy, t: &str| matches!(p.tool_verdict(t), ToolVerdict::Offered(_));
        let minimal = get("minimal");
        assert!(offered(&minimal, "echo") && offered(&minimal, "time"));
        assert!(!offered(&minimal, "read_file") && !offered(&minimal, "shell"));
        let coding = get("coding");
        assert!(offered(&coding, "read_file") && offered(&coding, "shell"));
        let messaging = get("messaging");
        assert!(!offered(&messaging, "shell") && !offered(&messaging, "write_file"));
        let full = get("full");
        assert!(offered(&full, "shell") && offered(&full, "anything_else"));
        assert!(!full.allows_capability("nothing"));
        assert!(minimal.capabilities.allow.is_empty());
    }

    #[test]
    fn deny_wins_over_allow() {
        let text =
            format!("{DEFAULT_POLICY}\n",).replace("deny = []", "deny = [\"group:runtime\"]");
        let policy = Policy::parse(&text, Path::new("p")).unwrap();
        assert_eq!(
            policy.tool_verdict("shell"),
            ToolVerdict::Denied("group:runtime".into())
        );
    }

    #[test]
    fn a_denied_capability_is_cut_from_what_a_manifest_asks() {
        let mut policy = Policy::builtin().unwrap();
        policy.capabilities.allow = vec!["files".into()];
        let asked = Capabilities {
            env: Some(chitin_registry::manifest::EnvGrant {
                keys: vec!["LANG".into()],
            }),
            ..Capabilities::default()
        };
        let (granted, cut) = policy.intersect(&asked);
        assert!(granted.env.is_none());
        assert_eq!(cut, ["env"]);
    }

    #[test]
    fn the_client_capability_is_granted_by_default_and_cut_where_not_allowed() {
        let asked = Capabilities {
            client: Some(chitin_registry::manifest::ClientGrant {
                methods: vec![chitin_registry::manifest::ClientMethod::Elicit],
            }),
            ..Capabilities::default()
        };
        let default = Policy::builtin().unwrap();
        let (granted, cut) = default.intersect(&asked);
        assert_eq!(granted.client, asked.client);
        assert!(cut.is_empty());
        let minimal = Policy::parse(PROFILES[0].1, Path::new("minimal.toml")).unwrap();
        let (granted, cut) = minimal.intersect(&asked);
        assert!(granted.client.is_none());
        assert_eq!(cut, ["client"]);
    }

    #[test]
    fn approval_rules_look_at_arguments() {
        let policy = Policy::builtin().unwrap();
        let (mode, why) = policy.approval_mode(
            "shell",
            &json!({"command": "rm -rf /tmp/x"}),
            ApprovalHint::Never,
        );
        assert_eq!(mode, ApprovalHint::Always, "{why}");
        assert!(why.contains("rm *"), "{why}");
        let (mode, _) =
            policy.approval_mode("shell", &json!({"command": "ls"}), ApprovalHint::Never);
        assert_eq!(mode, ApprovalHint::Ask);
        let (mode, why) = policy.approval_mode("echo", &json!({}), ApprovalHint::Never);
        assert_eq!(mode, ApprovalHint::Never);
        assert!(why.contains("manifest"), "{why}");
    }

    #[test]
    fn approval_rules_are_matched_to_a_tool_by_name_group_and_wildcard() {
        let policy = Policy::builtin().unwrap();
        // `shell` has a rule of its own, then the `group:runtime` one; `spawn` only the group's.
        assert_eq!(
            policy.approval_rules_for("shell"),
            ApprovalRules([0, 1].into())
        );
        assert_eq!(
            policy.approval_rules_for("spawn"),
            ApprovalRules([1].into())
        );
        assert_eq!(policy.approval_rules_for("echo"), ApprovalRules::default());
        let wildcard = Policy::parse(
            &format!("{DEFAULT_POLICY}\n[[approval]]\ntool = \"*\"\nmode = \"always\"\n"),
            Path::new("wildcard.toml"),
        )
        .unwrap();
        let rules = wildcard.approval_rules_for("echo");
        assert_eq!(rules, ApprovalRules([policy.approval.len()].into()));
        let (mode, why) = wildcard.approval_mode_among(&rules, &json!({}), ApprovalHint::Never);
        assert_eq!(mode, ApprovalHint::Always, "{why}");
    }

    #[test]
    fn protected_names_come_from_groups_too() {
        let policy = Policy::builtin().unwrap();
        assert!(policy.is_protected("echo"));
        assert!(policy.is_protected("read_file"));
        assert!(!policy.is_protected("weather"));
    }

    #[test]
    fn an_unknown_key_is_an_error_naming_it() {
        let text = DEFAULT_POLICY.replace("fuel =", "fule =");
        let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("fule"), "{err}");
    }

    #[test]
    fn unknown_capabilities_and_groups_are_errors() {
        let text = DEFAULT_POLICY.replace("allow = [\"files\"", "allow = [\"filez\"");
        let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("filez"), "{err}");
        let text = DEFAULT_POLICY.replace("deny = []", "deny = [\"group:nope\"]");
        let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("group:nope"), "{err}");
    }

    #[test]
    fn an_unsupported_schema_is_refused() {
        let text = DEFAULT_POLICY.replace("schema = 1", "schema = 9");
        let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(matches!(err, PolicyError::Schema { found: 9, .. }), "{err}");
    }

    #[test]
    fn a_zero_limit_is_refused() {
        let text = DEFAULT_POLICY.replace("timeout_ms = 30000\n", "timeout_ms = 0\n");
        let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(
            err.to_string().contains("limits.default.timeout_ms"),
            "{err}"
        );
    }

    #[test]
    fn a_default_above_its_ceiling_memory_past_4_gib_or_a_timeout_past_a_day_is_refused() {
        let text = DEFAULT_POLICY.replace("timeout_ms = 30000\n", "timeout_ms = 900000\n");
        let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(
            err.to_string()
                .contains("limits.default.timeout_ms (900000) is above limits.ceiling.timeout_ms"),
            "{err}"
        );
        let text = DEFAULT_POLICY.replace("memory_bytes = 268435456", "memory_bytes = 8589934592");
        let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("4 GiB"), "{err}");
        // A timeout whose deadline an `Instant` cannot hold would panic every call.
        let text =
            DEFAULT_POLICY.replace("timeout_ms = 300000", "timeout_ms = 18446744073709551615");
        let err = Policy::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(
            err.to_string()
                .contains("limits.ceiling.timeout_ms (18446744073709551615) is above 86400000"),
            "{err}"
        );
    }
}
