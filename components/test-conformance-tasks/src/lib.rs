//! Test fixture: the tools the `@modelcontextprotocol/conformance` suite's tasks scenarios
//! (SEP-2663) call by name. Its manifest asks for a time limit longer than a synchronous call,
//! so chitin runs these tools as MCP tasks for a client that declared the tasks extension; their
//! questions to the client (`chitin:host/client`) park the task in `input_required`.

use std::time::Duration;

use chitin_sdk::content::Content;
use chitin_sdk::prelude::*;
use host::chitin::host::client::{self, Method, Question};

/// Bindings of the host interfaces this fixture imports beyond the SDK's.
mod host {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package chitin:conformance-tasks-imports;
                 world imports {
                     import chitin:host/client@0.1.0;
                 }",
        world: "chitin:conformance-tasks-imports/imports",
        generate_all,
    });
}

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

/// An `elicitation/create` question for one field of `kind`.
fn form(key: &str, message: &str, field: &str, kind: &str) -> Question {
    let params = json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {field: {"type": kind}},
            "required": [field]
        }
    });
    Question {
        key: key.to_owned(),
        method: Method::Elicit,
        params: params.to_string(),
    }
}

/// Ask every question at once; the answers in order.
fn ask(questions: &[Question]) -> Result<Vec<Value>, ToolError> {
    client::ask(questions)
        .map_err(ToolError::PermissionDenied)?
        .iter()
        .map(|a| {
            chitin_sdk::serde_json::from_str(a)
                .map_err(|e| ToolError::ExternalService(format!("unreadable answer: {e}")))
        })
        .collect()
}

fn accepted(answer: &Value) -> bool {
    answer.get("action").and_then(Value::as_str) == Some("accept")
}

#[derive(Deserialize, JsonSchema)]
struct DeleteArgs {
    /// The file to (pretend to) delete
    filename: String,
}

/// Asks the client's user to confirm; deletes nothing, it is a fixture.
fn confirm_delete(args: DeleteArgs) -> Result<Content, ToolError> {
    let message = format!("Delete {}?", args.filename);
    let answers = ask(&[form("confirm", &message, "confirm", "boolean")])?;
    let confirmed =
        accepted(&answers[0]) && answers[0].pointer("/content/confirm") == Some(&json!(true));
    Ok(Content::new().text(if confirmed {
        format!("{} deleted (confirmed)", args.filename)
    } else {
        format!("{} kept (not confirmed)", args.filename)
    }))
}

/// Asks two questions at once, so both are pending together.
fn multi_input(_: NoArgs) -> Result<Content, ToolError> {
    let answers = ask(&[
        form("name", "What is your name?", "name", "string"),
        form("confirm", "Shall we go on?", "confirm", "boolean"),
    ])?;
    Ok(Content::new().text(format!(
        "both answered: {}",
        answers.iter().filter(|a| accepted(a)).count()
    )))
}

/// Asks the user's name, then greets them; runs only as a task, so a 2026-07-28 client answers
/// through an input-required round before the call becomes a task.
fn test_tool_with_task(_: NoArgs) -> Result<Content, ToolError> {
    let answers = ask(&[form("user_name", "What is your name?", "name", "string")])?;
    let name = answers[0]
        .pointer("/content/name")
        .and_then(Value::as_str)
        .filter(|_| accepted(&answers[0]))
        .ok_or_else(|| ToolError::PermissionDenied("no name was given".into()))?;
    Ok(Content::new().text(format!("Hello, {name}! (from a task)")))
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
            "confirm_delete",
            "Asks the client's user to confirm deleting a file (it deletes nothing).",
            confirm_delete,
        )
        .read_only(),
        Tool::new(
            "multi_input",
            "Asks the client's user two questions at once.",
            multi_input,
        )
        .read_only(),
        Tool::new(
            "test_tool_with_task",
            "Asks the client's user their name, then greets them; runs only as a task.",
            test_tool_with_task,
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
