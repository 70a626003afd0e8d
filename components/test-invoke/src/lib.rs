//! Test fixture: calls other tools by the aliases its manifest declares — `relay` passes a call
//! on, `fan` makes the same call many times, `loop` calls itself until the host's depth cap
//! stops it, and `read_direct` reads a workspace file under its own narrow grant (`mine/`).

use chitin_sdk::prelude::*;
use chitin_sdk::serde_json::{self, Value};

#[derive(Deserialize, JsonSchema)]
struct RelayArgs {
    /// Alias to call
    alias: String,
    /// Arguments to pass on
    args: Value,
}

#[derive(Serialize, JsonSchema)]
struct RelayOutput {
    /// The called tool's result
    result: Value,
}

fn relay(args: RelayArgs) -> Result<RelayOutput, ToolError> {
    let result = chitin_sdk::invoke::call(&args.alias, &args.args)?;
    Ok(RelayOutput { result })
}

#[derive(Deserialize, JsonSchema)]
struct FanArgs {
    /// Alias to call
    alias: String,
    /// Arguments to pass on
    args: Value,
    /// How many times
    times: u32,
}

#[derive(Serialize, JsonSchema)]
struct FanOutput {
    /// Calls that returned a result
    done: u32,
}

fn fan(args: FanArgs) -> Result<FanOutput, ToolError> {
    for done in 0..args.times {
        chitin_sdk::invoke::call(&args.alias, &args.args)
            .map_err(|e| ToolError::execution_failed(format!("call {}: {e}", done + 1)))?;
    }
    Ok(FanOutput { done: args.times })
}

fn call_again(_: NoArgs) -> Result<RelayOutput, ToolError> {
    let result = chitin_sdk::invoke::call("again", &serde_json::json!({}))?;
    Ok(RelayOutput { result })
}

#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    /// Workspace-relative path
    path: String,
}

#[derive(Serialize, JsonSchema)]
struct ReadOutput {
    /// The file's text
    content: String,
}

fn read_direct(args: ReadArgs) -> Result<ReadOutput, ToolError> {
    std::fs::read_to_string(std::path::Path::new("/workspace").join(&args.path))
        .map(|content| ReadOutput { content })
        .map_err(|e| ToolError::permission_denied(format!("cannot read `{}`: {e}", args.path)))
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("relay", "Calls the tool declared as `alias`.", relay),
        Tool::new(
            "fan",
            "Calls the tool declared as `alias` `times` times.",
            fan,
        ),
        Tool::new("loop", "Calls itself through the host.", call_again),
        Tool::new("read_direct", "Reads a workspace file itself.", read_direct),
    ]
}

chitin_sdk::export_tools!(tools);
