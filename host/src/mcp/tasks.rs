//! Tasks (`io.modelcontextprotocol/tasks`): a call to a tool whose manifest asks for a time limit
//! longer than a synchronous call may take ([`SYNC_CALL_LIMIT`]), and whose policy allows it (the
//! shell and spawn ask for 305 s), runs as a task when the client declared the extension.
//! The call answers at once with the task; the client polls `tasks/get` (status, the latest
//! progress report as the status message, then the result), answers an approval question with
//! `tasks/update`, and may `tasks/cancel`.
//!
//! A cancelled task's call is dropped, like a cancelled request: its instance stops within an
//! epoch tick and its processes are killed with their process group. A task past its TTL is
//! aborted the same way. Task state is bounded: at most [`MAX_RUNNING`] tasks run at once; a
//! task's TTL is its time limit plus [`RESULT_TTL`], and its result is dropped one TTL after it
//! finished.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ElicitRequest, InputRequest, Task};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};

use crate::approval::{ApprovalRequest, Approver, CallContext, Decision};
use crate::error::ToolError;
use crate::events::{CallEvent, CallEvents};
use crate::host::Host;
use crate::mcp::approver::{decision, question};
use crate::mcp::content;

/// The longest a call may run synchronously; tools allowed longer may run as tasks.
pub const SYNC_CALL_LIMIT: Duration = Duration::from_secs(30);
/// Tasks running at once in this server; more are refused until one ends.
pub const MAX_RUNNING: usize = 8;
/// Added to a task's time limit to make its TTL.
pub const RESULT_TTL: Duration = Duration::from_secs(600);
/// The poll interval suggested to clients.
const POLL_INTERVAL_MS: u64 = 500;

/// Why a task was not started.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// [`MAX_RUNNING`] tasks are running.
    #[error(
        "{0} tasks are already running in this server; wait for one to finish or cancel one \
         with tasks/cancel"
    )]
    TooMany(usize),
}

/// The tasks of this process: they outlive the request (and, over HTTP, the session) that
/// started them.
pub fn tasks() -> &'static TaskManager {
    static TASKS: OnceLock<TaskManager> = OnceLock::new();
    TASKS.get_or_init(TaskManager::new)
}

/// Whether a call with this time limit runs as a task for a client that declared tasks.
pub fn runs_as_task(time_limit: Duration) -> bool {
    time_limit > SYNC_CALL_LIMIT
}

/// Start calling `tool` with `args_json` as a task; `can_elicit`: the client declared
/// elicitation, so approval questions are asked through the task's `inputRequests`.
pub fn start(
    host: Arc<Host>,
    tool: String,
    args_json: String,
    time_limit: Duration,
    can_elicit: bool,
) -> Result<Task, TaskError> {
    let manager = tasks();
    let running = manager.running_task_count();
    if running >= MAX_RUNNING {
        return Err(TaskError::TooMany(running));
    }
    let ttl = time_limit + RESULT_TTL;
    let options = TaskOptions::new()
        .with_ttl_ms(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
        .with_poll_interval_ms(POLL_INTERVAL_MS)
        .with_status_message(format!("`{tool}` is running"));
    Ok(manager.spawn(options, move |task| {
        Box::pin(run(host, tool, args_json, can_elicit, task))
    }))
}

async fn run(
    host: Arc<Host>,
    tool: String,
    args_json: String,
    can_elicit: bool,
    task: TaskContext,
) -> Result<CallToolResult, TaskExit> {
    let (events, mut reports) = CallEvents::channel();
    let ctx = CallContext {
        approver: Arc::new(TaskApprover {
            task: task.clone(),
            can_elicit,
            asked: AtomicU32::new(0),
        }),
        user: "mcp".into(),
        events,
    };
    let call = host.call_in(&tool, &args_json, &ctx);
    tokio::pin!(call);
    // Dropping the call future (on cancel, or on abort at the TTL) stops the instance at the
    // next epoch tick and kills its processes' group.
    let report = loop {
        tokio::select! {
            biased;
            () = task.cancelled() => {
                tracing::info!(tool = %tool, task = task.task_id(), "task cancelled by the client");
                return Err(TaskExit::Cancelled);
            }
            Some(event) = reports.recv() => {
                if let CallEvent::Progress { done, total, message } = event {
                    task.set_status_message(progress_message(&tool, done, total, message));
                }
            }
            report = &mut call => break report,
        }
    };
    match report.result {
        Ok(output) => Ok(content::success(output)),
        // The host failed, not the tool: the task fails with a JSON-RPC error, as a direct
        // call would, rather than completing with a tool result.
        Err(ToolError::HostFault(fault)) => Err(TaskExit::Error(ErrorData::internal_error(
            format!("host fault: {fault}"),
            None,
        ))),
        Err(e) => Ok(content::failure(&e)),
    }
}

fn progress_message(tool: &str, done: f64, total: Option<f64>, message: Option<String>) -> String {
    let amount = match total {
        Some(total) => format!("{done}/{total}"),
        None => done.to_string(),
    };
    match message {
        Some(message) => format!("`{tool}` progress {amount}: {message}"),
        None => format!("`{tool}` progress {amount}"),
    }
}

/// Asks approval questions through the task: the task reports `input_required` with the
/// question until the client answers it with `tasks/update`.
struct TaskApprover {
    task: TaskContext,
    can_elicit: bool,
    asked: AtomicU32,
}

#[async_trait::async_trait]
impl Approver for TaskApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        if !self.can_elicit {
            return Decision::Denied(format!(
                "`{}` ({}) needs a person's approval because {}, but this client did not \
                 declare the elicitation capability, so it cannot ask",
                request.tool, request.component, request.reason
            ));
        }
        let params = match question(request) {
            Ok(params) => params,
            Err(e) => return Decision::Denied(e),
        };
        // Keys are unique over the task's life.
        let key = format!("approval-{}", self.asked.fetch_add(1, Ordering::Relaxed));
        let question = InputRequest::Elicitation(ElicitRequest::new(params));
        let answer = match self.task.request_input(key, question).await {
            Ok(answer) => answer,
            Err(_) => {
                return Decision::Denied(format!(
                    "the approval request for `{}` was withdrawn (the task was cancelled)",
                    request.tool
                ));
            }
        };
        decision(&request.tool, &answer)
    }
}
