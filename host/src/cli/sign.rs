//! `chitin sign FILE --key K`: add a signature to a component (in place, or to `--output`).

use std::path::PathBuf;

use anyhow::Context;
use chitin_registry::artifact::{self, WitWorld};
use chitin_registry::manifest::Manifest;
use chitin_registry::{imports, signature};

use super::{Cli, Exit};
use crate::data_dir::DataDir;
use crate::signing_keys::key_store;

/// Arguments of `chitin sign`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The component file.
    file: PathBuf,
    /// The signing key: a key name in the data directory (`chitin key list`) or a private key file.
    #[arg(long, short)]
    key: String,
    /// Write the signed component here instead of replacing FILE.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let data = DataDir::resolve(cli.data_dir.as_deref())?;
    let key = key_store(&data).load(&args.key)?;
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("{}: cannot read", args.file.display()))?;
    let refuse = || format!("{}: refusing to sign", args.file.display());
    artifact::check_header(&bytes).with_context(refuse)?;
    // Imports versus manifest, at sign as at load: never vouch for an undeclared capability.
    let manifest = Manifest::from_artifact(&bytes).with_context(refuse)?;
    let world = WitWorld::decode(&bytes).with_context(refuse)?;
    let uncovered = imports::uncovered(&world.imports(), manifest.as_ref());
    if !uncovered.is_empty() {
        anyhow::bail!(
            "{}: imports not covered by its manifest: {}",
            refuse(),
            imports::describe_uncovered(&uncovered)
        );
    }
    let signed = signature::sign(&bytes, &key)
        .with_context(|| format!("{}: cannot sign", args.file.display()))?;
    let out = args.output.as_ref().unwrap_or(&args.file);
    // Write beside the target and rename, so a failure never leaves half a component.
    let tmp = out.with_extension("wasm.signing");
    std::fs::write(&tmp, &signed).with_context(|| format!("{}: cannot write", tmp.display()))?;
    std::fs::rename(&tmp, out).with_context(|| format!("{}: cannot write", out.display()))?;
    errln!(
        "signed {} with {} ({})",
        out.display(),
        args.key,
        key.public().fingerprint()
    );
    Ok(Exit::Ok)
}
