//! `chitin list`: the loaded tools, or with `--installed` the installed components.

use super::{Cli, Exit, open_host};
use crate::data_dir::DataDir;
use crate::installed::Installed;
use crate::installed::shared::SharedSet;

/// Arguments of `chitin list`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the full specs (schemas, annotations) as JSON.
    #[arg(long)]
    json: bool,
    /// List the installed components (from the lockfile, or with --state-url the set the
    /// replicas share) instead of the tools.
    #[arg(long)]
    installed: bool,
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    if args.installed {
        return installed(cli, args);
    }
    let host = open_host(cli).await?;
    if args.json {
        let specs: Vec<_> = host.tools().collect();
        outln!("{}", serde_json::to_string_pretty(&specs)?);
        return Ok(Exit::Ok);
    }
    let width = host.tools().map(|t| t.name.len()).max().unwrap_or(4).max(4);
    outln!("{:width$}  DESCRIPTION", "TOOL");
    for tool in host.tools() {
        let first_line = tool.description.lines().next().unwrap_or("");
        outln!("{:width$}  {first_line}", tool.name);
    }
    if !host.left_out().is_empty() {
        outln!("\nleft out (could not load):");
        for left in host.left_out() {
            outln!("  {}  {}", left.component, left.reason);
        }
    }
    Ok(Exit::Ok)
}

fn installed(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let data = DataDir::resolve(cli.data_dir.as_deref())?;
    let state = super::open_state(cli, &data)?;
    // With --state-url the set that counts is the one the replicas share.
    let lock = match state.postgres() {
        Some(db) => SharedSet::new(db).lock()?.1,
        None => Installed::new(&data.components()).lock()?,
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&lock.components)?);
        return Ok(Exit::Ok);
    }
    if lock.components.is_empty() {
        outln!("nothing is installed (`chitin search`, then `chitin install NAME`)");
        return Ok(Exit::Ok);
    }
    let width = lock
        .components
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(9)
        .max(9);
    outln!(
        "{:width$}  {:10}  {:10}  HASH",
        "COMPONENT",
        "VERSION",
        "REGISTRY"
    );
    for c in &lock.components {
        outln!(
            "{:width$}  {:10}  {:10}  {}",
            c.name,
            c.version.to_string(),
            c.registry,
            c.hash.get(..23).unwrap_or(&c.hash)
        );
    }
    Ok(Exit::Ok)
}
