//! `chitin verify FILE`: check a component's signatures against the trust store.

use std::path::PathBuf;

use anyhow::Context;
use chitin_registry::signature::{self, SignatureStatus};
use chitin_registry::trust_store::TrustStore;

use super::{Cli, Exit, trust_file};
use crate::data_dir::DataDir;

/// Arguments of `chitin verify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The component file.
    file: PathBuf,
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let data = DataDir::resolve(cli.data_dir.as_deref())?;
    let trust = TrustStore::load(&trust_file(cli, &data))?;
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("{}: cannot read", args.file.display()))?;
    let report = match signature::inspect(&bytes, &trust) {
        Ok(report) => report,
        Err(e) => {
            errln!("{}: REFUSED: {e}", args.file.display());
            return Ok(Exit::Denied);
        }
    };
    for signer in &report.signers {
        let scope = signer
            .trusted
            .as_ref()
            .map(|t| format!(", may sign {}", t.scope_text()))
            .unwrap_or_default();
        outln!("signer {}: {}{scope}", signer.describe(), signer.status);
    }
    let manifest = chitin_registry::manifest::Manifest::from_artifact(&bytes)
        .ok()
        .flatten();
    let verdict = match &manifest {
        Some(m) => report.authorize(&m.component.namespace, &m.component.name),
        None => report.authorize_unnamed(),
    };
    match verdict.map(|_| ()) {
        Ok(()) => {
            let good = report
                .signers
                .iter()
                .filter(|s| s.status == SignatureStatus::Valid);
            outln!(
                "{}: verified ({} valid trusted signature(s))",
                args.file.display(),
                good.count()
            );
            Ok(Exit::Ok)
        }
        Err(e) => {
            errln!("{}: REFUSED: {e}", args.file.display());
            Ok(Exit::Denied)
        }
    }
}
