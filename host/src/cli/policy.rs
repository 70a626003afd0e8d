//! `chitin policy explain TOOL`: the effective grant of a tool's component under the policy
//! (manifest ∩ policy), with the reason for each cut, whether the tool is offered, when it
//! needs approval, and how much of it one user runs at once.

use anyhow::Context;
use chitin_registry::audit::capability_lines;
use serde_json::Value;

use super::{Cli, Exit, open_host};
use crate::policy::ToolVerdict;

/// Arguments of `chitin policy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Explain what a tool may do under the policy, and why.
    Explain {
        /// The tool's name.
        tool: String,
        /// Arguments to check the approval rules against (a JSON object).
        #[arg(long, default_value = "{}")]
        args: String,
    },
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let Command::Explain {
        tool,
        args: call_args,
    } = &args.command;
    let host = open_host(cli).await?;
    let policy = host.policy();
    let Some(component) = host
        .components()
        .iter()
        .find(|c| c.tools.iter().any(|t| &t.spec.name == tool))
    else {
        anyhow::bail!("no loaded component carries a tool named `{tool}`");
    };
    let call_args: Value =
        serde_json::from_str(call_args).context("--args is not a JSON object")?;
    let grant = &component.grant;
    outln!("tool:        {tool}");
    outln!(
        "component:   {} ({})",
        component.name(),
        component.path.display()
    );
    match policy.tool_verdict(tool) {
        ToolVerdict::Offered(entry) => outln!("offered:     yes (tools.allow entry `{entry}`)"),
        ToolVerdict::NotAllowed => outln!("offered:     NO (not in tools.allow)"),
        ToolVerdict::Denied(entry) => {
            outln!("offered:     NO (denied by tools.deny entry `{entry}`)")
        }
    }
    if policy.is_protected(tool) {
        outln!("protected:   yes (only first-party components may carry this name)");
    }
    let (mode, why) = policy.approval_mode(tool, &call_args, grant.approval(tool));
    outln!(
        "approval:    {} (decided by {why}; the manifest hints {})",
        format!("{mode:?}").to_lowercase(),
        format!("{:?}", grant.approval(tool)).to_lowercase()
    );
    outln!("capabilities granted:");
    let asked = grant.manifest.as_ref().map(|m| m.capabilities.clone());
    let (granted, _) = match &asked {
        Some(caps) => policy.intersect(caps),
        None => Default::default(),
    };
    let lines = capability_lines(&granted);
    if lines.is_empty() {
        outln!("  none beyond the WASI base");
    }
    for line in lines {
        outln!("  {}: {} ({})", line.name, line.scope, line.risk);
    }
    if !grant.cuts.is_empty() {
        outln!("cut by the policy:");
        for cut in &grant.cuts {
            outln!("  {}: {}", cut.what, cut.reason);
        }
    }
    let l = &grant.limits;
    outln!(
        "limits:      memory {} bytes, fuel {}, timeout {} ms, output {} bytes",
        l.memory_bytes,
        l.fuel,
        l.timeout_ms,
        l.output_bytes
    );
    let processes = grant.capabilities.process.is_some().then(|| {
        let p = policy.processes;
        format!(
            "; its processes {} on the host, {} of them for one OAuth user ([processes])",
            p.max_running, p.max_running_per_user
        )
    });
    outln!(
        "at once:     {} calls on the host, {} of them for one OAuth user ([calls]){}",
        policy
            .calls
            .bounds(host.runtime().engine_report().instance_slots)
            .host,
        policy.calls.max_running_per_user,
        processes.unwrap_or_default()
    );
    Ok(Exit::Ok)
}
