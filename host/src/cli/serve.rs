//! `chitin serve`: serve the tools over MCP on stdio.

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;

use super::{Cli, Exit, open_host};
use crate::mcp::McpServer;

/// Arguments of `chitin serve`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub(super) async fn run(cli: &Cli, _args: &Args) -> anyhow::Result<Exit> {
    let host = open_host(cli).await?;
    let policy = cli
        .policy
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "built-in policies/default.toml".into());
    // The banner goes to stderr: stdout carries nothing but the protocol.
    eprintln!(
        "chitin {} serving MCP on stdio: {} components, {} tools ({}); policy: {}",
        env!("CARGO_PKG_VERSION"),
        host.components().len(),
        host.tools().count(),
        host.tools()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        policy
    );
    let service = match McpServer::new(Arc::new(host))
        .serve(rmcp::transport::stdio())
        .await
    {
        Ok(service) => service,
        // A client that hangs up before initializing (a probe) ends the session normally.
        Err(ServerInitializeError::ConnectionClosed(during)) => {
            tracing::info!(%during, "client closed the connection before initializing");
            return Ok(Exit::Ok);
        }
        Err(e) => return Err(e.into()),
    };
    service.waiting().await?;
    Ok(Exit::Ok)
}
