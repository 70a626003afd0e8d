//! `chitin search QUERY`: components in the registries whose name, description, tools or
//! publisher match.

use super::{Cli, Exit, open_runtime, registry};

/// Arguments of `chitin search`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to look for (case-insensitive; empty lists everything).
    #[arg(default_value = "")]
    query: String,
    /// Search only this registry (default: `local` and every configured one).
    #[arg(long, value_name = "R")]
    registry: Option<String>,
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let (_runtime, _policy, services) = open_runtime(cli)?;
    let names = match &args.registry {
        Some(name) => vec![name.clone()],
        None => registry::all_names(&services)?,
    };
    let mut rows = Vec::new();
    let mut failed = false;
    for name in &names {
        let result = match registry::open(&services, Some(name)) {
            Ok(r) => r.index().await.map_err(anyhow::Error::from),
            Err(e) => Err(e),
        };
        match result {
            Ok(index) => rows.extend(
                index
                    .search(&args.query)
                    .into_iter()
                    .map(|e| (name.clone(), e.clone())),
            ),
            Err(e) => {
                failed = true;
                errln!("warning: {e:#}");
            }
        }
    }
    if args.json {
        let out: Vec<_> = rows
            .iter()
            .map(|(registry, e)| serde_json::json!({"registry": registry, "entry": e}))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else if rows.is_empty() {
        outln!("no component matches {:?}", args.query);
    } else {
        let width = rows.iter().map(|(_, e)| e.label().len()).max().unwrap_or(4);
        outln!(
            "{:width$}  {:10}  {:12}  TOOLS / DESCRIPTION",
            "COMPONENT",
            "REGISTRY",
            "PUBLISHER"
        );
        for (registry, e) in &rows {
            outln!(
                "{:width$}  {registry:10}  {:12}  {}\n{:width$}  {}",
                e.label(),
                e.publisher,
                exposed_tools(e).join(", "),
                "",
                e.description
            );
        }
    }
    Ok(if failed && rows.is_empty() {
        Exit::Host
    } else {
        Exit::Ok
    })
}

/// The tool names agents will see.
fn exposed_tools(entry: &chitin_registry::store::Entry) -> Vec<String> {
    let namespace = entry.name.split('/').next().unwrap_or_default();
    entry
        .tools
        .iter()
        .map(|t| crate::spec::exposed_name(namespace, t))
        .collect()
}
