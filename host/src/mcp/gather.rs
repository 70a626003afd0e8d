//! A call of a `task = "required"` tool from a 2026-07-28 client (SEP-2663 composed with
//! SEP-2322): the tool gathers its input through input-required rounds, then the call becomes a
//! task. The call's instance starts at once. If it stops at a question nobody has answered yet
//! (an approval, or the component's own through `chitin:host/client`) within
//! [`GATHER_WINDOW`], the instance is stopped and the call ends with an input-required result;
//! the client's retry runs a fresh instance with the answers replayed from the signed state, as
//! for any call. Otherwise (the instance ends, or runs the whole window without such a question)
//! the call answers with a task that the same instance goes on running as; a new question from
//! then on goes to the task's `inputRequests` (one answered in an earlier round is answered
//! from the state).

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, Task};
use rmcp::task_manager::TaskExit;
use tokio::sync::{Mutex, Notify};
use tokio::task::{JoinError, JoinHandle};

use crate::approver::{ApprovalRequest, Approver, CallContext, Decision};
use crate::client::{ClientAsker, ClientMethod, ClientQuestion};
use crate::events::CallEvents;
use crate::host::Host;
use crate::mcp::access;
use crate::mcp::input_required::InputApprover;
use crate::mcp::questions::TaskAsker;
use crate::mcp::tasks::{self, TaskApprover, TaskCall, TaskError};
use crate::runtime::CallReport;

/// How long a call gathers input before it becomes a task: a question asked this early is asked
/// through an input-required result, a later one through the task. Short, since a client of a
/// long tool waits this long for its task.
pub const GATHER_WINDOW: Duration = Duration::from_secs(2);

/// How a gathering call ended.
pub enum Gathered {
    /// It stopped at a question: the call answers with an input-required result (or -32021).
    Input(Arc<InputApprover>),
    /// It became this task.
    Task(Task),
}

/// Where the call's questions go.
enum Phase {
    /// Answered from the request state and the retry's answers; a new question stops the call.
    Gathering,
    /// The call stopped at a question; anything more is refused.
    Stopped,
    /// The call is a task: questions go to its `inputRequests`.
    Task {
        approver: Arc<TaskApprover>,
        asker: Arc<TaskAsker>,
    },
}

/// The call's approver and client asker, switched from input-required to the task.
struct Gathering {
    input: Arc<InputApprover>,
    declared: Vec<ClientMethod>,
    phase: Mutex<Phase>,
    stopped: Notify,
}

impl Gathering {
    /// Once the input approver is waiting for an answer, the call stops gathering.
    fn stop_if_waiting(&self, phase: &mut Phase) {
        if self.input.waiting() {
            *phase = Phase::Stopped;
            self.stopped.notify_one();
        }
    }
}

const STOPPED: &str = "the call stopped to ask its client; it runs again with the answers";

#[async_trait::async_trait]
impl Approver for Gathering {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let mut phase = self.phase.lock().await;
        let approver = match &*phase {
            Phase::Gathering => {
                let decision = self.input.approve(request).await;
                self.stop_if_waiting(&mut phase);
                return decision;
            }
            Phase::Stopped => return Decision::Denied(STOPPED.into()),
            Phase::Task { approver, .. } => approver.clone(),
        };
        // The person may take long to answer: the phase is not held meanwhile.
        drop(phase);
        // A question answered in an earlier round is not asked again.
        match self.input.recorded(request) {
            Some(decision) => decision,
            None => approver.approve(request).await,
        }
    }
}

#[async_trait::async_trait]
impl ClientAsker for Gathering {
    fn declared(&self) -> Vec<ClientMethod> {
        self.declared.clone()
    }

    async fn ask(&self, questions: &[ClientQuestion]) -> Result<Vec<serde_json::Value>, String> {
        let mut phase = self.phase.lock().await;
        let asker = match &*phase {
            Phase::Gathering => {
                let answers = self.input.ask(questions).await;
                self.stop_if_waiting(&mut phase);
                return answers;
            }
            Phase::Stopped => return Err(STOPPED.into()),
            Phase::Task { asker, .. } => asker.clone(),
        };
        drop(phase);
        match self.input.replayed(questions) {
            Some(answers) => Ok(answers),
            None => asker.ask(questions).await,
        }
    }
}

/// The running instance, stopped when dropped (the call was cancelled, or it stopped at a
/// question, or its task was).
struct Running(JoinHandle<CallReport>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Run `call` of a `task = "required"` tool, asking through `input` (which holds the verified
/// request state and the retry's answers) until it becomes a task.
pub async fn gather(
    host: Arc<Host>,
    call: TaskCall,
    input: InputApprover,
) -> Result<Gathered, TaskError> {
    let slot = tasks::admit(call.client.clone())?;
    let gathering = Arc::new(Gathering {
        input: Arc::new(input),
        declared: call.declared.clone(),
        phase: Mutex::new(Phase::Gathering),
        stopped: Notify::new(),
    });
    // Reports wait in the channel (bounded; it never blocks the instance) until the task shows
    // them.
    let (events, reports) = CallEvents::channel();
    let ctx = CallContext {
        approver: gathering.clone(),
        user: access::user_of(&call.consenter),
        consenter: call.consenter.clone(),
        events,
        client: gathering.clone(),
    };
    let (tool, args_json) = (call.tool.clone(), call.args_json);
    let mut running = Running(tokio::spawn(async move {
        host.call_in(&tool, &args_json, &ctx).await
    }));
    let stopped = gathering.stopped.notified();
    tokio::pin!(stopped);
    // The question is noted before the component hears back, so before its call can end.
    let finished = tokio::select! {
        biased;
        () = &mut stopped => return Ok(Gathered::Input(gathering.input.clone())),
        report = &mut running.0 => Some(report),
        () = tokio::time::sleep(GATHER_WINDOW) => None,
    };
    let mut phase = gathering.phase.lock().await;
    if matches!(*phase, Phase::Stopped) {
        return Ok(Gathered::Input(gathering.input.clone()));
    }
    let can_elicit = call.declared.contains(&ClientMethod::Elicit);
    let tool = call.tool;
    let declared = call.declared;
    let task = tasks::spawn_for(call.client, &tool, call.time_limit, |task| {
        *phase = Phase::Task {
            approver: Arc::new(TaskApprover::new(task.clone(), can_elicit)),
            asker: Arc::new(TaskAsker::new(task.clone(), declared)),
        };
        let tool = tool.clone();
        Box::pin(async move {
            let _slot = slot;
            let result = async move {
                let report = match finished {
                    Some(report) => report,
                    None => (&mut running.0).await,
                };
                ended(report)
            };
            tasks::drive(&task, &tool, result, reports).await
        })
    });
    drop(phase);
    if let Some(peer) = call.notify {
        tokio::spawn(tasks::report_status(task.task_id.clone(), peer));
    }
    Ok(Gathered::Task(task))
}

/// The instance's end as the task's outcome.
fn ended(report: Result<CallReport, JoinError>) -> Result<CallToolResult, TaskExit> {
    report.map_or_else(
        |e| {
            Err(TaskExit::Error(ErrorData::internal_error(
                format!("the tool's run ended abnormally: {e}"),
                None,
            )))
        },
        tasks::outcome,
    )
}
