//! The capability manifest: what a component is, the tools it carries, every capability it asks
//! for with its scope, and the limits it wants. Strict TOML: an unknown key is an error that
//! names it, so a typo can never silently drop (or widen) a grant.
//!
//! Each capability's section lives in its own module; a section that is absent grants nothing.

pub mod audit_line;
pub mod client;
pub mod credentials;
pub mod dependencies;
pub mod env;
pub mod files;
pub mod http;
pub mod ident;
pub mod invoke;
pub mod kv;
pub mod limits;
#[cfg(feature = "test-capability")]
pub mod probe;
pub mod process;
pub mod secrets;
pub mod tools;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::capability::Capabilities;
pub use audit_line::AuditLine;
pub use client::{ClientGrant, ClientMethod};
pub use credentials::{CredentialMapping, InjectKind};
pub use dependencies::{ComponentKind, ComposedPart, Dependency};
pub use env::EnvGrant;
pub use files::{FileAccess, FilesGrant, PathGrant};
pub use http::HttpGrant;
pub use invoke::InvokeGrant;
pub use kv::KvGrant;
pub use limits::Limit;
pub use process::ProcessGrant;
pub use secrets::SecretsGrant;
pub use tools::{SpecMismatch, ToolAnnotations, ToolSpec};

/// The manifest schema version this crate reads and writes.
pub const MANIFEST_SCHEMA: u32 = 1;

/// A component's capability manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Schema version; must be [`MANIFEST_SCHEMA`].
    pub schema: u32,
    /// Who and what the component is.
    pub component: ComponentInfo,
    /// Per-tool hints and specs, keyed by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolHints>,
    /// The capabilities asked for; an absent section grants nothing.
    #[serde(default)]
    pub capabilities: Capabilities,
    /// Limits the component asks for; the policy clamps them.
    #[serde(default)]
    pub limits: LimitRequest,
    /// Library components it needs at load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<Dependency>,
    /// Libraries its author already composed into it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub composed: Vec<ComposedPart>,
}

/// The component's identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentInfo {
    /// Component name, unique within its namespace (`[a-z0-9_-]`).
    pub name: String,
    /// Namespace the publisher signs for (`chitin` for first-party components).
    pub namespace: String,
    /// Semantic version.
    pub version: semver::Version,
    /// Who publishes it.
    pub publisher: String,
    /// What it is for, in a sentence.
    #[serde(default)]
    pub description: String,
    /// A tool component (the default) or a library.
    #[serde(default, skip_serializing_if = "ComponentKind::is_tool")]
    pub kind: ComponentKind,
}

/// One tool: its author's hints, and its spec as `chitin manifest embed` recorded it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolHints {
    /// Whether calls should be approved by a person; the policy has the last word.
    #[serde(default)]
    pub approval: ApprovalHint,
    /// Whether calls may run synchronously or only as MCP tasks.
    #[serde(default, skip_serializing_if = "TaskHint::is_optional")]
    pub task: TaskHint,
    /// Description for the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments, as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<String>,
    /// JSON Schema of a successful result, as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<String>,
    /// Behaviour hints (MCP tool annotations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
}

/// When a tool's calls need a person's approval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalHint {
    /// Never ask.
    #[default]
    Never,
    /// Ask unless the call was approved before ("always allow").
    Ask,
    /// Ask every time.
    Always,
}

/// How a tool's calls run for MCP clients: a task needs the client's tasks extension.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskHint {
    /// A task when the client declared tasks and the time limit calls for one, else a plain
    /// call.
    #[default]
    Optional,
    /// Only as a task: a client without the tasks extension is refused (MCP error -32021)
    /// rather than made to wait on a call that cannot answer within a synchronous request.
    Required,
}

impl TaskHint {
    fn is_optional(&self) -> bool {
        *self == Self::Optional
    }
}

/// Per-call limits a component asks for; each is clamped by the policy, and an absent one takes
/// the policy's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitRequest {
    /// Linear memory, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<usize>,
    /// Fuel (about one unit per WebAssembly instruction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Wall-clock time, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Bytes of result handed to the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<usize>,
}

/// A manifest could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// Malformed TOML, an unknown key, or a missing required key.
    #[error("manifest: {0}")]
    Parse(String),
    /// A schema version this host does not read.
    #[error("manifest: schema {0} is not supported (this host reads schema {MANIFEST_SCHEMA})")]
    Schema(u32),
    /// A value is out of range or unsafe.
    #[error("manifest: {field}: {reason}")]
    Invalid {
        /// The offending key, dotted (`capabilities.files.paths[0].path`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl ManifestError {
    /// An invalid value at `field`.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl Manifest {
    /// Parse and validate manifest text.
    pub fn parse(text: &str) -> Result<Self, ManifestError> {
        let manifest: Manifest = toml::from_str(text)
            .map_err(|e| ManifestError::Parse(e.to_string().trim_end().into()))?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// The manifest as TOML text.
    pub fn to_toml(&self) -> String {
        // Serialising plain structs of strings, numbers and lists cannot fail.
        toml::to_string(self).unwrap_or_default()
    }

    /// `namespace/name`: the identity trust scopes, buckets and pins refer to.
    pub fn id(&self) -> String {
        format!("{}/{}", self.component.namespace, self.component.name)
    }

    /// The tool specs the manifest records, by tool name.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .filter_map(|(name, hints)| hints.spec(name))
            .collect()
    }

    /// Tools named in `[tools]` without a recorded spec.
    pub fn tools_without_spec(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter(|(_, hints)| hints.input_schema.is_none())
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// Record `specs` (a tool component's own, in full) in `[tools]`, keeping each author's
    /// approval hint; a hint for a tool the component does not offer is an error naming it.
    pub fn record_specs(&mut self, specs: &[ToolSpec]) -> Result<(), ManifestError> {
        if let Some(name) = self
            .tools
            .keys()
            .find(|name| !specs.iter().any(|s| &s.name == *name))
        {
            return Err(ManifestError::invalid(
                format!("tools.{name}"),
                "the component offers no tool of this name",
            ));
        }
        for spec in specs {
            spec.record_in(self.tools.entry(spec.name.clone()).or_default());
        }
        self.validate()
    }

    /// Check every value the types alone cannot.
    pub fn validate(&self) -> Result<(), ManifestError> {
        if self.schema != MANIFEST_SCHEMA {
            return Err(ManifestError::Schema(self.schema));
        }
        check_ident("component.name", &self.component.name)?;
        check_ident("component.namespace", &self.component.namespace)?;
        if self.component.publisher.trim().is_empty() {
            return Err(ManifestError::invalid(
                "component.publisher",
                "must not be empty",
            ));
        }
        for (name, hints) in &self.tools {
            if let Some(problem) = tool_name_problem(name) {
                return Err(ManifestError::invalid(format!("tools.{name}"), problem));
            }
            hints.validate(name)?;
        }
        for section in crate::capability::SECTIONS {
            (section.check)(&self.capabilities)?;
        }
        for (i, dep) in self.dependencies.iter().enumerate() {
            dep.validate(i)?;
        }
        let zero = Limit::ALL
            .into_iter()
            .find(|&limit| self.limits.get(limit) == Some(0));
        if let Some(limit) = zero {
            let field = format!("limits.{}", limit.key());
            return Err(ManifestError::invalid(field, "must be greater than zero"));
        }
        Ok(())
    }
}

/// The separator between a namespace and a tool in the names agents see
/// (`acme__word_count`); no namespace or tool name may contain it, so no two (namespace, tool)
/// pairs share an exposed name.
pub const NAME_SEPARATOR: &str = "__";

/// Longest tool name accepted (the limit several agent APIs impose).
pub const MAX_TOOL_NAME: usize = 64;

/// Names of components, namespaces, buckets and aliases: an identifier ([`ident::check`]);
/// the error names `field`.
pub fn check_ident(field: &str, value: &str) -> Result<(), ManifestError> {
    ident::check(value).map_err(|e| ManifestError::invalid(field, format!("`{value}` {e}")))
}

/// Why `name` cannot be a tool name, or `None` when it can: 1 to [`MAX_TOOL_NAME`] ASCII
/// letters, digits, `_` and `-`, without `__` (see [`NAME_SEPARATOR`]).
pub fn tool_name_problem(name: &str) -> Option<String> {
    if name.is_empty()
        || name.len() > MAX_TOOL_NAME
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Some(format!(
            "invalid tool name `{name}`: use 1-{MAX_TOOL_NAME} characters of [A-Za-z0-9_-]"
        ));
    }
    if name.contains(NAME_SEPARATOR) {
        return Some(format!(
            "invalid tool name `{name}`: `{NAME_SEPARATOR}` is reserved to separate namespace \
             and tool in exposed names"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const FS: &str = r#"
schema = 1
[component]
name = "fs"
namespace = "chitin"
version = "0.1.0"
publisher = "chitin"
description = "Workspace files."
[tools.write_file]
approval = "ask"
[capabilities.files]
paths = [{ path = ".", access = "read-write" }]
[limits]
memory_bytes = 16777216
"#;

    #[test]
    fn a_full_manifest_parses_and_round_trips() {
        let m = Manifest::parse(FS).expect("parses");
        assert_eq!(m.id(), "chitin/fs");
        assert_eq!(m.tools["write_file"].approval, ApprovalHint::Ask);
        let files = m.capabilities.files.as_ref().expect("files");
        assert_eq!(files.paths[0].access, FileAccess::ReadWrite);
        assert_eq!(Manifest::parse(&m.to_toml()).expect("round trip"), m);
    }

    #[test]
    fn an_unknown_key_is_an_error_naming_it() {
        let text = FS.replace("[capabilities.files]", "[capabilities.filez]");
        let err = Manifest::parse(&text).unwrap_err();
        assert!(err.to_string().contains("filez"), "{err}");
        let text = FS.replace("access =", "acess =");
        let err = Manifest::parse(&text).unwrap_err();
        assert!(err.to_string().contains("acess"), "{err}");
    }

    #[test]
    fn an_unsupported_schema_is_refused() {
        let err = Manifest::parse(&FS.replace("schema = 1", "schema = 2")).unwrap_err();
        assert_eq!(err, ManifestError::Schema(2));
    }

    #[test]
    fn names_with_the_namespace_separator_are_refused() {
        for (from, to) in [
            ("namespace = \"chitin\"", "namespace = \"a__b\""),
            ("name = \"fs\"", "name = \"f__s\""),
            ("[tools.write_file]", "[tools.write__file]"),
        ] {
            let err = Manifest::parse(&FS.replace(from, to)).unwrap_err();
            assert!(err.to_string().contains("__"), "{to}: {err}");
        }
        assert!(tool_name_problem("b__c").is_some());
        assert!(tool_name_problem("b_c").is_none());
    }

    #[test]
    fn bad_names_and_zero_limits_are_refused() {
        let err = Manifest::parse(&FS.replace("name = \"fs\"", "name = \"../fs\"")).unwrap_err();
        assert!(err.to_string().contains("component.name"), "{err}");
        let err = Manifest::parse(&FS.replace("16777216", "0")).unwrap_err();
        assert!(err.to_string().contains("limits.memory_bytes"), "{err}");
    }

    #[test]
    fn credentials_must_name_a_secret_the_secrets_globs_cover() {
        let base = "schema = 1\n[component]\nname = \"gh\"\nnamespace = \"acme\"\n\
                    version = \"0.1.0\"\npublisher = \"acme\"\n\
                    [[capabilities.http.allow]]\nhost = \"api.github.com\"\n\
                    [[capabilities.http.credentials]]\nsecret = \"github_token\"\n\
                    hosts = [\"api.github.com\"]\ninject = \"bearer\"\n";
        let err = Manifest::parse(base).unwrap_err().to_string();
        assert!(
            err.contains("capabilities.http.credentials[0].secret")
                && err.contains("not covered by capabilities.secrets.names"),
            "{err}"
        );
        let covered = format!("{base}[capabilities.secrets]\nnames = [\"github_*\"]\n");
        let m = Manifest::parse(&covered).expect("covered");
        let http = m.capabilities.http.as_ref().expect("http");
        assert_eq!(http.credentials[0].inject, InjectKind::Bearer);
        assert_eq!(Manifest::parse(&m.to_toml()).expect("round trip"), m);
        let other = format!("{base}[capabilities.secrets]\nnames = [\"slack_*\"]\n");
        assert!(Manifest::parse(&other).is_err());
        let bad_glob = format!("{base}[capabilities.secrets]\nnames = [\"github_[\"]\n");
        let err = Manifest::parse(&bad_glob).unwrap_err().to_string();
        assert!(err.contains("capabilities.secrets.names[0]"), "{err}");
    }

    #[test]
    fn the_client_section_and_the_task_hint_parse_and_bad_ones_are_refused() {
        let text = format!(
            "{FS}[capabilities.client]\nmethods = [\"elicit\", \"list-roots\"]\n\
             [tools.read_file]\ntask = \"required\"\n"
        );
        let m = Manifest::parse(&text).expect("parses");
        let client = m.capabilities.client.as_ref().expect("client");
        assert_eq!(
            client.methods,
            [ClientMethod::Elicit, ClientMethod::ListRoots]
        );
        assert_eq!(m.tools["read_file"].task, TaskHint::Required);
        assert_eq!(m.tools["write_file"].task, TaskHint::Optional);
        assert_eq!(Manifest::parse(&m.to_toml()).expect("round trip"), m);
        let twice = format!("{FS}[capabilities.client]\nmethods = [\"sample\", \"sample\"]\n");
        let err = Manifest::parse(&twice).unwrap_err().to_string();
        assert!(err.contains("capabilities.client.methods[1]"), "{err}");
        let none = format!("{FS}[capabilities.client]\nmethods = []\n");
        let err = Manifest::parse(&none).unwrap_err().to_string();
        assert!(err.contains("capabilities.client.methods"), "{err}");
        let unknown = format!("{FS}[capabilities.client]\nmethods = [\"shell\"]\n");
        assert!(Manifest::parse(&unknown).is_err());
    }

    #[test]
    fn recorded_tool_specs_round_trip_and_keep_the_approval_hint() {
        let mut m = Manifest::parse(FS).expect("parses");
        assert_eq!(m.tools_without_spec(), ["write_file"]);
        let spec = ToolSpec {
            name: "write_file".into(),
            description: "Writes a file.".into(),
            input_schema: r#"{"type":"object"}"#.into(),
            output_schema: None,
            annotations: ToolAnnotations {
                destructive: true,
                ..ToolAnnotations::default()
            },
        };
        m.record_specs(std::slice::from_ref(&spec))
            .expect("records");
        assert_eq!(m.tools["write_file"].approval, ApprovalHint::Ask);
        let again = Manifest::parse(&m.to_toml()).expect("round trip");
        assert_eq!(again.tool_specs(), std::slice::from_ref(&spec));
        assert!(again.tools_without_spec().is_empty());
        let mut other = spec;
        other.name = "read_file".into();
        let err = Manifest::parse(FS)
            .unwrap()
            .record_specs(&[other])
            .unwrap_err();
        assert!(err.to_string().contains("tools.write_file"), "{err}");
    }

    #[test]
    fn the_exact_tools_table_shape_parses_and_partial_specs_are_refused() {
        let shape = FS.replace(
            "approval = \"ask\"",
            r#"approval = "ask"
description = "Writes a file."
input_schema = '{"type":"object","properties":{"path":{"type":"string"}}}'
output_schema = '{"type":"object"}'
annotations = { read_only = false, destructive = true, idempotent = false, open_world = false }"#,
        );
        let m = Manifest::parse(&shape).expect("the recorded shape parses");
        let spec = &m.tool_specs()[0];
        assert_eq!(spec.output_schema.as_deref(), Some(r#"{"type":"object"}"#));
        assert!(spec.annotations.destructive && !spec.annotations.read_only);
        let partial = FS.replace(
            "approval = \"ask\"",
            "approval = \"ask\"\ndescription = \"Writes.\"",
        );
        let err = Manifest::parse(&partial).unwrap_err().to_string();
        assert!(err.contains("tools.write_file.input_schema"), "{err}");
        let bad_json = shape.replace(r#"'{"type":"object"}'"#, "'{'");
        let err = Manifest::parse(&bad_json).unwrap_err().to_string();
        assert!(
            err.contains("tools.write_file.output_schema: is not JSON"),
            "{err}"
        );
    }

    #[test]
    fn no_capabilities_means_none_granted() {
        let m = Manifest::parse(
            "schema = 1\n[component]\nname = \"echo\"\nnamespace = \"chitin\"\nversion = \"0.1.0\"\npublisher = \"chitin\"\n",
        )
        .expect("parses");
        assert_eq!(m.capabilities, Capabilities::default());
    }
}
