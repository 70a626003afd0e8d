//! `chitin publish FILE`: put a signed component into a registry, with an index entry that
//! search shows (name, version, description, publisher, tools, digests, signers).

use std::path::PathBuf;

use anyhow::Context;
use chitin_registry::artifact::{self, ContentHash, WitWorld};
use chitin_registry::manifest::{ComponentKind, Manifest};
use chitin_registry::signature;
use chitin_registry::store::{Entry, sha256_digest};

use super::{Cli, Exit, open_runtime, registry};

/// Arguments of `chitin publish`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The signed component file.
    file: PathBuf,
    /// The registry: a name from registries.toml, `local`, or a location (default: the
    /// configured default, else `local`).
    #[arg(long, value_name = "R")]
    registry: Option<String>,
    /// Overwrite a version already published with other content. Installs pinned to the old
    /// content will refuse the new one.
    #[arg(long)]
    replace: bool,
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let (_, _, services) = open_runtime(cli)?;
    let file = &args.file;
    let shown = file.display().to_string();
    let bytes = std::fs::read(file).with_context(|| format!("{shown}: cannot read"))?;
    artifact::check_header(&bytes).with_context(|| shown.clone())?;
    let (manifest, manifest_text) = Manifest::from_artifact_with_text(&bytes)
        .with_context(|| shown.clone())?
        .with_context(|| {
            format!(
                "{shown}: carries no manifest; embed one with `chitin manifest embed` before \
                 publishing"
            )
        })?;
    let report = match signature::inspect(&bytes, services.trust()) {
        Ok(report) if !report.signers.is_empty() => report,
        Ok(_) => return refuse(Refusal::Unsigned(shown)),
        Err(e) => return refuse(Refusal::Signature(shown, e)),
    };
    if let Err(e) = report.authorize(&manifest.component.namespace, &manifest.component.name) {
        return refuse(Refusal::Untrusted {
            file: shown,
            namespace: manifest.component.namespace.clone(),
            cause: e,
        });
    }
    let imports = WitWorld::decode(&bytes)
        .with_context(|| shown.clone())?
        .imports();
    let uncovered = chitin_registry::imports::uncovered(&imports, Some(&manifest));
    if !uncovered.is_empty() {
        return refuse(Refusal::Uncovered(
            shown,
            chitin_registry::imports::describe_uncovered(&uncovered),
        ));
    }
    // The tool names search shows come from the signed manifest: publishing runs nothing.
    let tools = if manifest.component.kind == ComponentKind::Library {
        Vec::new()
    } else {
        let specs = manifest.tool_specs();
        if specs.is_empty() || !manifest.tools_without_spec().is_empty() {
            return refuse(Refusal::NoSpecs(shown));
        }
        specs.into_iter().map(|s| s.name).collect()
    };
    let entry = Entry {
        name: manifest.id(),
        version: manifest.component.version.clone(),
        description: manifest.component.description.clone(),
        publisher: manifest.component.publisher.clone(),
        tools,
        digest: sha256_digest(&bytes),
        hash: ContentHash::of(&bytes).to_string(),
        size: bytes.len() as u64,
        signers: report.valid().map(|k| k.key.fingerprint()).collect(),
        manifest_hash: ContentHash::of(manifest_text.as_bytes()).to_string(),
    };
    let registry = registry::open(&services, args.registry.as_deref())?;
    let label = entry.label();
    let digest = entry.digest.clone();
    registry.publish(&bytes, entry, args.replace).await?;
    outln!("published {label} to {} ({digest})", registry.name());
    Ok(Exit::Ok)
}

/// Why a file is not published; each says what to do.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("{0} is not signed; sign it first (`chitin sign {0} --key NAME`)")]
    Unsigned(String),
    #[error("{0}: {1}")]
    Signature(String, signature::SignatureError),
    #[error(
        "{file}: {cause} (publishing needs a signature your trust store vouches for in namespace \
         `{namespace}`: `chitin trust add` your key for it)"
    )]
    Untrusted {
        file: String,
        namespace: String,
        cause: signature::SignatureError,
    },
    #[error("{0} imports what its manifest does not declare: {1}")]
    Uncovered(String, String),
    #[error(
        "{0}: its manifest records no tool specs; re-run `chitin manifest embed` (it records them) \
         and sign it again"
    )]
    NoSpecs(String),
}

fn refuse(refusal: Refusal) -> anyhow::Result<Exit> {
    errln!("refused: {refusal}");
    Ok(Exit::Denied)
}
