//! Test fixture: an `echo` tool built against chitin:tool@0.2.0, a contract version the host does
//! not accept, so the host can prove it refuses it. Built without the SDK, which targets 0.1.0.

wit_bindgen::generate!({
    path: "wit",
    world: "tool-component",
});

use chitin::tool::types::{Annotations, ToolError, ToolSpec};
use exports::chitin::tool::tool::Guest;
use serde_json::{Value, json};

struct FutureEcho;

impl Guest for FutureEcho {
    fn specs() -> Vec<ToolSpec> {
        let input = json!({
            "type": "object",
            "properties": {
                "message": { "type": "string", "description": "The message to echo back" }
            },
            "required": ["message"]
        });
        let output = json!({
            "type": "object",
            "properties": { "message": { "type": "string" } },
            "required": ["message"]
        });
        vec![ToolSpec {
            name: "echo".into(),
            description: "Returns its input unchanged. Useful for testing tool plumbing.".into(),
            input_schema: input.to_string(),
            output_schema: Some(output.to_string()),
            annotations: Annotations {
                read_only: true,
                destructive: false,
                idempotent: true,
                open_world: false,
            },
        }]
    }

    fn call(name: String, args_json: String) -> Result<String, ToolError> {
        if name != "echo" {
            return Err(ToolError::NotFound(format!(
                "unknown tool `{name}`; this component carries: echo"
            )));
        }
        let args: Value =
            serde_json::from_str(&args_json).map_err(|e| ToolError::InvalidArgs(e.to_string()))?;
        match args.get("message") {
            Some(Value::String(message)) => Ok(json!({ "message": message }).to_string()),
            _ => Err(ToolError::InvalidArgs(
                "missing string field `message`".into(),
            )),
        }
    }
}

export!(FutureEcho);
