//! Test fixture: `try_read` reads a workspace file itself, which works only where its own grant
//! preopens the workspace.

use chitin_sdk::prelude::*;

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

fn try_read(args: ReadArgs) -> Result<ReadOutput, ToolError> {
    std::fs::read_to_string(std::path::Path::new("/workspace").join(&args.path))
        .map(|content| ReadOutput { content })
        .map_err(|e| ToolError::permission_denied(format!("cannot read `{}`: {e}", args.path)))
}

fn tools() -> Vec<Tool> {
    vec![Tool::new(
        "try_read",
        "Reads a workspace file itself.",
        try_read,
    )]
}

chitin_sdk::export_tools!(tools);
