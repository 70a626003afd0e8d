//! Tasks (`io.modelcontextprotocol/tasks`): a call to a tool whose manifest asks for a time limit
//! longer than a synchronous call may take ([`SYNC_CALL_LIMIT`]), and whose policy allows it (the
//! shell and spawn ask for 305 s), or that says `task = "required"`, runs as a task when the
//! client declared the extension. The call answers at once with the task; the client polls
//! `tasks/get` (status, the latest progress report as the status message, then the result),
//! answers approval questions and the component's own questions (`chitin:host/client`) with
//! `tasks/update`, and may `tasks/cancel`. An error the tool reports completes the task with
//! `isError`; an instance that crashes fails it with a JSON-RPC error. A `task = "required"`
//! tool called by a 2026-07-28 client first gathers its input through input-required rounds
//! (see `gather`).
//!
//! A cancelled task's call is dropped, like a cancelled request: its instance stops within an
//! epoch tick and its processes are killed with their process group. A task past its TTL is
//! aborted the same way. Task state is bounded: at most [`MAX_RUNNING`] tasks run at once, and
//! at most [`MAX_PER_CLIENT`] of one client (an OAuth client, else a peer address; over stdio
//! the one client); a task's TTL is its time limit plus [`RESULT_TTL`], and its result is dropped
//! one TTL after it finished.
//!
//! A task belongs to the client that started it (the MCP tasks spec binds a task to its
//! requestor's authorization context): `tasks/get`, `tasks/update` and `tasks/cancel` from any
//! other client are answered as for a task that does not exist, so one agent that learns another's
//! task id can neither read its result nor answer its approval question.
//!
//! A client with a lasting channel (stdio, or an HTTP session begun with `initialize`) is also
//! sent `notifications/tasks` (SEP-2663) on every status change: `input_required`, back to
//! `working`, and the terminal status with its result. Stateless 2026-07-28 HTTP clients poll
//! `tasks/get`: the SDK cannot yet route task notifications through `subscriptions/listen`.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResult, ElicitRequest, InputRequest, ServerNotification, Task, TaskStatus,
    TaskStatusNotification, TaskStatusNotificationParams,
};
use rmcp::service::Peer;
use rmcp::task_manager::{TaskContext, TaskExit, TaskFuture, TaskManager, TaskOptions};
use rmcp::{ErrorData, RoleServer};
use tokio::sync::mpsc;

use crate::approver::{ApprovalRequest, Approver, CallContext, Consenter, Decision};
use crate::client::ClientMethod;
use crate::error::ToolError;
use crate::events::{CallEvent, CallEvents};
use crate::host::Host;
use crate::mcp::access::{self, ClientId};
use crate::mcp::approver::{decision, question};
use crate::mcp::content;
use crate::mcp::questions::TaskAsker;
use crate::runtime::CallReport;

/// The longest a call may run synchronously; tools allowed longer may run as tasks.
pub const SYNC_CALL_LIMIT: Duration = Duration::from_secs(30);
/// Tasks running at once in this server; more are refused until one ends.
pub const MAX_RUNNING: usize = 8;
/// Tasks one client may have running at once, so one client cannot take every slot.
pub const MAX_PER_CLIENT: usize = 4;
/// Added to a task's time limit to make its TTL.
pub const RESULT_TTL: Duration = Duration::from_secs(600);
/// The poll interval suggested to clients.
const POLL_INTERVAL_MS: u64 = 500;
/// How often a task's status is looked at for `notifications/tasks`.
const STATUS_WATCH: Duration = Duration::from_millis(50);

/// Why a task was not started.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// [`MAX_RUNNING`] tasks are running.
    #[error(
        "{0} tasks are already running in this server; wait for one to finish or cancel one \
         with tasks/cancel"
    )]
    TooMany(usize),
    /// The client has [`MAX_PER_CLIENT`] tasks running.
    #[error(
        "this client ({client}) already has {running} tasks running, the most one client (for an \
         OAuth token: one user, through whichever applications) may; wait for one to finish or cancel one with tasks/cancel"
    )]
    TooManyForClient {
        /// The client.
        client: String,
        /// Its running tasks.
        running: usize,
    },
}

/// Running tasks per [`ClientId::person`].
fn per_client() -> &'static Mutex<HashMap<String, usize>> {
    static RUNNING: OnceLock<Mutex<HashMap<String, usize>>> = OnceLock::new();
    RUNNING.get_or_init(Mutex::default)
}

/// One running task of a client, counted until the task's call ends (or is dropped, when the
/// task is aborted at its TTL).
pub(crate) struct ClientSlot(String);

impl ClientSlot {
    fn take(client: ClientId) -> Result<Self, TaskError> {
        let mut running = per_client().lock().unwrap_or_else(PoisonError::into_inner);
        let count = running.entry(client.person.clone()).or_default();
        if *count >= MAX_PER_CLIENT {
            return Err(TaskError::TooManyForClient {
                client: client.person,
                running: *count,
            });
        }
        *count += 1;
        Ok(Self(client.person))
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut running = per_client().lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = running.get_mut(&self.0) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                running.remove(&self.0);
            }
        }
    }
}

/// The tasks of this process: they outlive the request (and, over HTTP, the session) that
/// started them.
pub fn tasks() -> &'static TaskManager {
    static TASKS: OnceLock<TaskManager> = OnceLock::new();
    TASKS.get_or_init(TaskManager::new)
}

/// The client each task belongs to, until its entry may no longer be in [`tasks`].
fn owners() -> &'static Mutex<HashMap<String, (ClientId, Instant)>> {
    static OWNERS: OnceLock<Mutex<HashMap<String, (ClientId, Instant)>>> = OnceLock::new();
    OWNERS.get_or_init(Mutex::default)
}

/// Spawn the task of `owner` running `tool` within `time_limit`: only `owner` may see, answer
/// or cancel it.
pub(crate) fn spawn_for<F>(
    owner: ClientId,
    tool: &str,
    time_limit: Duration,
    make_future: F,
) -> Task
where
    F: FnOnce(TaskContext) -> TaskFuture,
{
    let options = options(tool, time_limit);
    let task = tasks().spawn(options, make_future);
    // The manager keeps a task while it runs (at most its time limit, within its TTL) and one
    // TTL after: twice the TTL outlasts it, and the map is swept of older entries here.
    let ttl = time_limit + RESULT_TTL;
    let now = Instant::now();
    let mut owners = owners().lock().unwrap_or_else(PoisonError::into_inner);
    owners.retain(|_, (_, until)| *until > now);
    owners.insert(task.task_id.clone(), (owner, now + ttl * 2));
    task
}

/// Refuse `task_id` to every client but the one that started it, as a task that does not
/// exist: whether another client's task exists is none of this client's business.
pub(crate) fn owned_by(task_id: &str, client: &ClientId) -> Result<(), ErrorData> {
    let owners = owners().lock().unwrap_or_else(PoisonError::into_inner);
    match owners.get(task_id) {
        Some((owner, _)) if owner == client => Ok(()),
        found => {
            if let Some((owner, _)) = found {
                tracing::warn!(
                    task = %task_id, client = %client.owner, owner = %owner.owner,
                    "refused a request for another client's task"
                );
            }
            Err(ErrorData::invalid_params(
                format!("unknown task: {task_id} (this client started no task with that id)"),
                None,
            ))
        }
    }
}

/// Whether a call with this time limit runs as a task for a client that declared tasks.
pub fn runs_as_task(time_limit: Duration) -> bool {
    time_limit > SYNC_CALL_LIMIT
}

/// A task to start: which call, for whom.
pub struct TaskCall {
    /// The tool.
    pub tool: String,
    /// Its arguments, as JSON.
    pub args_json: String,
    /// The tool's time limit.
    pub time_limit: Duration,
    /// The methods the client declared: with elicitation, approval questions are asked through
    /// the task's `inputRequests`, as are the component's questions it declared the method of.
    pub declared: Vec<ClientMethod>,
    /// Who asked.
    pub client: ClientId,
    /// Whose "always allow" covers the call.
    pub consenter: Consenter,
    /// Where to send `notifications/tasks`, for a client with a lasting channel.
    pub notify: Option<Peer<RoleServer>>,
}

/// Start `call` as a task.
pub fn start(host: Arc<Host>, call: TaskCall) -> Result<Task, TaskError> {
    let slot = admit(call.client.clone())?;
    let (tool, args_json, declared) = (call.tool, call.args_json, call.declared);
    let consenter = call.consenter;
    let task = spawn_for(call.client, &tool, call.time_limit, |task| {
        let tool = tool.clone();
        Box::pin(async move {
            let _slot = slot;
            run(host, tool, args_json, declared, consenter, task).await
        })
    });
    if let Some(peer) = call.notify {
        tokio::spawn(report_status(task.task_id.clone(), peer));
    }
    Ok(task)
}

/// Admit one more task of `client` within [`MAX_RUNNING`] and [`MAX_PER_CLIENT`]; the slot is
/// held until dropped.
pub(crate) fn admit(client: ClientId) -> Result<ClientSlot, TaskError> {
    let running = tasks().running_task_count();
    if running >= MAX_RUNNING {
        return Err(TaskError::TooMany(running));
    }
    ClientSlot::take(client)
}

/// The options of a task running `tool` within `time_limit`.
fn options(tool: &str, time_limit: Duration) -> TaskOptions {
    let ttl = time_limit + RESULT_TTL;
    TaskOptions::new()
        .with_ttl_ms(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
        .with_poll_interval_ms(POLL_INTERVAL_MS)
        .with_status_message(format!("`{tool}` is running"))
}

/// Send `notifications/tasks` to `peer` on every status change of the task, until it ends (or
/// is gone, or the client is).
pub(crate) async fn report_status(task_id: String, peer: Peer<RoleServer>) {
    // The client learnt `working` from the call's answer.
    let mut last = TaskStatus::Working;
    loop {
        tokio::time::sleep(STATUS_WATCH).await;
        let Ok(task) = tasks().get_task(&task_id) else {
            return;
        };
        let status = task.task.status;
        if status == last {
            continue;
        }
        let notification = TaskStatusNotification::new(TaskStatusNotificationParams::new(task));
        if let Err(e) = peer
            .send_notification(ServerNotification::TaskStatusNotification(notification))
            .await
        {
            tracing::debug!(task = %task_id, error = %e, "cannot send a task status notification");
            return;
        }
        if status.is_terminal() {
            return;
        }
        last = status;
    }
}

async fn run(
    host: Arc<Host>,
    tool: String,
    args_json: String,
    declared: Vec<ClientMethod>,
    consenter: Consenter,
    task: TaskContext,
) -> Result<CallToolResult, TaskExit> {
    let (events, reports) = CallEvents::channel();
    let ctx = CallContext {
        approver: Arc::new(TaskApprover::new(
            task.clone(),
            declared.contains(&ClientMethod::Elicit),
        )),
        user: access::user_of(&consenter),
        consenter,
        events,
        client: Arc::new(TaskAsker::new(task.clone(), declared)),
    };
    let call = async { outcome(host.call_in(&tool, &args_json, &ctx).await) };
    drive(&task, &tool, call, reports).await
}

/// Run a task's call to its end, its progress reports shown as the task's status message.
pub(crate) async fn drive(
    task: &TaskContext,
    tool: &str,
    call: impl Future<Output = Result<CallToolResult, TaskExit>>,
    mut reports: mpsc::Receiver<CallEvent>,
) -> Result<CallToolResult, TaskExit> {
    tokio::pin!(call);
    // Dropping the call future (on cancel, or on abort at the TTL) stops the instance at the
    // next epoch tick and kills its processes' group.
    loop {
        tokio::select! {
            biased;
            () = task.cancelled() => {
                tracing::info!(tool = %tool, task = task.task_id(), "task cancelled by the client");
                return Err(TaskExit::Cancelled);
            }
            Some(event) = reports.recv() => {
                if let CallEvent::Progress { done, total, message } = event {
                    task.set_status_message(progress_message(tool, done, total, message));
                }
            }
            result = &mut call => return result,
        }
    }
}

/// A finished call as a task's outcome.
pub(crate) fn outcome(report: CallReport) -> Result<CallToolResult, TaskExit> {
    match report.result {
        Ok(output) => Ok(content::success(output)),
        // The host failed, not the tool: the task fails with a JSON-RPC error, as a direct
        // call would, rather than completing with a tool result.
        Err(ToolError::HostFault(fault)) => Err(TaskExit::Error(ErrorData::internal_error(
            format!("host fault: {fault}"),
            None,
        ))),
        // The instance crashed (trapped): an internal failure, not an error the tool reported.
        Err(e) if report.crashed => Err(TaskExit::Error(ErrorData::internal_error(
            format!("the tool crashed: {e}"),
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
pub(crate) struct TaskApprover {
    task: TaskContext,
    can_elicit: bool,
    asked: AtomicU32,
}

impl TaskApprover {
    /// Ask through `task`; `can_elicit`: the client declared elicitation.
    pub(crate) fn new(task: TaskContext, can_elicit: bool) -> Self {
        Self {
            task,
            can_elicit,
            asked: AtomicU32::new(0),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn client(app: &str, user: &str) -> ClientId {
        ClientId {
            owner: format!("oauth:{app:?} for {user:?}"),
            person: format!("oauth user {user:?}"),
        }
    }

    #[test]
    fn one_user_runs_only_so_many_tasks_through_whichever_applications() {
        // Users of this test alone: the counts are the process's.
        let user = "tasks test user";
        let mut held: Vec<ClientSlot> = (0..MAX_PER_CLIENT)
            .map(|n| ClientSlot::take(client(&format!("app {}", n % 2), user)).expect("within"))
            .collect();
        match ClientSlot::take(client("app of their own", user)) {
            Err(TaskError::TooManyForClient { client, running }) => {
                assert_eq!(running, MAX_PER_CLIENT);
                assert!(client.contains(user), "{client}");
            }
            Err(other) => panic!("refused for another reason: {other}"),
            Ok(_) => panic!("a fifth task through another application was admitted"),
        }
        let other = ClientSlot::take(client("app 0", "tasks test other user"));
        assert!(other.is_ok(), "another user was refused");
        held.pop();
        held.push(ClientSlot::take(client("app 1", user)).expect("a slot came back"));
    }
}
