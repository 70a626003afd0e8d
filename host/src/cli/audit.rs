//! `chitin audit FILE|NAME`: what a component is and what it could touch, for a person deciding
//! whether to install it: publisher, signers and their trust, hash, size, tools, every
//! capability in plain words with a risk note, limits, uncovered imports, and against an
//! installed (or `--against`) version, every widening.
//!
//! Nothing of the component runs: its tools, schemas and annotations come from its manifest,
//! where `chitin manifest embed` recorded them and the signature covers them.
//!
//! The report is built and rendered by `chitin_registry::audit`; this command finds the file,
//! gathers what only the host knows (the grant under the policy, the libraries a composition
//! resolves to, the installed version) and picks the renderer.

use std::path::{Path, PathBuf};

use anyhow::Context;
use chitin_registry::artifact;
use chitin_registry::audit::{
    AuditInput, AuditReport, EffectiveLimits, HostFacts, LibraryPart, PartUse, PolicyCut,
    capability_lines,
};
use chitin_registry::manifest::{ComponentKind, Limit, Manifest};

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
            let Some(manifest) = Manifest::from_artifact(&bytes).ok().flatten() else {
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
            let is_library = Manifest::from_artifact(&bytes)
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

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let (runtime, policy, services) = open_runtime(cli)?;
    let file = locate(cli, services.data_dir(), &args.target)?;
    let open = OpenHost {
        runtime: &runtime,
        policy: &policy,
        services: &services,
    };
    let (exit, _) = report(cli, &open, &file, args.against.clone(), args.json).await?;
    Ok(exit)
}

/// A runtime, policy and services already open, for commands that audit on the way.
pub(super) struct OpenHost<'a> {
    /// The runtime.
    pub runtime: &'a crate::runtime::Runtime,
    /// The policy.
    pub policy: &'a Policy,
    /// The services.
    pub services: &'a std::sync::Arc<crate::services::Services>,
}

/// Print the audit of `file` (as JSON with `json`), compared with `against` or else the
/// installed version of the same component; `Exit::Ok` when it is trusted and every import is
/// covered. The report is returned too: an install records its grants from it.
pub(super) async fn report(
    cli: &Cli,
    open: &OpenHost<'_>,
    file: &Path,
    against: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<(Exit, AuditReport)> {
    let (runtime, policy, services) = (open.runtime, open.policy, open.services);
    let file = file.to_owned();
    let bytes = std::fs::read(&file).with_context(|| format!("{}: cannot read", file.display()))?;
    artifact::check_header(&bytes).with_context(|| file.display().to_string())?;
    let manifest = Manifest::from_artifact(&bytes).with_context(|| file.display().to_string())?;
    let grant = Grant::resolve(manifest.clone(), policy, services);
    let mut report = AuditReport::build(AuditInput {
        file: &file,
        bytes: &bytes,
        manifest: manifest.as_ref(),
        trust: services.trust(),
        host: host_facts(manifest.as_ref(), grant.as_ref().ok(), policy),
    })
    .with_context(|| file.display().to_string())?;
    if let Some(m) = &manifest
        && report.trust.is_ok()
        && !m.dependencies.is_empty()
    {
        let libraries = load_libraries(cli, runtime, policy, services).await;
        let parts = library::resolve(
            m,
            report.import_list(),
            &libraries,
            m.capabilities.env.is_some(),
        )
        .map(|r| {
            r.composed
                .iter()
                .map(|l| library_part(l, LibraryUse::Composed))
                .chain(
                    r.linked
                        .iter()
                        .map(|(_, l)| library_part(l, LibraryUse::Linked)),
                )
                .collect()
        })
        .unwrap_or_default();
        report.add_composition(parts);
    }
    let previous = match against {
        Some(path) => Some(path),
        None => installed_version(&services.data_dir().components(), manifest.as_ref(), &file),
    };
    if let (Some(path), Some(new)) = (&previous, &manifest) {
        let old_bytes =
            std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
        let old = Manifest::from_artifact(&old_bytes)
            .with_context(|| path.display().to_string())?
            .with_context(|| format!("{}: carries no manifest", path.display()))?;
        report.compare_with(path, &old, new);
    }
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&chitin_registry::audit::json::render(&report))?
        );
    } else {
        out!("{}", chitin_registry::audit::text::render(&report));
    }
    let exit = if report.passes() {
        Exit::Ok
    } else {
        Exit::Denied
    };
    Ok((exit, report))
}

/// What the host knows that the audit shows: tool names as agents see them, the policy's cuts
/// and the limits in effect.
fn host_facts(manifest: Option<&Manifest>, grant: Option<&Grant>, policy: &Policy) -> HostFacts {
    HostFacts {
        tool_interface: crate::contract::TOOL_INTERFACE,
        exposed_name: crate::spec::exposed_name,
        cuts: grant
            .map(|g| {
                g.cuts
                    .iter()
                    .map(|c| PolicyCut {
                        what: c.what.clone(),
                        reason: c.reason.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        limits: effective_limits(manifest, grant, policy),
    }
}

/// The limits a call gets: the grant's, or the policy's defaults when there is none; the
/// key-value quota is the manifest's clamped to the policy's ceiling (`[kv] max_bytes`).
fn effective_limits(
    manifest: Option<&Manifest>,
    grant: Option<&Grant>,
    policy: &Policy,
) -> EffectiveLimits {
    let effective = grant.map(|g| g.limits).unwrap_or(policy.limits.default);
    EffectiveLimits {
        per_call: Limit::ALL.map(|limit| (limit, effective.get(limit))),
        kv_max_bytes: manifest
            .and_then(|m| m.capabilities.kv.as_ref())
            .map(|kv| crate::caps::kv::quota(kv, policy.kv_quota_ceiling())),
    }
}

/// One library of a composition, as the audit shows it.
fn library_part(library: &LoadedLibrary, how: LibraryUse) -> LibraryPart {
    LibraryPart {
        name: library.id(),
        version: library
            .version()
            .map(ToString::to_string)
            .unwrap_or_default(),
        hash: library.hash.to_string(),
        signer: library.signer.clone(),
        publisher: library.publisher.clone(),
        how: match how {
            LibraryUse::Composed => PartUse::Composed,
            LibraryUse::Linked => PartUse::Linked,
        },
        capabilities: library
            .grant
            .manifest
            .as_ref()
            .map(|m| capability_lines(&m.capabilities))
            .unwrap_or_default(),
    }
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
                .and_then(|b| Manifest::from_artifact(&b).ok().flatten())
                .is_some_and(|m| m.id() == id)
    })
}

#[cfg(test)]
mod tests {
    use chitin_registry::audit::limit_rows;

    use super::*;
    use crate::policy::DEFAULT_POLICY;

    /// The kv row of the audit's limits for a manifest asking `max_bytes` (a line, or nothing)
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
        limit_rows(
            Some(&manifest),
            effective_limits(Some(&manifest), None, &policy),
        )
        .into_iter()
        .find(|row| row.key == "kv_max_bytes")
        .map(|row| (row.asked, row.effective))
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
            limit_rows(Some(&echo), effective_limits(Some(&echo), None, &policy))
                .iter()
                .all(|row| row.key != "kv_max_bytes"),
            "no kv grant, no quota row"
        );
    }
}
