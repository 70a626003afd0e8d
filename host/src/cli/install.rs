//! `chitin install`, `chitin update` and `chitin remove`: fetch a component from a registry,
//! check it (digest, signature and the signer's trust scope, manifest, imports), show its audit,
//! ask a person to approve what it may do, and commit it to the lockfile. A failure at any step
//! leaves the installed set as it was.

use std::io::IsTerminal;
use std::io::Write as _;

use anyhow::Context;
use chitin_registry::artifact::{ContentHash, WitWorld};
use chitin_registry::lockfile::{Locked, Lockfile};
use chitin_registry::manifest::Manifest;
use chitin_registry::signature;
use chitin_registry::store::{Entry, Index, Registry};
use chitin_registry::widening::widenings;

use super::audit::{self, OpenHost};
use super::{Cli, Exit, open_runtime, registry};
use crate::installed::Installed;
use crate::installed::shared::{self, SharedSet};
use crate::services::Services;

/// Arguments of `chitin install`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// `namespace/name`, optionally `@VERSION` (default: the newest release).
    component: String,
    /// The registry: a name from registries.toml, `local`, or a location.
    #[arg(long, value_name = "R")]
    registry: Option<String>,
    /// Approve the grants shown without asking.
    #[arg(long, short)]
    yes: bool,
    /// Allow installing a version older than the one installed.
    #[arg(long)]
    force: bool,
}

/// Arguments of `chitin update`.
#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    /// `namespace/name`, optionally `@VERSION` (default: every installed component, each to
    /// its newest release).
    component: Option<String>,
    /// Approve widened grants without asking.
    #[arg(long, short)]
    yes: bool,
    /// Allow a downgrade to the `@VERSION` given.
    #[arg(long)]
    force: bool,
}

/// Arguments of `chitin remove`.
#[derive(Debug, clap::Args)]
pub struct RemoveArgs {
    /// `namespace/name`.
    component: String,
}

/// Why an install or update was refused; each names what to do.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error(
        "{name} {version} is pinned to {pinned}, but registry {registry} now serves {found} \
         under the same version: refusing a moved tag (if the publisher really replaced it, \
         `chitin remove {name}` and install again)"
    )]
    MovedTag {
        name: String,
        version: semver::Version,
        registry: String,
        pinned: String,
        found: String,
    },
    #[error(
        "{name} {wanted} is older than the installed {installed}: refusing a downgrade (pass \
         --force to downgrade)"
    )]
    Downgrade {
        name: String,
        wanted: semver::Version,
        installed: semver::Version,
    },
    #[error("{0}")]
    Artifact(String),
    #[error(
        "not approved: run again with --yes to approve the grants shown above, or in a terminal \
         to be asked"
    )]
    NotApproved,
    #[error("declined: nothing was installed")]
    Declined,
}

/// `namespace/name[@version]`; a bare name means the first-party namespace.
fn parse_spec(text: &str) -> anyhow::Result<(String, Option<semver::Version>)> {
    let (name, version) = match text.split_once('@') {
        Some((name, v)) => (
            name,
            Some(
                v.parse::<semver::Version>()
                    .with_context(|| format!("{text}: `{v}` is not a version (x.y.z)"))?,
            ),
        ),
        None => (text, None),
    };
    let name = if name.contains('/') {
        name.to_owned()
    } else {
        format!("{}/{name}", crate::policy::FIRST_PARTY)
    };
    Ok((name, version))
}

/// The entry for `name` at `version`, or its newest release.
fn pick(
    index: &Index,
    registry: &str,
    name: &str,
    version: Option<&semver::Version>,
) -> anyhow::Result<Entry> {
    let found = match version {
        Some(v) => index.find(name, v),
        None => index.latest(name),
    };
    found.cloned().with_context(|| {
        let versions: Vec<String> = index
            .versions(name)
            .iter()
            .map(|e| e.version.to_string())
            .collect();
        let what = match version {
            Some(v) => format!("{name}@{v}"),
            None => name.to_owned(),
        };
        if versions.is_empty() {
            format!("{what} is not in registry {registry} (`chitin search` lists what is)")
        } else {
            format!(
                "{what} is not in registry {registry}; it has {}",
                versions.join(", ")
            )
        }
    })
}

pub(super) async fn install(cli: &Cli, args: &InstallArgs) -> anyhow::Result<Exit> {
    let (runtime, policy, services) = open_runtime(cli)?;
    let open = OpenHost {
        runtime: &runtime,
        policy: &policy,
        services: &services,
    };
    let (name, version) = parse_spec(&args.component)?;
    let registry = registry::open(&services, args.registry.as_deref())?;
    let index = registry.index().await?;
    let entry = pick(&index, registry.name(), &name, version.as_ref())?;
    let step = Step {
        yes: args.yes,
        force: args.force,
    };
    finish(cli, &open, &registry, entry, step).await
}

pub(super) async fn update(cli: &Cli, args: &UpdateArgs) -> anyhow::Result<Exit> {
    let (runtime, policy, services) = open_runtime(cli)?;
    let open = OpenHost {
        runtime: &runtime,
        policy: &policy,
        services: &services,
    };
    let lock = installed_lock(&services)?;
    let targets: Vec<(Locked, Option<semver::Version>)> = match &args.component {
        Some(spec) => {
            let (name, version) = parse_spec(spec)?;
            let locked = lock
                .get(&name)
                .with_context(|| format!("{name} is not installed (`chitin install {name}`)"))?;
            vec![(locked.clone(), version)]
        }
        None => lock.components.iter().map(|c| (c.clone(), None)).collect(),
    };
    if targets.is_empty() {
        outln!("nothing is installed");
        return Ok(Exit::Ok);
    }
    let mut worst = Exit::Ok;
    for (locked, version) in targets {
        let registry = registry::open(&services, Some(&locked.registry))?;
        let index = registry.index().await?;
        let entry = pick(&index, registry.name(), &locked.name, version.as_ref())?;
        if entry.version < locked.version && version.is_none() {
            outln!(
                "{}: installed {} is newer than the newest release in {} ({})",
                locked.name,
                locked.version,
                registry.name(),
                entry.version
            );
            continue;
        }
        let step = Step {
            yes: args.yes,
            force: args.force,
        };
        let code = finish(cli, &open, &registry, entry, step).await?;
        if code != Exit::Ok {
            worst = code;
        }
    }
    Ok(worst)
}

pub(super) async fn remove(cli: &Cli, args: &RemoveArgs) -> anyhow::Result<Exit> {
    let (_runtime, _policy, services) = open_runtime(cli)?;
    let (name, _) = parse_spec(&args.component)?;
    if let Some(db) = services.state().postgres() {
        let shared = SharedSet::new(db);
        return match shared.remove(&name)? {
            Some((removed, generation)) => {
                outln!(
                    "removed {name} {} from the shared installed set in PostgreSQL {} \
                     (generation {generation}); every replica drops its tools within {} s",
                    removed.version,
                    shared.target(),
                    super::shared_set::POLL.as_secs()
                );
                Ok(Exit::Ok)
            }
            None => {
                errln!(
                    "{name} is not in the shared installed set (`chitin list --installed` shows \
                     what is)"
                );
                Ok(Exit::NotFound)
            }
        };
    }
    let installed = Installed::new(&services.data_dir().components());
    match installed.remove(&name)? {
        Some(removed) => {
            outln!(
                "removed {name} {}; a running `chitin serve` drops its tools",
                removed.version
            );
            Ok(Exit::Ok)
        }
        None => {
            errln!("{name} is not installed (`chitin list --installed` shows what is)");
            Ok(Exit::NotFound)
        }
    }
}

/// What the person allowed on the command line.
#[derive(Clone, Copy)]
struct Step {
    yes: bool,
    force: bool,
}

/// Check `entry` against what is installed, fetch and verify it, show its audit, get approval
/// and commit it.
async fn finish(
    cli: &Cli,
    open: &OpenHost<'_>,
    registry: &Registry,
    entry: Entry,
    step: Step,
) -> anyhow::Result<Exit> {
    let services = open.services;
    let installed = Installed::new(&services.data_dir().components());
    let current = installed_lock(services)?.get(&entry.name).cloned();
    if let Some(current) = &current {
        if current.version == entry.version {
            if current.hash == entry.hash {
                outln!(
                    "{} {} is installed and up to date",
                    entry.name,
                    entry.version
                );
                return Ok(Exit::Ok);
            }
            return refuse(Refusal::MovedTag {
                name: entry.name.clone(),
                version: entry.version.clone(),
                registry: registry.name().to_owned(),
                pinned: current.hash.clone(),
                found: entry.hash.clone(),
            });
        }
        if entry.version < current.version && !step.force {
            return refuse(Refusal::Downgrade {
                name: entry.name.clone(),
                wanted: entry.version.clone(),
                installed: current.version.clone(),
            });
        }
    }
    errln!(
        "fetching {} ({:.1} KiB) from {}…",
        entry.label(),
        entry.size as f64 / 1024.0,
        registry.name()
    );
    let bytes = registry.fetch(&entry).await?;
    let hash = ContentHash::of(&bytes).to_string();
    if hash != entry.hash {
        return refuse(Refusal::Artifact(format!(
            "{}: the download hashes to {hash}, not the {} the index names; nothing was installed",
            entry.label(),
            entry.hash
        )));
    }
    let (manifest, manifest_text) = match checked_manifest(&bytes, &entry) {
        Ok(m) => m,
        Err(why) => return refuse(Refusal::Artifact(why)),
    };
    let signers = match signature::verify(&bytes, services.trust()).and_then(|report| {
        report
            .authorize(&manifest.component.namespace, &manifest.component.name)
            .map(|_| {
                report
                    .valid()
                    .map(|k| k.key.fingerprint())
                    .collect::<Vec<_>>()
            })
    }) {
        Ok(signers) => signers,
        Err(e) => {
            return refuse(Refusal::Artifact(format!(
                "{}: {e} (trust the publisher's key for its namespace with `chitin trust add`)",
                entry.label()
            )));
        }
    };
    let imports = WitWorld::decode(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: {e}", entry.label()))?
        .imports();
    let uncovered = chitin_registry::imports::uncovered(&imports, Some(&manifest));
    if !uncovered.is_empty() {
        return refuse(Refusal::Artifact(format!(
            "{} imports what its manifest does not declare: {}",
            entry.label(),
            chitin_registry::imports::describe_uncovered(&uncovered)
        )));
    }
    // The audit reads the download from a file of its own, removed when this returns.
    let downloads = services.data_dir().downloads();
    std::fs::create_dir_all(&downloads)
        .with_context(|| format!("cannot create {}", downloads.display()))?;
    sweep_stale(&downloads, STALE_AFTER);
    let mut download = tempfile::Builder::new()
        .prefix("download-")
        .suffix(".wasm")
        .tempfile_in(&downloads)
        .context("cannot stage the download")?;
    download
        .write_all(&bytes)
        .context("cannot stage the download")?;
    let staged_previous = match &current {
        Some(c) if services.state().postgres().is_some() => {
            Some(stage_shared_previous(services, &installed, c).await?)
        }
        _ => None,
    };
    let previous = match &staged_previous {
        Some(staged) => Some(staged.path().to_owned()),
        None => current.as_ref().map(|c| installed.file(c)),
    };
    let old_manifest = match &previous {
        Some(path) => std::fs::read(path)
            .ok()
            .and_then(|b| Manifest::from_artifact(&b).ok().flatten()),
        None => None,
    };
    // Compiled now, while a person waits for the audit anyway, so the first call does not
    // (the audit's own load then finds it in the cache). A component that does not compile is
    // refused by the audit below, which names why.
    if let Err(e) = super::precompile::precompile(open.runtime, &bytes, &entry.label()) {
        tracing::debug!(error = %e, "precompile failed; the audit reports it");
    }
    let (audit_code, audit) = audit::report(cli, open, download.path(), previous, false).await?;
    if audit_code != Exit::Ok {
        return refuse(Refusal::Artifact(format!(
            "{}: the audit above refuses it",
            entry.label()
        )));
    }
    let widened = old_manifest
        .as_ref()
        .map(|old| widenings(old, &manifest))
        .unwrap_or_default();
    let needs_approval = current.is_none() || !widened.is_empty();
    if needs_approval {
        let question = match &current {
            None => format!("Install {} with the grants above?", entry.label()),
            Some(c) => format!(
                "Update {} {} → {}, which widens its grant ({})?",
                entry.name,
                c.version,
                entry.version,
                widened.join("; ")
            ),
        };
        if let Err(refusal) = approve(&question, step.yes) {
            return refuse(*refusal);
        }
    } else {
        errln!("no capability widened: no approval needed");
    }
    let locked = Locked {
        name: entry.name.clone(),
        version: entry.version.clone(),
        registry: registry.name().to_owned(),
        file: String::new(),
        hash,
        digest: entry.digest.clone(),
        signers,
        manifest_hash: ContentHash::of(manifest_text.as_bytes()).to_string(),
        grants: audit.approved_grants(),
        approved_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    };
    let tools: Vec<String> = manifest
        .tool_specs()
        .iter()
        .map(|t| crate::spec::exposed_name(&manifest.component.namespace, &t.name))
        .collect();
    let tools = if tools.is_empty() {
        "none".to_owned()
    } else {
        tools.join(", ")
    };
    match services.state().postgres().map(SharedSet::new) {
        Some(shared) => {
            let locked = Locked {
                file: Installed::file_name(&locked.name, &ContentHash::of(&bytes)),
                ..locked
            };
            let generation = shared.commit(&locked, current.as_ref())?;
            outln!(
                "installed {} from {} (tools: {tools}) into the shared installed set in \
                 PostgreSQL {} (generation {generation}); every replica fetches, verifies and \
                 serves it within {} s",
                entry.label(),
                registry.name(),
                shared.target(),
                super::shared_set::POLL.as_secs()
            );
        }
        None => {
            installed.commit(&bytes, locked)?;
            outln!(
                "installed {} from {} (tools: {tools}); a running `chitin serve` picks it up",
                entry.label(),
                registry.name(),
            );
        }
    }
    Ok(Exit::Ok)
}

/// The installed set this invocation changes: the one replicas share when the state is in
/// PostgreSQL, else the data directory's lockfile.
fn installed_lock(services: &Services) -> anyhow::Result<Lockfile> {
    Ok(match services.state().postgres() {
        Some(db) => SharedSet::new(db).lock()?.1,
        None => Installed::new(&services.data_dir().components()).lock()?,
    })
}

/// The version the shared set has installed now, in a file of its own for the audit to compare
/// grants with: this data directory's copy when it holds that version, else fetched from its
/// registry by its pins.
async fn stage_shared_previous(
    services: &Services,
    installed: &Installed,
    current: &Locked,
) -> anyhow::Result<tempfile::NamedTempFile> {
    let local = installed
        .lock()?
        .get(&current.name)
        .filter(|l| l.hash == current.hash)
        .and_then(|l| installed.read(l).ok());
    let bytes = match local {
        Some(bytes) => bytes,
        None => {
            let registry = registry::open(services, Some(&current.registry))?;
            shared::fetch_pinned(current, &registry, services.trust()).await?
        }
    };
    let downloads = services.data_dir().downloads();
    std::fs::create_dir_all(&downloads)
        .with_context(|| format!("cannot create {}", downloads.display()))?;
    let mut staged = tempfile::Builder::new()
        .prefix("installed-")
        .suffix(".wasm")
        .tempfile_in(&downloads)
        .context("cannot stage the installed version")?;
    staged
        .write_all(&bytes)
        .context("cannot stage the installed version")?;
    Ok(staged)
}

/// The artifact's manifest, which must name what the index says it is.
fn checked_manifest(bytes: &[u8], entry: &Entry) -> Result<(Manifest, String), String> {
    let (manifest, text) = Manifest::from_artifact_with_text(bytes)
        .map_err(|e| format!("{}: {e}", entry.label()))?
        .ok_or_else(|| format!("{}: the artifact carries no manifest", entry.label()))?;
    if manifest.id() != entry.name || manifest.component.version != entry.version {
        return Err(format!(
            "{}: the artifact's manifest says it is {}@{}; the registry's index is wrong or \
             was tampered with",
            entry.label(),
            manifest.id(),
            manifest.component.version
        ));
    }
    Ok((manifest, text.to_owned()))
}

/// Ask `question` on the terminal, unless `yes` approved it already.
fn approve(question: &str, yes: bool) -> Result<(), Box<Refusal>> {
    if yes {
        errln!("{question} yes (--yes)");
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(Box::new(Refusal::NotApproved));
    }
    err!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return Err(Box::new(Refusal::NotApproved));
    }
    if matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        Ok(())
    } else {
        Err(Box::new(Refusal::Declined))
    }
}

fn refuse(refusal: Refusal) -> anyhow::Result<Exit> {
    errln!("refused: {refusal}");
    Ok(Exit::Denied)
}

/// How old a staged file must be before an install takes it for a killed install's leftover:
/// longer than any install waits, its approval question included.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// Remove the staged files (`download-*`, `installed-*`) of installs that were killed before
/// they could remove their own, once older than `stale_after`. Best effort: a file that cannot
/// be read or removed stays for the next install.
fn sweep_stale(downloads: &std::path::Path, stale_after: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(downloads) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let staged = name.to_str().is_some_and(|n| {
            (n.starts_with("download-") || n.starts_with("installed-")) && n.ends_with(".wasm")
        });
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_some_and(|age| age > stale_after);
        if staged && stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_installs_staged_files_are_swept_once_stale() {
        let dir = tempfile::tempdir().unwrap();
        let day_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 86_400);
        let make = |name: &str, old: bool| {
            let file = std::fs::File::create(dir.path().join(name)).unwrap();
            if old {
                file.set_modified(day_ago).unwrap();
            }
        };
        make("download-a1.wasm", true);
        make("installed-b2.wasm", true);
        make("download-fresh.wasm", false);
        make("notes.txt", true);
        sweep_stale(dir.path(), STALE_AFTER);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["download-fresh.wasm", "notes.txt"]);
    }
}
