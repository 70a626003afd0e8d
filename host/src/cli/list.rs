//! `chitin list`: the loaded tools.

use super::{Cli, Exit, open_host};

/// Arguments of `chitin list`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the full specs (schemas, annotations) as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let host = open_host(cli).await?;
    if args.json {
        let specs: Vec<_> = host.tools().collect();
        println!("{}", serde_json::to_string_pretty(&specs)?);
        return Ok(Exit::Ok);
    }
    let width = host.tools().map(|t| t.name.len()).max().unwrap_or(4).max(4);
    println!("{:width$}  DESCRIPTION", "TOOL");
    for tool in host.tools() {
        let first_line = tool.description.lines().next().unwrap_or("");
        println!("{:width$}  {first_line}", tool.name);
    }
    Ok(Exit::Ok)
}
