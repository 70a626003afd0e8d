//! The MCP front: serves the loaded tools to agents over stdio or Streamable HTTP. The handler
//! only dispatches to the host; no tool logic lives here.

pub mod access;
pub mod approver;
pub mod content;
pub mod direct;
pub mod gather;
pub mod http;
pub mod input_required;
pub mod lanes;
pub mod local_peer;
pub mod oauth;
pub mod peer_client;
pub mod plain_call;
pub mod questions;
pub mod served;
mod server;
pub mod sessions;
pub mod stdio;
pub mod tasks;
pub mod token;
pub mod watch;

pub use served::Served;
pub use server::{McpServer, PAGE_SIZE, page, to_mcp_tool};
