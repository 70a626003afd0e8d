//! Test fixture: `try_read` reads a workspace file itself, which works only where its own grant
//! preopens the workspace; `hold_open` opens one many times, holding or closing each.

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

#[derive(Deserialize, JsonSchema)]
struct HoldArgs {
    /// Workspace-relative path
    path: String,
    /// How many times to open it
    count: u32,
    /// Keep every file open until the call ends (otherwise each is closed before the next)
    keep: bool,
}

#[derive(Serialize, JsonSchema)]
struct HoldOutput {
    /// How many opens succeeded
    opened: u32,
}

fn hold_open(args: HoldArgs) -> Result<HoldOutput, ToolError> {
    let path = std::path::Path::new("/workspace").join(&args.path);
    let mut held = Vec::new();
    for opened in 0..args.count {
        let file = std::fs::File::open(&path)
            .map_err(|e| ToolError::execution_failed(format!("open {} failed: {e}", opened + 1)))?;
        if args.keep {
            held.push(file);
        }
    }
    Ok(HoldOutput { opened: args.count })
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("try_read", "Reads a workspace file itself.", try_read),
        Tool::new(
            "hold_open",
            "Opens a workspace file `count` times, keeping or closing each.",
            hold_open,
        ),
    ]
}

chitin_sdk::export_tools!(tools);
