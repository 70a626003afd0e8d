//! `chitin manifest check|embed`: validate a manifest, and put one inside a component with the
//! component's tool specs recorded in it, so the signature covers them.

use std::path::PathBuf;

use anyhow::Context;
use chitin_registry::artifact;
use chitin_registry::manifest::{ComponentKind, Manifest};

use super::{Cli, Exit, open_ungranted_runtime};
use crate::error::LoadError;

/// Manifest subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Validate a manifest: a `.toml` file, or the one embedded in a `.wasm` component.
    Check {
        /// The manifest or component file.
        file: PathBuf,
    },
    /// Embed a manifest into a component (replacing any it carries, and removing signatures it
    /// voids) and write the result. A tool component's specs are recorded in the manifest's
    /// `[tools]`: its `specs()` runs with no capability at all, or, for a component of plain
    /// typed exports, they are derived from its type.
    Embed {
        /// The component file.
        component: PathBuf,
        /// The manifest file.
        manifest: PathBuf,
        /// The WIT the component was built from (a directory or `.wit` file): its doc comments
        /// describe a typed-export component's tools (a built component keeps none).
        #[arg(long, value_name = "DIR")]
        wit: Option<PathBuf>,
        /// Where to write the component with its manifest.
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
}

pub(super) async fn run(cli: &Cli, cmd: &Command) -> anyhow::Result<Exit> {
    match cmd {
        Command::Check { file } => {
            let bytes =
                std::fs::read(file).with_context(|| format!("{}: cannot read", file.display()))?;
            let manifest = if bytes.starts_with(b"\0asm") {
                Manifest::from_artifact(&bytes)
                    .with_context(|| file.display().to_string())?
                    .with_context(|| format!("{}: carries no manifest", file.display()))?
            } else {
                let text = String::from_utf8(bytes)
                    .with_context(|| format!("{}: not UTF-8 text", file.display()))?;
                Manifest::parse(&text).with_context(|| file.display().to_string())?
            };
            outln!(
                "{}: ok: {} {} by {}",
                file.display(),
                manifest.id(),
                manifest.component.version,
                manifest.component.publisher
            );
            Ok(Exit::Ok)
        }
        Command::Embed {
            component,
            manifest,
            wit,
            output,
        } => {
            let wasm = std::fs::read(component)
                .with_context(|| format!("{}: cannot read", component.display()))?;
            let text = std::fs::read_to_string(manifest)
                .with_context(|| format!("{}: cannot read", manifest.display()))?;
            let mut parsed =
                Manifest::parse(&text).with_context(|| manifest.display().to_string())?;
            let text = if parsed.component.kind == ComponentKind::Library {
                text
            } else {
                let docs = match wit {
                    Some(dir) => crate::typed_exports::Docs::from_wit(dir)
                        .with_context(|| format!("{}: cannot read the WIT", dir.display()))?,
                    None => crate::typed_exports::Docs::default(),
                };
                let (runtime, policy, services, _workspace) = open_ungranted_runtime(cli)?;
                match runtime
                    .unprivileged_specs(component, &wasm, &policy, &services, &docs)
                    .await
                {
                    Ok(specs) => {
                        parsed
                            .record_specs(&specs)
                            .with_context(|| manifest.display().to_string())?;
                        parsed.to_toml()
                    }
                    // A contract this host does not run: no host of this version loads it
                    // whatever its manifest says, so it is embedded as written.
                    Err(e @ LoadError::Contract { .. }) => {
                        errln!(
                            "note: {e}; embedded without tool specs, so this host will not load it"
                        );
                        text
                    }
                    Err(e) => return Err(e.into()),
                }
            };
            // A new manifest voids every signature over the old one: drop them, and say so.
            let bare = chitin_registry::signature::strip(&wasm)
                .with_context(|| component.display().to_string())?;
            if bare.len() != wasm.len() {
                errln!(
                    "note: {}: its signatures no longer apply and were removed; sign it again \
                     with `chitin sign`",
                    output.display()
                );
            }
            let out = artifact::embed_manifest(&bare, &text)
                .with_context(|| component.display().to_string())?;
            // Write beside the target and rename, so a crash never leaves half a component.
            let dir = output
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            let mut tmp = tempfile::NamedTempFile::new_in(dir)
                .with_context(|| format!("{}: cannot write", dir.display()))?;
            std::io::Write::write_all(&mut tmp, &out)
                .with_context(|| format!("{}: cannot write", output.display()))?;
            tmp.persist(output)
                .with_context(|| format!("{}: cannot write", output.display()))?;
            Ok(Exit::Ok)
        }
    }
}
