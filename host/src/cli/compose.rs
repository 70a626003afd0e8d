//! `chitin compose ROOT LIBRARY... -o OUT [--key K]`: compose capability-free libraries into a
//! tool component offline. The result carries the tool's manifest, without the dependencies
//! composed in and with a record of each part, and a signature when a key is given.

use std::path::{Path, PathBuf};

use anyhow::Context;
use chitin_registry::artifact::{self, ContentHash, WitWorld};
use chitin_registry::manifest::{ComponentKind, ComposedPart, Manifest};
use chitin_registry::{compose, imports, signature};

use super::{Cli, Exit};
use crate::data_dir::DataDir;
use crate::signing_keys::key_store;

/// Arguments of `chitin compose`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The tool component.
    root: PathBuf,
    /// Capability-free library components to compose into it.
    #[arg(required = true)]
    libraries: Vec<PathBuf>,
    /// Where to write the composed component.
    #[arg(long, short)]
    output: PathBuf,
    /// Sign the result with this key (a key name in the data directory or a private key file).
    #[arg(long, short)]
    key: Option<String>,
}

fn read_manifest(path: &Path) -> anyhow::Result<(Vec<u8>, Manifest)> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    artifact::check_header(&bytes).with_context(|| path.display().to_string())?;
    let manifest = Manifest::from_artifact(&bytes)
        .with_context(|| path.display().to_string())?
        .with_context(|| format!("{}: carries no manifest", path.display()))?;
    Ok((bytes, manifest))
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let (root, mut manifest) = read_manifest(&args.root)?;
    if manifest.component.kind != ComponentKind::Tool {
        anyhow::bail!(
            "{}: is a library, not a tool component",
            args.root.display()
        );
    }
    let mut parts = Vec::new();
    for path in &args.libraries {
        let (bytes, lib) = read_manifest(path)?;
        let id = lib.id();
        if lib.component.kind != ComponentKind::Library {
            anyhow::bail!("{}: `{id}` is not a library component", path.display());
        }
        let c = &lib.capabilities;
        let has_capabilities = c.files.is_some()
            || c.kv.is_some()
            || c.http.is_some()
            || c.secrets.is_some()
            || c.process.is_some()
            || c.env.is_some()
            || c.invoke.is_some()
            || c.client.is_some();
        if has_capabilities {
            anyhow::bail!(
                "{}: `{id}` has capabilities of its own; it cannot be composed in, the host \
                 links it at load so it keeps its own grant",
                path.display()
            );
        }
        let Some(at) = manifest
            .dependencies
            .iter()
            .position(|d| d.matches(&id, &lib.component.version))
        else {
            anyhow::bail!(
                "{}: `{id}` {} is not one of `{}`'s dependencies",
                path.display(),
                lib.component.version,
                manifest.id()
            );
        };
        manifest.dependencies.remove(at);
        manifest.composed.push(ComposedPart {
            name: id.clone(),
            version: lib.component.version.clone(),
            hash: ContentHash::of(&bytes).to_string(),
        });
        parts.push((id, signature::strip(&bytes)?));
    }
    let root = signature::strip(&root)?;
    let list: Vec<(&str, &[u8])> = parts
        .iter()
        .map(|(id, b)| (id.as_str(), b.as_slice()))
        .collect();
    let composed = compose::plug(&manifest.id(), &root, &list)?;
    let composed = artifact::embed_manifest(&composed, &manifest.to_toml())?;
    let world = WitWorld::decode(&composed)?;
    let uncovered = imports::uncovered(&world.imports(), Some(&manifest));
    if !uncovered.is_empty() {
        anyhow::bail!(
            "the composition imports what its manifest does not cover: {}",
            imports::describe_uncovered(&uncovered)
        );
    }
    let out = match &args.key {
        Some(name) => {
            let data = DataDir::resolve(cli.data_dir.as_deref())?;
            let key = key_store(&data).load(name)?;
            signature::sign(&composed, &key)?
        }
        None => composed,
    };
    // Write beside the target and rename, so a failure never leaves half a component.
    let tmp = args.output.with_extension("wasm.composing");
    std::fs::write(&tmp, &out).with_context(|| format!("{}: cannot write", tmp.display()))?;
    std::fs::rename(&tmp, &args.output)
        .with_context(|| format!("{}: cannot write", args.output.display()))?;
    let names: Vec<String> = manifest
        .composed
        .iter()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect();
    errln!(
        "composed {} from {} + {}{}",
        args.output.display(),
        manifest.id(),
        names.join(", "),
        match &args.key {
            Some(k) => format!(", signed with {k}"),
            None => ", unsigned (sign it with `chitin sign` before loading it)".into(),
        }
    );
    Ok(Exit::Ok)
}
