//! `chitin call TOOL JSON`: run one tool and print its result.

use std::sync::Arc;

use super::terminal_approver::TerminalApprover;
use super::{Cli, Exit, open_host, read_args};
use crate::approver::CallContext;
use crate::caps::log::LogRecord;

/// Arguments of `chitin call`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The tool's name (see `chitin list`).
    tool: String,
    /// Arguments as a JSON object; `-` reads them from stdin.
    #[arg(default_value = "{}")]
    args: String,
    /// Print the tool's log (log calls, stdout, stderr) on stderr.
    #[arg(long)]
    log: bool,
    /// Approve in advance whatever the call needs approval for (otherwise chitin asks on the
    /// terminal, and refuses when there is none).
    #[arg(long, short = 'y')]
    yes: bool,
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let host = open_host(cli).await?;
    let json = read_args(&args.args)?;
    let ctx = CallContext {
        approver: Arc::new(TerminalApprover {
            pre_approved: args.yes,
        }),
        ..CallContext::default()
    };
    let report = host.call_in(&args.tool, &json, &ctx).await;
    if args.log {
        print_log(&report.log);
    } else if !report.log.entries.is_empty() || report.log.dropped > 0 {
        errln!(
            "({} log entries{}; --log shows them)",
            report.log.entries.len(),
            if report.log.dropped > 0 {
                format!(", {} dropped over the cap", report.log.dropped)
            } else {
                String::new()
            }
        );
    }
    match report.result {
        Ok(output) => {
            match output.json() {
                Some(value) => outln!("{}", serde_json::to_string_pretty(&value)?),
                None => outln!("{}", output.text),
            }
            Ok(Exit::Ok)
        }
        Err(e) => {
            errln!("error: tool `{}`: {e}", args.tool);
            Ok(Exit::for_error(&e))
        }
    }
}

fn print_log(log: &LogRecord) {
    for entry in &log.entries {
        let level = serde_json::to_value(entry.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let source = serde_json::to_value(entry.source)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        errln!(
            "[{source} {level}] {}{}",
            entry.message,
            if entry.truncated { " …(cut)" } else { "" }
        );
    }
    if log.dropped > 0 {
        errln!("[chitin] {} log entries dropped over the cap", log.dropped);
    }
}
