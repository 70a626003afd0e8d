//! `chitin audit FILE|NAME`: what a component is and what it could touch, for a person deciding
//! whether to install it: publisher, signers and their trust, hash, size, tools, every
//! capability in plain words with a risk note, limits, uncovered imports, and against an
//! installed (or `--against`) version, every widening.
//!
//! Nothing of the component runs: its tools, schemas and annotations come from its manifest,
//! where `chitin manifest embed` recorded them and the signature covers them.

use std::path::{Path, PathBuf};

use anyhow::Context;
use chitin_registry::artifact::{self, ContentHash, WitWorld};
use chitin_registry::imports;
use chitin_registry::manifest::{ApprovalHint, Capabilities, ComponentKind, FileAccess, Manifest};
use chitin_registry::signature;
use chitin_registry::widening::widenings;
use serde_json::{Value, json};

use super::{Cli, Exit, component_sources, open_runtime};
use crate::grant::Grant;
use crate::library;
use crate::library::LoadedLibrary;
use crate::policy::Policy;
use crate::runtime::{LibraryUse, Loaded};

/// Arguments of `chitin audit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A component file, or the name of a loaded component (`namespace/name` or `name`).
    target: String,
    /// Print as JSON.
    #[arg(long)]
    json: bool,
    /// Compare with this earlier version (default: the installed one of the same name, if any).
    #[arg(long, value_name = "FILE")]
    against: Option<PathBuf>,
}

/// One capability in plain words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CapabilityLine {
    /// The manifest section.
    pub name: &'static str,
    /// The scope, as granted.
    pub scope: String,
    /// What it lets the component do, for a person.
    pub risk: String,
}

fn quoted(list: &[String]) -> String {
    list.iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn workspace_path(path: &str) -> String {
    if path == "." || path.is_empty() {
        "the whole workspace".to_owned()
    } else {
        format!("`{path}` in the workspace")
    }
}

/// Every capability section of `caps`, in plain words.
pub(super) fn describe(caps: &Capabilities) -> Vec<CapabilityLine> {
    let mut out = Vec::new();
    if let Some(files) = &caps.files {
        for p in &files.paths {
            let (scope, risk) = match p.access {
                FileAccess::ReadOnly => (
                    format!("read-only {}", workspace_path(&p.path)),
                    format!("can read every file under {}", workspace_path(&p.path)),
                ),
                FileAccess::ReadWrite => (
                    format!("read-write {}", workspace_path(&p.path)),
                    format!(
                        "can read, change and delete files under {}",
                        workspace_path(&p.path)
                    ),
                ),
            };
            out.push(CapabilityLine {
                name: "files",
                scope,
                risk,
            });
        }
    }
    if let Some(kv) = &caps.kv {
        out.push(CapabilityLine {
            name: "kv",
            scope: format!("buckets {}", quoted(&kv.buckets)),
            risk: "can keep data between calls in its own buckets".into(),
        });
    }
    if let Some(http) = &caps.http {
        for entry in &http.allow {
            let methods = if entry.methods.is_empty() {
                "GET/HEAD".to_owned()
            } else {
                entry.methods.join("/")
            };
            let target = format!(
                "{}://{}{}{}",
                entry.scheme.as_deref().unwrap_or("https"),
                entry.host,
                entry.port.map(|p| format!(":{p}")).unwrap_or_default(),
                entry.path_prefix.as_deref().unwrap_or_default()
            );
            let whom = if entry.host.trim() == "*" {
                "ANY public host (only non-public addresses are refused)".to_owned()
            } else {
                target.clone()
            };
            out.push(CapabilityLine {
                name: "http",
                scope: format!("{methods} {target}"),
                risk: format!(
                    "can send {methods} requests to {whom}, carrying data off this machine"
                ),
            });
        }
    }
    if let Some(secrets) = &caps.secrets {
        out.push(CapabilityLine {
            name: "secrets",
            scope: format!("names {}", quoted(&secrets.names)),
            risk: "can use credentials whose names match these patterns".into(),
        });
    }
    for c in caps.http.iter().flat_map(|h| &h.credentials) {
        let path = c.path_prefix.as_deref().unwrap_or_default();
        let hosts = c
            .hosts
            .iter()
            .map(|h| format!("{h}{path}"))
            .collect::<Vec<_>>()
            .join(", ");
        out.push(CapabilityLine {
            name: "credential",
            scope: format!("{} as {} to {hosts}", c.secret, c.inject.as_str()),
            risk: format!(
                "the host sends secret `{}` with its requests to {hosts} (the component never \
                 sees the value)",
                c.secret
            ),
        });
    }
    if let Some(process) = &caps.process {
        let network = if process.network {
            ", with network access"
        } else {
            ", without network access"
        };
        out.push(CapabilityLine {
            name: "process",
            scope: format!(
                "programs {}{}",
                quoted(&process.programs),
                if process.env.is_empty() {
                    String::new()
                } else {
                    format!(", env {}", quoted(&process.env))
                }
            ),
            risk: format!(
                "can run {} inside the workspace{network}",
                process.programs.join(", ")
            ),
        });
    }
    if let Some(env) = &caps.env {
        out.push(CapabilityLine {
            name: "env",
            scope: format!("keys {}", quoted(&env.keys)),
            risk: "can read these environment variables of the host".into(),
        });
    }
    if let Some(invoke) = &caps.invoke {
        for (alias, tool) in &invoke.tools {
            out.push(CapabilityLine {
                name: "invoke",
                scope: format!("`{alias}` → {tool}"),
                risk: format!(
                    "can call {tool} (under its own grant, subject to the policy and approvals)"
                ),
            });
        }
    }
    if let Some(client) = &caps.client {
        let methods: Vec<String> = client
            .methods
            .iter()
            .map(|m| m.as_str().to_owned())
            .collect();
        out.push(CapabilityLine {
            name: "client",
            scope: format!("methods {}", quoted(&methods)),
            risk: "can put questions to the calling MCP client (its user's forms, its model's \
                   completions, its roots), whose answers come back to the component"
                .into(),
        });
    }
    out
}

fn signers_json(report: &signature::SignatureReport) -> Vec<Value> {
    report
        .signers
        .iter()
        .map(|s| {
            json!({
                "key_id": s.key_id.to_string(),
                "publisher": s.trusted.as_ref().map(|t| t.publisher.clone()),
                "fingerprint": s.trusted.as_ref().map(|t| t.key.fingerprint()),
                "scope": s.trusted.as_ref().map(|t| t.scope_text()),
                "status": s.status.to_string(),
            })
        })
        .collect()
}

/// Find the file for `target`: a path, or a loaded component's manifest name.
fn locate(cli: &Cli, data: &crate::data_dir::DataDir, target: &str) -> anyhow::Result<PathBuf> {
    let path = Path::new(target);
    if path.is_file() {
        return Ok(path.to_owned());
    }
    for source in component_sources(cli, data) {
        for file in wasm_files(&source) {
            let Ok(bytes) = std::fs::read(&file) else {
                continue;
            };
            let Some(manifest) = artifact::manifest_text(&bytes)
                .ok()
                .flatten()
                .and_then(|t| Manifest::parse(t).ok())
            else {
                continue;
            };
            if manifest.id() == target || manifest.component.name == target {
                return Ok(file);
            }
        }
    }
    anyhow::bail!("{target}: no such file, and no loaded component of that name")
}

fn wasm_files(source: &Path) -> Vec<PathBuf> {
    if source.is_file() {
        return vec![source.to_owned()];
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(source)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    files.sort();
    files
}

/// Every library among the component sources, loaded for resolving dependencies (those that
/// fail to load are left out: the dependency that needs one is then reported as missing).
async fn load_libraries(
    cli: &Cli,
    runtime: &crate::runtime::Runtime,
    policy: &Policy,
    services: &std::sync::Arc<crate::services::Services>,
) -> Vec<std::sync::Arc<LoadedLibrary>> {
    let mut libraries = Vec::new();
    for source in component_sources(cli, services.data_dir()) {
        for file in wasm_files(&source) {
            let Ok(bytes) = std::fs::read(&file) else {
                continue;
            };
            let is_library = manifest_of(&bytes)
                .ok()
                .flatten()
                .is_some_and(|m| m.component.kind == ComponentKind::Library);
            if !is_library {
                continue;
            }
            if let Ok(Loaded::Library(library)) =
                runtime.load_any(&file, &bytes, policy, services, &[]).await
            {
                libraries.push(library);
            }
        }
    }
    libraries
}

/// One library of a composition, as the audit shows it.
struct Part {
    name: String,
    version: String,
    hash: String,
    signer: String,
    publisher: Option<String>,
    how: &'static str,
    capabilities: Vec<CapabilityLine>,
}

impl Part {
    fn of(library: &LoadedLibrary, how: LibraryUse) -> Self {
        Self {
            name: library.id(),
            version: library
                .version()
                .map(ToString::to_string)
                .unwrap_or_default(),
            hash: library.hash.to_string(),
            signer: library.signer.clone(),
            publisher: library.publisher.clone(),
            how: match how {
                LibraryUse::Composed => "composed statically",
                LibraryUse::Linked => "linked through the host, in its own sandbox",
            },
            capabilities: library
                .grant
                .manifest
                .as_ref()
                .map(|m| describe(&m.capabilities))
                .unwrap_or_default(),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "component": self.name,
            "version": self.version,
            "hash": self.hash,
            "signer": self.signer,
            "publisher": self.publisher,
            "use": self.how,
            "capabilities": self.capabilities.iter().map(|c| json!({"capability": c.name, "scope": c.scope, "risk": c.risk})).collect::<Vec<_>>(),
        })
    }
}

/// The composition tree: the root, then each library with its signer, hash and grants.
fn print_composition(
    manifest: Option<&Manifest>,
    hash: &ContentHash,
    verdict: &Result<String, String>,
    parts: &[Part],
) {
    let Some(root) = manifest else { return };
    if parts.is_empty() && root.composed.is_empty() {
        return;
    }
    println!("composition:");
    let signer = verdict.as_deref().unwrap_or("untrusted");
    println!(
        "  {} {} (this component), {hash}, signed by {signer}",
        root.id(),
        root.component.version
    );
    let total = root.composed.len() + parts.len();
    for (i, part) in root.composed.iter().enumerate() {
        let branch = if i + 1 == total { "└─" } else { "├─" };
        let rail = if i + 1 == total { "  " } else { "│ " };
        println!(
            "  {branch} {} {}, composed in by its author (`chitin compose`)",
            part.name, part.version
        );
        println!(
            "  {rail}   {}, covered by this component's signature",
            part.hash
        );
    }
    for (i, part) in parts.iter().enumerate() {
        let last = root.composed.len() + i + 1 == total;
        let branch = if last { "└─" } else { "├─" };
        let rail = if last { "  " } else { "│ " };
        println!("  {branch} {} {}, {}", part.name, part.version, part.how);
        println!(
            "  {rail}   {}, signed by {} ({})",
            part.hash,
            part.publisher.as_deref().unwrap_or("an unnamed publisher"),
            part.signer
        );
        if part.capabilities.is_empty() {
            println!("  {rail}   grants: none");
        }
        for c in &part.capabilities {
            println!("  {rail}   {}: {} — {}", c.name, c.scope, c.risk);
        }
    }
}

/// Who vouches for the manifest part `bytes` alone, within its trust scope.
fn manifest_part_verdict(
    bytes: &[u8],
    manifest: Option<&Manifest>,
    trust: &chitin_registry::trust::TrustStore,
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
fn recorded_tools(manifest: Option<&Manifest>) -> Result<Vec<RecordedTool>, String> {
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
            name: crate::spec::exposed_name(&m.component.namespace, &s.name),
            approval: m.tools.get(&s.name).map(|h| h.approval).unwrap_or_default(),
            description: s.description,
        })
        .collect())
}

/// A tool as the signed manifest records it, for the report.
struct RecordedTool {
    /// The name agents see.
    name: String,
    description: String,
    approval: ApprovalHint,
}

fn manifest_of(bytes: &[u8]) -> anyhow::Result<Option<Manifest>> {
    Ok(artifact::manifest_text(bytes)?
        .map(Manifest::parse)
        .transpose()?)
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let (runtime, policy, services) = open_runtime(cli)?;
    let file = locate(cli, services.data_dir(), &args.target)?;
    let open = Opened {
        runtime: &runtime,
        policy: &policy,
        services: &services,
    };
    report(cli, &open, &file, args.against.clone(), args.json).await
}

/// A runtime, policy and services already open, for commands that audit on the way.
pub(super) struct Opened<'a> {
    /// The runtime.
    pub runtime: &'a crate::runtime::Runtime,
    /// The policy.
    pub policy: &'a Policy,
    /// The services.
    pub services: &'a std::sync::Arc<crate::services::Services>,
}

/// Print the audit of `file` (as JSON with `json`), compared with `against` or else the
/// installed version of the same component; `Exit::Ok` when it is trusted and every import is
/// covered.
pub(super) async fn report(
    cli: &Cli,
    open: &Opened<'_>,
    file: &Path,
    against: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<Exit> {
    let (runtime, policy, services) = (open.runtime, open.policy, open.services);
    let file = file.to_owned();
    let bytes = std::fs::read(&file).with_context(|| format!("{}: cannot read", file.display()))?;
    artifact::check_header(&bytes).with_context(|| file.display().to_string())?;
    let hash = ContentHash::of(&bytes);
    let manifest = manifest_of(&bytes).with_context(|| file.display().to_string())?;
    // The manifest part alone (what a registry can serve before the download) is audited by
    // its own signature; its imports are checked once the whole file is there.
    let prefix_only = signature::manifest_part(&bytes).is_some_and(|p| p.len() == bytes.len());
    let report = signature::inspect(&bytes, services.trust());
    let verdict = match (&report, &manifest) {
        _ if prefix_only => manifest_part_verdict(&bytes, manifest.as_ref(), services.trust()),
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
    let (import_list, export_list) = if prefix_only {
        (Vec::new(), Vec::new())
    } else {
        let world = WitWorld::decode(&bytes).with_context(|| file.display().to_string())?;
        (world.imports(), world.exports())
    };
    // A component exporting `chitin:tool` is served by it alone: any other export is no tool.
    let unserved: Vec<String> = if export_list
        .iter()
        .any(|e| e.starts_with(crate::contract::TOOL_INTERFACE))
    {
        export_list
            .iter()
            .filter(|e| !e.starts_with(crate::contract::TOOL_INTERFACE))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    let uncovered = imports::uncovered(&import_list, manifest.as_ref());
    let no_grant = imports::describe_linked_without_grant(&imports::linked_without_grant(
        &import_list,
        manifest.as_ref(),
    ));
    // Tools come from the manifest, which the signature covers: nothing of the component runs.
    let tools = recorded_tools(manifest.as_ref());
    let composition: Vec<Part> = match &manifest {
        Some(m) if verdict.is_ok() && !m.dependencies.is_empty() => {
            let libraries = load_libraries(cli, runtime, policy, services).await;
            library::resolve(m, &import_list, &libraries, m.capabilities.env.is_some())
                .map(|r| {
                    r.composed
                        .iter()
                        .map(|l| Part::of(l, LibraryUse::Composed))
                        .chain(
                            r.linked
                                .iter()
                                .map(|(_, l)| Part::of(l, LibraryUse::Linked)),
                        )
                        .collect()
                })
                .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let grant = Grant::resolve(manifest.clone(), policy, services);
    let previous = match against {
        Some(path) => Some(path),
        None => installed_version(&services.data_dir().components(), manifest.as_ref(), &file),
    };
    let diff = match (&previous, &manifest) {
        (Some(path), Some(new)) => {
            let old_bytes =
                std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
            let old = manifest_of(&old_bytes)
                .with_context(|| path.display().to_string())?
                .with_context(|| format!("{}: carries no manifest", path.display()))?;
            Some((
                path.clone(),
                old.component.version.to_string(),
                widenings(&old, new),
            ))
        }
        _ => None,
    };
    let caps = manifest
        .as_ref()
        .map(|m| describe(&m.capabilities))
        .unwrap_or_default();
    if json {
        let out = json!({
            "file": file,
            "component": manifest.as_ref().map(|m| m.id()),
            "version": manifest.as_ref().map(|m| m.component.version.to_string()),
            "publisher": manifest.as_ref().map(|m| m.component.publisher.clone()),
            "description": manifest.as_ref().map(|m| m.component.description.clone()),
            "hash": hash.to_string(),
            "size": bytes.len(),
            "signers": report.as_ref().map(signers_json).unwrap_or_default(),
            "trusted": verdict.is_ok(),
            "refusal": verdict.as_ref().err(),
            "tools": match &tools {
                Ok(list) => json!(list.iter().map(|t| json!({"name": t.name, "description": t.description})).collect::<Vec<_>>()),
                Err(why) => json!({"not_listed": why}),
            },
            "unserved_exports": unserved,
            "capabilities": caps.iter().map(|c| json!({"capability": c.name, "scope": c.scope, "risk": c.risk})).collect::<Vec<_>>(),
            "limits": limits_json(manifest.as_ref(), policy, grant.as_ref().ok()),
            "policy_cuts": grant.as_ref().map(|g| g.cuts.iter().map(|c| json!({"what": c.what, "reason": c.reason})).collect::<Vec<_>>()).unwrap_or_default(),
            "imports": (!prefix_only).then_some(&import_list),
            "uncovered_imports": uncovered.iter().map(|(i, _)| i).collect::<Vec<_>>(),
            "linked_without_grant": no_grant,
            "diff": diff.as_ref().map(|(path, version, w)| json!({"against": path, "version": version, "widenings": w})),
            "composition": composition.iter().map(Part::to_json).collect::<Vec<_>>(),
            "composed_by_author": manifest.as_ref().map(|m| m.composed.iter().map(|p| json!({"component": p.name, "version": p.version.to_string(), "hash": p.hash})).collect::<Vec<_>>()).unwrap_or_default(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_human(
            &file,
            manifest.as_ref(),
            &hash,
            bytes.len(),
            &report,
            &verdict,
            &tools,
            &unserved,
            &caps,
            policy,
            grant.as_ref().ok(),
            (!prefix_only).then_some(uncovered.as_slice()),
            &no_grant,
            diff.as_ref(),
        );
        print_composition(manifest.as_ref(), &hash, &verdict, &composition);
    }
    Ok(if verdict.is_ok() && uncovered.is_empty() {
        Exit::Ok
    } else {
        Exit::Denied
    })
}

fn installed_version(dir: &Path, manifest: Option<&Manifest>, file: &Path) -> Option<PathBuf> {
    let id = manifest?.id();
    if crate::installed::Installed::is_managed(dir) {
        let installed = crate::installed::Installed::new(dir);
        let lock = installed.lock().ok()?;
        return lock
            .get(&id)
            .map(|locked| installed.file(locked))
            .filter(|f| f != file);
    }
    wasm_files(dir).into_iter().find(|candidate| {
        candidate != file
            && std::fs::read(candidate)
                .ok()
                .and_then(|b| manifest_of(&b).ok().flatten())
                .is_some_and(|m| m.id() == id)
    })
}

fn limit_rows(
    manifest: Option<&Manifest>,
    grant: Option<&Grant>,
    policy: &Policy,
) -> Vec<(&'static str, String, u64)> {
    let asked = manifest.map(|m| m.limits).unwrap_or_default();
    let effective = grant.map(|g| g.limits).unwrap_or(policy.limits.default);
    let show = |v: Option<u64>| v.map_or_else(|| "policy default".to_owned(), |v| v.to_string());
    let mut rows = vec![
        (
            "memory_bytes",
            show(asked.memory_bytes.map(|v| v as u64)),
            effective.memory_bytes as u64,
        ),
        ("fuel", show(asked.fuel), effective.fuel),
        ("timeout_ms", show(asked.timeout_ms), effective.timeout_ms),
        (
            "output_bytes",
            show(asked.output_bytes.map(|v| v as u64)),
            effective.output_bytes as u64,
        ),
    ];
    // The key-value quota, for a component that keeps data: an absent one is the policy's
    // ceiling (`[kv] max_bytes`), and a larger one is clamped to it.
    if let Some(kv) = manifest
        .and_then(|m| m.capabilities.kv.as_ref())
        .filter(|kv| !kv.buckets.is_empty())
    {
        rows.push((
            "kv_max_bytes",
            kv.max_bytes
                .map_or_else(|| "policy ceiling".to_owned(), |v| v.to_string()),
            crate::caps::kv::quota(kv, policy.kv_quota_ceiling()),
        ));
    }
    rows
}

fn limits_json(manifest: Option<&Manifest>, policy: &Policy, grant: Option<&Grant>) -> Value {
    limit_rows(manifest, grant, policy)
        .into_iter()
        .map(|(k, asked, effective)| {
            (
                k.to_owned(),
                json!({"asked": asked, "effective": effective}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[allow(clippy::too_many_arguments)]
fn print_human(
    file: &Path,
    manifest: Option<&Manifest>,
    hash: &ContentHash,
    size: usize,
    report: &Result<signature::SignatureReport, signature::SignatureError>,
    verdict: &Result<String, String>,
    tools: &Result<Vec<RecordedTool>, String>,
    unserved: &[String],
    caps: &[CapabilityLine],
    policy: &Policy,
    grant: Option<&Grant>,
    uncovered: Option<&[(String, Option<&'static str>)]>,
    no_grant: &[String],
    diff: Option<&(PathBuf, String, Vec<String>)>,
) {
    match manifest {
        Some(m) => {
            println!("component:   {} {}", m.id(), m.component.version);
            println!("publisher:   {}", m.component.publisher);
            if !m.component.description.is_empty() {
                println!("description: {}", m.component.description);
            }
        }
        None => println!("component:   (no manifest: nothing beyond the WASI base is granted)"),
    }
    println!("file:        {}", file.display());
    println!("size:        {size} bytes");
    println!("hash:        {hash}");
    println!("signers:");
    match report {
        Ok(r) => {
            for s in &r.signers {
                let scope = s
                    .trusted
                    .as_ref()
                    .map(|t| format!(", trusted for {}", t.scope_text()))
                    .unwrap_or_default();
                println!("  {}: {}{scope}", s.describe(), s.status);
            }
        }
        Err(e) => println!("  {e}"),
    }
    match verdict {
        Ok(publisher) => println!("trust:       TRUSTED (vouched for by {publisher})"),
        Err(why) => println!("trust:       REFUSED: {why}"),
    }
    println!("tools:");
    match tools {
        Ok(list) => {
            for t in list {
                println!(
                    "  {} [approval: {}]: {}",
                    t.name,
                    format!("{:?}", t.approval).to_lowercase(),
                    t.description.lines().next().unwrap_or_default()
                );
            }
        }
        Err(why) => println!("  ({why})"),
    }
    if !unserved.is_empty() {
        println!(
            "  note: also exports {}, which chitin does not serve: a `{}` component's tools are \
             those its specs() lists",
            unserved.join(", "),
            crate::contract::TOOL_INTERFACE
        );
    }
    println!("capabilities:");
    if caps.is_empty() {
        println!("  none: runs with the WASI base only (clocks, randomness, its own log)");
    }
    for c in caps {
        println!("  {}: {}", c.name, c.scope);
        println!("    risk: {}", c.risk);
    }
    if let Some(g) = grant {
        for cut in &g.cuts {
            println!("  policy cuts {}: {}", cut.what, cut.reason);
        }
    }
    println!("limits (asked -> effective under this policy):");
    for (key, asked, effective) in limit_rows(manifest, grant, policy) {
        println!("  {key}: {asked} -> {effective}");
    }
    let Some(uncovered) = uncovered else {
        println!("imports:     not checked: the manifest part alone has no binary to read");
        return print_diff(diff);
    };
    if uncovered.is_empty() {
        println!("imports:     all covered by the WASI base or declared capabilities");
    } else {
        println!(
            "imports:     NOT COVERED: {}",
            imports::describe_uncovered(uncovered)
        );
    }
    for line in no_grant {
        println!("  {line}");
    }
    print_diff(diff);
}

fn print_diff(diff: Option<&(PathBuf, String, Vec<String>)>) {
    if let Some((path, version, wider)) = diff {
        println!("against {version} ({}):", path.display());
        if wider.is_empty() {
            println!("  no widening");
        }
        for w in wider {
            println!("  WIDENS {w}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::DEFAULT_POLICY;

    /// The kv row of [`limit_rows`] for a manifest asking `max_bytes` (a line, or nothing)
    /// under a policy whose `[kv] max_bytes` is `ceiling`.
    fn kv_row(asked: &str, ceiling: u64) -> Option<(String, u64)> {
        let manifest = Manifest::parse(&format!(
            "schema = 1\n[component]\nname = \"k\"\nnamespace = \"acme\"\nversion = \"1.0.0\"\n\
             publisher = \"acme\"\n[capabilities.kv]\nbuckets = [\"b\"]\n{asked}\n"
        ))
        .expect("manifest");
        let policy = Policy::parse(
            &DEFAULT_POLICY.replace("max_bytes = 67108864", &format!("max_bytes = {ceiling}")),
            Path::new("policy.toml"),
        )
        .expect("policy");
        limit_rows(Some(&manifest), None, &policy)
            .into_iter()
            .find(|(key, ..)| *key == "kv_max_bytes")
            .map(|(_, asked, effective)| (asked, effective))
    }

    #[test]
    fn the_kv_quota_is_shown_asked_and_clamped_by_the_policy() {
        assert_eq!(kv_row("", 4096), Some(("policy ceiling".to_owned(), 4096)));
        assert_eq!(
            kv_row("max_bytes = 1000", 4096),
            Some(("1000".to_owned(), 1000))
        );
        assert_eq!(
            kv_row("max_bytes = 9999", 4096),
            Some(("9999".to_owned(), 4096))
        );
        let echo = Manifest::parse(
            "schema = 1\n[component]\nname = \"e\"\nnamespace = \"acme\"\nversion = \"1.0.0\"\n\
             publisher = \"acme\"\n",
        )
        .expect("manifest");
        let policy = Policy::parse(DEFAULT_POLICY, Path::new("policy.toml")).expect("policy");
        assert!(
            limit_rows(Some(&echo), None, &policy)
                .iter()
                .all(|(key, ..)| *key != "kv_max_bytes"),
            "no kv grant, no quota row"
        );
    }

    #[test]
    fn the_client_capability_is_described_in_plain_words() {
        let manifest = Manifest::parse(
            "schema = 1\n[component]\nname = \"q\"\nnamespace = \"acme\"\nversion = \"1.0.0\"\n\
             publisher = \"acme\"\n[capabilities.client]\nmethods = [\"elicit\", \"sample\"]\n",
        )
        .expect("manifest");
        let lines = describe(&manifest.capabilities);
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
}
