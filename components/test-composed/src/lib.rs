//! Test fixture: tools built on two libraries — `chitin:test-text/text` (capability-free,
//! composed statically) and `chitin:test-files/files` (with files and HTTP grants of its own,
//! linked through the host) — plus a tool reading files itself under its own grant (`rootdir/`)
//! and `own_calls`, the monolithic equivalent of the library calls (for the benchmark).

use chitin_sdk::prelude::*;

mod libs {
    wit_bindgen::generate!({
        path: ["../test-lib-text/wit", "../test-lib-files/wit"],
        inline: "package chitin:test-composed;
                 world imports {
                     import chitin:test-text/text@0.1.0;
                     import chitin:test-files/files@0.1.0;
                 }",
        generate_all,
    });
}

use libs::chitin::{test_files::files, test_text::text};

#[derive(Deserialize, JsonSchema)]
struct TextArgs {
    /// Text to upper-case
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct PathArgs {
    /// Workspace-relative path
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct UrlArgs {
    /// The URL to GET
    url: String,
}

#[derive(Serialize, JsonSchema)]
struct TextOutput {
    /// The result
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct CallsOutput {
    /// Calls the library instance had served, per call made
    calls: Vec<u32>,
}

fn shout(args: TextArgs) -> Result<TextOutput, ToolError> {
    Ok(TextOutput {
        text: text::upper(&args.text),
    })
}

fn lib_read(args: PathArgs) -> Result<TextOutput, ToolError> {
    files::read(&args.path)
        .map(|text| TextOutput { text })
        .map_err(ToolError::permission_denied)
}

fn lib_fetch(args: UrlArgs) -> Result<TextOutput, ToolError> {
    files::fetch(&args.url)
        .map(|text| TextOutput { text })
        .map_err(ToolError::external_service)
}

#[derive(Deserialize, JsonSchema)]
struct CommandArgs {
    /// The shell command the library runs
    command: String,
}

fn lib_run(args: CommandArgs) -> Result<TextOutput, ToolError> {
    files::run(&args.command)
        .map(|text| TextOutput { text })
        .map_err(ToolError::execution_failed)
}

fn own_read(args: PathArgs) -> Result<TextOutput, ToolError> {
    std::fs::read_to_string(std::path::Path::new("/workspace").join(&args.path))
        .map(|text| TextOutput { text })
        .map_err(|e| ToolError::permission_denied(format!("cannot read `{}`: {e}", args.path)))
}

fn text_calls(_: NoArgs) -> Result<CallsOutput, ToolError> {
    Ok(CallsOutput {
        calls: vec![text::calls(), text::calls()],
    })
}

fn files_calls(_: NoArgs) -> Result<CallsOutput, ToolError> {
    Ok(CallsOutput {
        calls: vec![files::calls(), files::calls()],
    })
}

static OWN_CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The text library's `calls`, done in the tool itself: the monolithic equivalent.
fn count_here() -> u32 {
    OWN_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

fn own_calls(_: NoArgs) -> Result<CallsOutput, ToolError> {
    Ok(CallsOutput {
        calls: vec![count_here(), count_here()],
    })
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("shout", "Upper-cases text through the text library.", shout),
        Tool::new(
            "lib_read",
            "Reads a file through the files library.",
            lib_read,
        ),
        Tool::new(
            "lib_fetch",
            "Sends a GET through the files library.",
            lib_fetch,
        ),
        Tool::new(
            "lib_run",
            "Runs a shell command through the files library.",
            lib_run,
        ),
        Tool::new("own_read", "Reads a file itself.", own_read),
        Tool::new("text_calls", "Calls the text library twice.", text_calls),
        Tool::new("files_calls", "Calls the files library twice.", files_calls),
        Tool::new("own_calls", "Counts twice without a library.", own_calls),
    ]
}

chitin_sdk::export_tools!(tools);
