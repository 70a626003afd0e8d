//! `chitin schema --format openai|mcp`: tool definitions for an agent.

use serde_json::{Value, json};

use super::{Cli, Exit, open_host};
use crate::spec::ToolSpec;

/// Output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// OpenAI function-calling tools: `[{"type": "function", "function": {...}}]`.
    Openai,
    /// MCP `tools/list` result: `{"tools": [...]}` with annotations and output schemas.
    Mcp,
}

/// Arguments of `chitin schema`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The format.
    #[arg(long, value_enum, default_value = "mcp")]
    format: Format,
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let host = open_host(cli).await?;
    let tools: Vec<&ToolSpec> = host.tools().collect();
    let out = match args.format {
        Format::Openai => Value::Array(tools.iter().map(|t| openai(t)).collect()),
        Format::Mcp => json!({ "tools": tools.iter().map(|t| mcp(t)).collect::<Vec<_>>() }),
    };
    outln!("{}", serde_json::to_string_pretty(&out)?);
    Ok(Exit::Ok)
}

/// A tool in OpenAI's function-calling format.
pub fn openai(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        }
    })
}

/// A tool as an MCP `Tool` object.
pub fn mcp(tool: &ToolSpec) -> Value {
    let a = tool.annotations;
    let mut value = json!({
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "annotations": {
            "readOnlyHint": a.read_only,
            "destructiveHint": a.destructive,
            "idempotentHint": a.idempotent,
            "openWorldHint": a.open_world,
        }
    });
    if let (Some(schema), Some(obj)) = (&tool.output_schema, value.as_object_mut()) {
        obj.insert("outputSchema".into(), schema.clone());
    }
    value
}
