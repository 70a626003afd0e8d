//! `chitin approvals list|revoke`: remembered "always allow" approvals and the pins of served
//! components.

use super::{Cli, Exit};
use crate::data_dir::DataDir;
use crate::pins::PinStore;
use crate::remembered_approvals::ApprovalStore;

/// Arguments of `chitin approvals`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// List remembered approvals and pinned components.
    List,
    /// Forget the approvals (and the pin) of a tool, a component (`namespace/name`) or
    /// `namespace/name/tool`, whoever gave them; the next call, or the next load of an installed
    /// upgrade, asks again.
    Revoke {
        /// Tool name, component, or component/tool.
        selector: String,
    },
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let data = DataDir::resolve(cli.data_dir.as_deref())?;
    let db = super::open_state(cli, &data)?;
    let approvals = ApprovalStore::new(db.clone());
    let pins = PinStore::new(db);
    match &args.command {
        Command::List => {
            let list = approvals.list()?;
            outln!("approvals ({}):", list.len());
            for a in list {
                let only = a
                    .holder
                    .as_deref()
                    .map(|h| format!(", for the OAuth token holder {h} only"))
                    .unwrap_or_default();
                outln!(
                    "  {}/{} {} by {} ({}, grant {}{only})",
                    a.component,
                    a.tool,
                    a.version,
                    a.user,
                    a.hash,
                    &a.grant[..a.grant.len().min(16)]
                );
            }
            let list = pins.list()?;
            outln!("pinned components ({}):", list.len());
            for p in list {
                outln!(
                    "  {} {} ({}, signed by {})",
                    p.component,
                    p.version,
                    p.hash,
                    p.signer
                );
            }
        }
        Command::Revoke { selector } => {
            let removed = approvals.revoke(selector)?;
            for key in &removed {
                outln!("revoked approval of {key}");
            }
            let unpinned = pins.forget(selector)?;
            if unpinned {
                outln!("forgot the pin of {selector}");
            }
            if removed.is_empty() && !unpinned {
                anyhow::bail!("nothing to revoke for `{selector}` (see `chitin approvals list`)");
            }
        }
    }
    Ok(Exit::Ok)
}
