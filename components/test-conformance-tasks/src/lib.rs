//! Test fixture: the tools the `@modelcontextprotocol/conformance` suite's tasks scenarios
//! (SEP-2663) call by name. Its manifest asks for a time limit longer than a synchronous call,
//! so chitin runs these tools as MCP tasks for a client that declared the tasks extension.

use std::time::Duration;

use chitin_sdk::content::Content;
use chitin_sdk::prelude::*;

/// The longest `slow_compute` sleeps: below the manifest's time limit.
const MAX_SECONDS: u64 = 100;

#[derive(Deserialize, JsonSchema)]
struct SlowArgs {
    /// Seconds to sleep before answering (0 answers at once)
    seconds: u64,
    /// A label echoed in the result
    #[serde(default)]
    label: Option<String>,
}

fn slow_compute(args: SlowArgs) -> Result<Content, ToolError> {
    if args.seconds > MAX_SECONDS {
        return Err(ToolError::InvalidArgs(format!(
            "seconds must be at most {MAX_SECONDS}, got {}",
            args.seconds
        )));
    }
    std::thread::sleep(Duration::from_secs(args.seconds));
    let label = args.label.unwrap_or_else(|| "slow_compute".into());
    Ok(Content::new().text(format!("{label}: computed after {} s", args.seconds)))
}

fn failing_job(_: NoArgs) -> Result<Content, ToolError> {
    std::thread::sleep(Duration::from_secs(1));
    Err(ToolError::ExecutionFailed(
        "failing_job always fails, after about a second".into(),
    ))
}

/// Traps the instance: a crash, not an error the tool reports.
fn protocol_error_job(_: NoArgs) -> Result<Content, ToolError> {
    panic!("protocol_error_job crashes on purpose")
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "slow_compute",
            "Sleeps the given number of seconds, then answers (a task for clients that declared \
             tasks).",
            slow_compute,
        )
        .read_only(),
        Tool::new(
            "failing_job",
            "Fails with a tool error after about a second; runs only as a task.",
            failing_job,
        )
        .read_only(),
        Tool::new(
            "protocol_error_job",
            "Crashes (traps) at once, so its task fails.",
            protocol_error_job,
        )
        .read_only(),
    ]
}

chitin_sdk::export_tools!(tools);
