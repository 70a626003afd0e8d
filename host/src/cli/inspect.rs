//! `chitin inspect FILE.wasm`: what a component is, imports, exports and carries.

use std::path::PathBuf;

use chitin_registry::artifact::{self, ContentHash, EmbeddedManifestError, WitWorld};
use chitin_registry::manifest::Manifest;
use serde_json::json;

use super::{Cli, Exit, open_runtime};

/// Arguments of `chitin inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The component file.
    file: PathBuf,
    /// Print as JSON.
    #[arg(long)]
    json: bool,
    /// Also print the component's full WIT world.
    #[arg(long)]
    wit: bool,
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let bytes = std::fs::read(&args.file)
        .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", args.file.display()))?;
    let hash = ContentHash::of(&bytes);
    artifact::validate(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    let world =
        WitWorld::decode(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    let manifest = match Manifest::from_artifact(&bytes) {
        Err(EmbeddedManifestError::Artifact(e)) => {
            anyhow::bail!("{}: {e}", args.file.display())
        }
        Err(EmbeddedManifestError::Manifest(e)) => Some(Err(e.to_string())),
        Ok(manifest) => manifest.map(Ok),
    };
    let (runtime, policy, services) = open_runtime(cli)?;
    let loaded = runtime
        .load_bytes(&args.file, &bytes, &policy, &services)
        .await;
    let (tools, refusal) = match &loaded {
        Ok(c) => (
            c.tools.iter().map(|t| t.spec.clone()).collect::<Vec<_>>(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    if args.json {
        let mut out = json!({
            "file": args.file,
            "size": bytes.len(),
            "hash": hash.to_string(),
            "imports": world.imports(),
            "exports": world.exports(),
            "accepted": refusal.is_none(),
            "refusal": refusal,
            "tools": tools,
            "manifest": match &manifest {
                Some(Ok(m)) => json!(m),
                Some(Err(e)) => json!({ "error": e }),
                None => json!(null),
            },
        });
        if args.wit {
            out["wit"] = json!(world.to_wit()?);
        }
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        outln!("file:     {}", args.file.display());
        outln!("size:     {} bytes", bytes.len());
        outln!("hash:     {hash}");
        match &manifest {
            Some(Ok(m)) => outln!(
                "manifest: {} {} by {}",
                m.id(),
                m.component.version,
                m.component.publisher
            ),
            Some(Err(e)) => outln!("manifest: invalid: {e}"),
            None => outln!("manifest: none (no capabilities beyond the WASI base and logging)"),
        }
        outln!("imports:");
        for name in world.imports() {
            outln!("  {name}");
        }
        outln!("exports:");
        for name in world.exports() {
            outln!("  {name}");
        }
        match &refusal {
            None => outln!(
                "contract: accepted ({})",
                crate::contract::accepted_summary()
            ),
            Some(reason) => outln!("contract: REFUSED: {reason}"),
        }
        if !tools.is_empty() {
            outln!("tools:");
            for tool in &tools {
                let a = tool.annotations;
                let hints: Vec<&str> = [
                    (a.read_only, "read-only"),
                    (a.destructive, "destructive"),
                    (a.idempotent, "idempotent"),
                    (a.open_world, "open-world"),
                ]
                .into_iter()
                .filter_map(|(on, name)| on.then_some(name))
                .collect();
                outln!("  {} [{}]", tool.name, hints.join(", "));
                outln!("    {}", tool.description.lines().next().unwrap_or(""));
                outln!("    input schema: {}", tool.input_schema);
                if let Some(out) = &tool.output_schema {
                    outln!("    output schema: {out}");
                }
            }
        }
        if args.wit {
            outln!("\n{}", world.to_wit()?);
        }
    }
    Ok(if refusal.is_some() {
        Exit::Host
    } else {
        Exit::Ok
    })
}
