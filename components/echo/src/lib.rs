//! The `echo` tool: returns its input unchanged, for testing tool plumbing end to end.

use chitin_sdk::prelude::*;

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// The message to echo back
    message: String,
}

#[derive(Serialize, JsonSchema)]
struct EchoOutput {
    /// The message, unchanged
    message: String,
}

fn echo(args: EchoArgs) -> Result<EchoOutput, ToolError> {
    Ok(EchoOutput {
        message: args.message,
    })
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Returns its input unchanged. Useful for testing tool plumbing.",
            echo,
        )
        .read_only()
        .idempotent()
        .output_schema::<EchoOutput>(),
    ]
}

chitin_sdk::export_tools!(tools);
