//! The audit of a component, for a person deciding whether to install it: publisher, signers
//! and their trust, hash, size, tools, every capability in plain words with a risk note, what
//! the policy cuts, limits, uncovered imports, the composition and, against an earlier
//! version, every widening.
//!
//! [`AuditReport::build`] fills one typed report; [`text`] and [`json`] render it. Facts only
//! the host knows (the operator's policy cuts, the effective limits, how tools are named to
//! agents, the libraries a composition resolves to) come in as plain data. Nothing of the
//! component runs: its tools come from its manifest, which the signature covers.

pub mod json;
pub mod text;

use std::path::{Path, PathBuf};

use crate::artifact::{ArtifactError, ContentHash, WitWorld};
use crate::capability::{SECTIONS, Section};
use crate::imports;
use crate::manifest::{
    ApprovalHint, AuditLine, Capabilities, ComponentKind, ComposedPart, CredentialMapping, Limit,
    Manifest, SecretsGrant,
};
use crate::signature::{self, SignatureReport};
use crate::trust_store::TrustStore;
use crate::widening::widenings;

/// Every capability section of `caps` in plain words, in the order audits show them and
/// lockfiles record them.
pub fn capability_lines(caps: &Capabilities) -> Vec<AuditLine> {
    let mut credentials: Vec<AuditLine> = caps
        .http
        .iter()
        .flat_map(|h| &h.credentials)
        .map(CredentialMapping::audit_line)
        .collect();
    let mut out = Vec::new();
    for section in SECTIONS {
        out.extend((section.audit_lines)(caps));
        // A credential is shown after the secret names it draws on.
        if section.name == SecretsGrant::NAME {
            out.append(&mut credentials);
        }
    }
    out
}

/// What the host adds to an audit: facts the package layer cannot know.
#[derive(Debug, Clone)]
pub struct HostFacts {
    /// The interface whose exports are tools (`chitin:tool/tool`): other exports go unserved.
    pub tool_interface: &'static str,
    /// The name agents see for a tool of a namespace.
    pub exposed_name: fn(&str, &str) -> String,
    /// What the operator's policy takes away from the grant, with why.
    pub cuts: Vec<PolicyCut>,
    /// The limits a call runs under, as this policy clamps the manifest's requests.
    pub limits: EffectiveLimits,
}

/// One part of a grant the policy cuts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyCut {
    /// What is cut.
    pub what: String,
    /// Why.
    pub reason: String,
}

/// The limits in effect under the operator's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectiveLimits {
    /// Each per-call limit's value, in [`Limit::ALL`] order.
    pub per_call: [(Limit, u64); 4],
    /// The key-value quota, for a component that keeps data.
    pub kv_max_bytes: Option<u64>,
}

/// What [`AuditReport::build`] reads.
#[derive(Debug, Clone)]
pub struct AuditInput<'a> {
    /// The component file, as named to the person.
    pub file: &'a Path,
    /// Its bytes (the whole artifact, or its manifest part alone).
    pub bytes: &'a [u8],
    /// Its manifest ([`Manifest::from_artifact`]).
    pub manifest: Option<&'a Manifest>,
    /// The trust store its signers are judged by.
    pub trust: &'a TrustStore,
    /// What the host adds.
    pub host: HostFacts,
}

/// The audit could not be made.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The component's world cannot be read, so neither can its imports.
    #[error(transparent)]
    World(ArtifactError),
}

/// Who and what the component says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `namespace/name`.
    pub id: String,
    /// Its version.
    pub version: semver::Version,
    /// Who publishes it.
    pub publisher: String,
    /// What it is for.
    pub description: String,
}

/// One signature on the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignerLine {
    /// The signer in a few words (publisher and fingerprint, or key id).
    pub described: String,
    /// The key id the signature names.
    pub key_id: String,
    /// The publisher the trust store knows the key as.
    pub publisher: Option<String>,
    /// The key's fingerprint, when trusted.
    pub fingerprint: Option<String>,
    /// What the trust store lets the key sign.
    pub scope: Option<String>,
    /// Whether the signature holds.
    pub status: String,
}

/// A tool as the signed manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedTool {
    /// The name agents see.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The author's approval hint.
    pub approval: ApprovalHint,
}

/// One limit, as the manifest asks and as it takes effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRow {
    /// The limit's key (`memory_bytes`…).
    pub key: &'static str,
    /// What the manifest asks (a number, or what stands in for none).
    pub asked: String,
    /// What a call gets under this policy.
    pub effective: u64,
}

/// The component's imports against its manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportCheck {
    /// Every import.
    pub all: Vec<String>,
    /// Those nothing declared covers, each with the capability that would.
    pub uncovered: Vec<(String, Option<&'static str>)>,
    /// One line per standard import linked with every use refused.
    pub linked_without_grant: Vec<String>,
}

/// The comparison with an earlier version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diff {
    /// The earlier version's file.
    pub against: PathBuf,
    /// Its version.
    pub version: String,
    /// Each widening, in plain words.
    pub widenings: Vec<String>,
}

/// How a tool uses one of its libraries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartUse {
    /// Composed into the tool statically.
    Composed,
    /// Called through the host, in the library's own sandbox.
    Linked,
}

impl PartUse {
    /// In plain words.
    pub fn words(self) -> &'static str {
        match self {
            Self::Composed => "composed statically",
            Self::Linked => "linked through the host, in its own sandbox",
        }
    }
}

/// One library a composition resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryPart {
    /// `namespace/name`.
    pub name: String,
    /// Its version (empty when it has no manifest).
    pub version: String,
    /// Its content hash.
    pub hash: String,
    /// The key that signed it.
    pub signer: String,
    /// Its publisher.
    pub publisher: Option<String>,
    /// How the tool uses it.
    pub how: PartUse,
    /// Its own grant, in plain words.
    pub capabilities: Vec<AuditLine>,
}

/// The audit of one component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditReport {
    /// The file audited.
    pub file: PathBuf,
    /// Who it says it is (`None`: it carries no manifest).
    pub component: Option<Identity>,
    /// Its size in bytes.
    pub size: usize,
    /// Its content hash.
    pub hash: ContentHash,
    /// Its signers, or why the signatures cannot be read.
    pub signers: Result<Vec<SignerLine>, String>,
    /// The publisher who vouches for it, or why none does.
    pub trust: Result<String, String>,
    /// The tools it records, or why none are listed.
    pub tools: Result<Vec<RecordedTool>, String>,
    /// Exports beside the tool interface, which are not served.
    pub unserved_exports: Vec<String>,
    /// The tool interface, named in the note on unserved exports.
    pub tool_interface: &'static str,
    /// Every capability in plain words.
    pub capabilities: Vec<AuditLine>,
    /// What the policy cuts.
    pub cuts: Vec<PolicyCut>,
    /// The limits, asked and effective.
    pub limits: Vec<LimitRow>,
    /// The imports against the manifest (`None`: the manifest part alone has no binary).
    pub imports: Option<ImportCheck>,
    /// Libraries its author composed in (`chitin compose`).
    pub composed_by_author: Vec<ComposedPart>,
    /// Libraries its dependencies resolve to at load.
    pub composition: Vec<LibraryPart>,
    /// The comparison with an earlier version.
    pub diff: Option<Diff>,
}

impl AuditReport {
    /// Audit `input`: its signatures, tools, capabilities, limits and imports. The composition
    /// ([`AuditReport::add_composition`]) and the comparison ([`AuditReport::compare_with`]) are
    /// added after.
    pub fn build(input: AuditInput<'_>) -> Result<Self, AuditError> {
        let AuditInput {
            file,
            bytes,
            manifest,
            trust,
            host,
        } = input;
        // The manifest part alone (what a registry can serve before the download) is audited
        // by its own signature; its imports are checked once the whole file is there.
        let prefix_only = signature::manifest_part(bytes).is_some_and(|p| p.len() == bytes.len());
        let report = signature::inspect(bytes, trust);
        let verdict = match (&report, manifest) {
            _ if prefix_only => manifest_part_verdict(bytes, manifest, trust),
            (Err(e), _) => Err(e.to_string()),
            (Ok(r), Some(m)) => r
                .authorize(&m.component.namespace, &m.component.name)
                .map(|k| k.publisher.clone())
                .map_err(|e| e.to_string()),
            (Ok(r), None) => r
                .authorize_unnamed()
                .map(|k| k.publisher.clone())
                .map_err(|e| e.to_string()),
        };
        let (imports, unserved_exports) = if prefix_only {
            (None, Vec::new())
        } else {
            let world = WitWorld::decode(bytes).map_err(AuditError::World)?;
            let all = world.imports();
            let exports = world.exports();
            // A component exporting the tool interface is served by it alone: any other export
            // is no tool.
            let unserved = if exports.iter().any(|e| e.starts_with(host.tool_interface)) {
                exports
                    .into_iter()
                    .filter(|e| !e.starts_with(host.tool_interface))
                    .collect()
            } else {
                Vec::new()
            };
            let check = ImportCheck {
                uncovered: imports::uncovered(&all, manifest),
                linked_without_grant: imports::describe_linked_without_grant(
                    &imports::linked_without_grant(&all, manifest),
                ),
                all,
            };
            (Some(check), unserved)
        };
        Ok(Self {
            file: file.to_owned(),
            component: manifest.map(|m| Identity {
                id: m.id(),
                version: m.component.version.clone(),
                publisher: m.component.publisher.clone(),
                description: m.component.description.clone(),
            }),
            size: bytes.len(),
            hash: ContentHash::of(bytes),
            signers: report.as_ref().map(signer_lines).map_err(|e| e.to_string()),
            trust: verdict,
            tools: recorded_tools(manifest, host.exposed_name),
            unserved_exports,
            tool_interface: host.tool_interface,
            capabilities: manifest
                .map(|m| capability_lines(&m.capabilities))
                .unwrap_or_default(),
            cuts: host.cuts,
            limits: limit_rows(manifest, host.limits),
            imports,
            composed_by_author: manifest.map(|m| m.composed.clone()).unwrap_or_default(),
            composition: Vec::new(),
            diff: None,
        })
    }

    /// Add the libraries the component's dependencies resolve to.
    pub fn add_composition(&mut self, parts: Vec<LibraryPart>) {
        self.composition = parts;
    }

    /// Compare with `old`, the manifest of the earlier version in `against`.
    pub fn compare_with(&mut self, against: &Path, old: &Manifest, new: &Manifest) {
        self.diff = Some(Diff {
            against: against.to_owned(),
            version: old.component.version.to_string(),
            widenings: widenings(old, new),
        });
    }

    /// Every import the component has (none for the manifest part alone).
    pub fn import_list(&self) -> &[String] {
        self.imports.as_ref().map_or(&[], |i| i.all.as_slice())
    }

    /// Whether it passes: a trusted signer vouches for it and every import is covered.
    pub fn passes(&self) -> bool {
        self.trust.is_ok()
            && self
                .imports
                .as_ref()
                .is_none_or(|imports| imports.uncovered.is_empty())
    }

    /// The grants a person approves by installing it, as the lockfile records them.
    pub fn approved_grants(&self) -> Vec<String> {
        self.capabilities
            .iter()
            .map(AuditLine::grant_words)
            .collect()
    }
}

fn signer_lines(report: &SignatureReport) -> Vec<SignerLine> {
    report
        .signers
        .iter()
        .map(|s| SignerLine {
            described: s.describe(),
            key_id: s.key_id.to_string(),
            publisher: s.trusted.as_ref().map(|t| t.publisher.clone()),
            fingerprint: s.trusted.as_ref().map(|t| t.key.fingerprint()),
            scope: s.trusted.as_ref().map(|t| t.scope_text()),
            status: s.status.to_string(),
        })
        .collect()
}

/// Who vouches for the manifest part `bytes` alone, within its trust scope.
fn manifest_part_verdict(
    bytes: &[u8],
    manifest: Option<&Manifest>,
    trust: &TrustStore,
) -> Result<String, String> {
    let m = manifest.ok_or("the manifest part carries no manifest")?;
    let keys = signature::verify_manifest_part(bytes, trust).map_err(|e| e.to_string())?;
    keys.iter()
        .find(|k| k.covers(&m.component.namespace, &m.component.name))
        .map(|k| {
            format!(
                "{}, for the manifest part only: the binary is checked when downloaded",
                k.publisher
            )
        })
        .ok_or_else(|| format!("no trusted signer of the manifest part may sign {}", m.id()))
}

/// The tools `manifest` records (name as agents see it, description, the author's approval
/// hint), or why none are listed.
fn recorded_tools(
    manifest: Option<&Manifest>,
    exposed_name: fn(&str, &str) -> String,
) -> Result<Vec<RecordedTool>, String> {
    let Some(m) = manifest else {
        return Err("no manifest, so no recorded tools".to_owned());
    };
    if m.component.kind == ComponentKind::Library {
        return Err("a library: it carries no tools".to_owned());
    }
    let specs = m.tool_specs();
    if specs.is_empty() || !m.tools_without_spec().is_empty() {
        return Err(
            "its manifest records no tool specs, so it will not load; its publisher re-runs \
             `chitin manifest embed`"
                .to_owned(),
        );
    }
    Ok(specs
        .into_iter()
        .map(|s| RecordedTool {
            name: exposed_name(&m.component.namespace, &s.name),
            approval: m.tools.get(&s.name).map(|h| h.approval).unwrap_or_default(),
            description: s.description,
        })
        .collect())
}

/// Each limit as `manifest` asks it and as it takes effect.
pub fn limit_rows(manifest: Option<&Manifest>, effective: EffectiveLimits) -> Vec<LimitRow> {
    let asked = manifest.map(|m| m.limits).unwrap_or_default();
    let show = |v: Option<u64>| v.map_or_else(|| "policy default".to_owned(), |v| v.to_string());
    let mut rows: Vec<LimitRow> = effective
        .per_call
        .iter()
        .map(|&(limit, effective)| LimitRow {
            key: limit.key(),
            asked: show(asked.get(limit)),
            effective,
        })
        .collect();
    // The key-value quota, for a component that keeps data: an absent one is the policy's
    // ceiling (`[kv] max_bytes`), and a larger one is clamped to it.
    let kv = manifest
        .and_then(|m| m.capabilities.kv.as_ref())
        .filter(|kv| !kv.buckets.is_empty());
    if let (Some(kv), Some(quota)) = (kv, effective.kv_max_bytes) {
        rows.push(LimitRow {
            key: "kv_max_bytes",
            asked: kv
                .max_bytes
                .map_or_else(|| "policy ceiling".to_owned(), |v| v.to_string()),
            effective: quota,
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_capability_is_described_in_plain_words() {
        let manifest = Manifest::parse(
            "schema = 1\n[component]\nname = \"q\"\nnamespace = \"acme\"\nversion = \"1.0.0\"\n\
             publisher = \"acme\"\n[capabilities.client]\nmethods = [\"elicit\", \"sample\"]\n",
        )
        .expect("manifest");
        let lines = capability_lines(&manifest.capabilities);
        let line = lines
            .iter()
            .find(|l| l.name == "client")
            .expect("a client line");
        assert_eq!(line.scope, "methods `elicit`, `sample`");
        assert!(
            line.risk.contains("questions to the calling MCP client"),
            "{}",
            line.risk
        );
    }

    #[test]
    fn capabilities_are_listed_in_audit_order_with_credentials_after_secrets() {
        let manifest = Manifest::parse(
            "schema = 1\n[component]\nname = \"gh\"\nnamespace = \"acme\"\n\
             version = \"1.0.0\"\npublisher = \"acme\"\n\
             [capabilities.client]\nmethods = [\"elicit\"]\n\
             [capabilities.env]\nkeys = [\"LANG\"]\n\
             [capabilities.process]\nprograms = [\"git\"]\n\
             [[capabilities.http.allow]]\nhost = \"api.github.com\"\n\
             [[capabilities.http.credentials]]\nsecret = \"github_token\"\n\
             hosts = [\"api.github.com\"]\ninject = \"bearer\"\n\
             [capabilities.secrets]\nnames = [\"github_*\"]\n\
             [capabilities.kv]\nbuckets = [\"cache\"]\n\
             [capabilities.files]\npaths = [{ path = \"docs\", access = \"read-only\" }]\n\
             [capabilities.invoke]\ntools = { search = \"memory_search\" }\n",
        )
        .expect("manifest");
        let lines = capability_lines(&manifest.capabilities);
        let names: Vec<&str> = lines.iter().map(|l| l.name).collect();
        assert_eq!(
            names,
            [
                "files",
                "kv",
                "http",
                "secrets",
                "credential",
                "process",
                "env",
                "invoke",
                "client"
            ]
        );
        let report = AuditReport {
            capabilities: lines,
            ..empty_report()
        };
        assert_eq!(
            report.approved_grants(),
            [
                "files: read-only `docs` in the workspace",
                "kv: buckets `cache`",
                "http: GET/HEAD https://api.github.com",
                "secrets: names `github_*`",
                "credential: github_token as bearer to api.github.com",
                "process: programs `git`",
                "env: keys `LANG`",
                "invoke: `search` → memory_search",
                "client: methods `elicit`",
            ]
        );
    }

    fn empty_report() -> AuditReport {
        AuditReport {
            file: PathBuf::new(),
            component: None,
            size: 0,
            hash: ContentHash::of(b""),
            signers: Ok(Vec::new()),
            trust: Err("unsigned".into()),
            tools: Err("no manifest".into()),
            unserved_exports: Vec::new(),
            tool_interface: "chitin:tool/tool",
            capabilities: Vec::new(),
            cuts: Vec::new(),
            limits: Vec::new(),
            imports: None,
            composed_by_author: Vec::new(),
            composition: Vec::new(),
            diff: None,
        }
    }
}
