//! The MCP front: serves the loaded tools to agents. `call_tool` only dispatches to the host; no
//! tool logic lives here.

use std::sync::Arc;

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use crate::host::Host;
use crate::spec::ToolSpec;

/// Tools per `tools/list` page.
pub const PAGE_SIZE: usize = 100;

/// An MCP server over a loaded host.
#[derive(Clone)]
pub struct McpServer {
    host: Arc<Host>,
}

impl McpServer {
    /// Serve `host`'s tools.
    pub fn new(host: Arc<Host>) -> Self {
        Self { host }
    }
}

/// A tool spec as an MCP tool.
pub fn to_mcp_tool(spec: &ToolSpec) -> Tool {
    let a = spec.annotations;
    let mut tool = Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        Arc::new(as_object(&spec.input_schema)),
    )
    .with_annotations(
        ToolAnnotations::new()
            .read_only(a.read_only)
            .destructive(a.destructive)
            .idempotent(a.idempotent)
            .open_world(a.open_world),
    );
    if let Some(schema) = &spec.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(as_object(schema)));
    }
    tool
}

fn as_object(schema: &Value) -> JsonObject {
    schema.as_object().cloned().unwrap_or_default()
}

/// One page of `items` from the opaque `cursor` (an offset), and the cursor of the next page.
pub fn page<T: Clone>(
    items: &[T],
    cursor: Option<&str>,
    size: usize,
) -> Result<(Vec<T>, Option<String>), String> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= items.len())
            .ok_or_else(|| format!("invalid cursor `{c}`"))?,
    };
    let end = (start + size).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("chitin", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "chitin: every tool runs in a fresh WebAssembly sandbox. Tool errors come back as \
                 results with isError set and the error kind first (invalid-args, not-found, \
                 permission-denied, invalid-path, execution-failed, timeout, rate-limited, \
                 external-service).",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Tool> = self.host.tools().map(to_mcp_tool).collect();
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) =
            page(&tools, cursor, PAGE_SIZE).map_err(|e| ErrorData::invalid_params(e, None))?;
        let mut result = ListToolsResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = match &request.arguments {
            Some(object) => Value::Object(object.clone()).to_string(),
            None => "{}".to_owned(),
        };
        let report = self.host.call(&request.name, &args).await;
        let result = match report.result {
            Ok(output) => {
                let structured = output.json().filter(Value::is_object);
                let mut result = CallToolResult::success(vec![ContentBlock::text(output.text)]);
                result.structured_content = structured;
                result
            }
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!("{}: {e}", e.kind()))]),
        };
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_each_other_until_the_end() {
        let items: Vec<u32> = (0..5).collect();
        let (first, next) = page(&items, None, 2).expect("page");
        assert_eq!((first, next.as_deref()), (vec![0, 1], Some("2")));
        let (second, next) = page(&items, next.as_deref(), 2).expect("page");
        assert_eq!((second, next.as_deref()), (vec![2, 3], Some("4")));
        let (last, next) = page(&items, next.as_deref(), 2).expect("page");
        assert_eq!((last, next), (vec![4], None));
    }

    #[test]
    fn a_bad_cursor_is_refused() {
        let items = [1, 2];
        assert!(page(&items, Some("x"), 2).is_err());
        assert!(page(&items, Some("9"), 2).is_err());
    }
}
