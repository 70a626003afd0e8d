//! The MCP server handler: lists the served host's tools and dispatches calls to it.
//!
//! Logging (`logging/setLevel`, `notifications/message`) is deprecated in spec 2026-07-28 but
//! still served to clients that ask for it; the `allow(deprecated)` marks below are for that.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
    CreateTaskResult, ElicitationCapability, GetTaskParams, GetTaskResult, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, RequestMetaObject,
    ServerCapabilities, ServerConfig, SubscriptionFilter, Tool, ToolAnnotations, UpdateTaskParams,
};
#[allow(deprecated)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, SetLevelRequestParams};
use rmcp::service::{NotificationContext, Peer, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::approver::Approver;
use crate::approver::CallContext;
use crate::caps::log::LogLevel;
use crate::client::{ClientAsker, ClientMethod};
use crate::error::ToolError;
use crate::events::{CallEvent, CallEvents};
use crate::mcp::access::{self, Access, ClientId};
use crate::mcp::approver::ElicitationApprover;
use crate::mcp::gather::{self, Gathered};
use crate::mcp::input_required::InputApprover;
use crate::mcp::questions::{self, Missed, SessionAsker};
use crate::mcp::tasks::{self, TaskCall};
use crate::mcp::{Served, content};
use crate::spec::ToolSpec;

/// Tools per `tools/list` page, unless configured otherwise.
pub const PAGE_SIZE: usize = 100;

/// An MCP server over the served host; one per session (cheap to clone).
#[derive(Clone)]
pub struct McpServer {
    served: Arc<Served>,
    page_size: usize,
    /// The least severe log level forwarded as `notifications/message` (`logging/setLevel`).
    min_log: Arc<AtomicU8>,
}

impl McpServer {
    /// Serve the tools of `served`, `page_size` per `tools/list` page.
    pub fn new(served: Arc<Served>, page_size: usize) -> Self {
        Self {
            served,
            page_size: page_size.max(1),
            min_log: Arc::new(AtomicU8::new(LogLevel::Info.rank())),
        }
    }

    /// The tools served.
    pub fn served(&self) -> &Arc<Served> {
        &self.served
    }

    /// The least severe level forwarded for a request with `meta` in a session of `version`:
    /// a 2026-07-28 request opts in through its `_meta`; a session that began with
    /// `initialize` uses its `logging/setLevel` level.
    pub fn min_log_from(
        &self,
        meta: &RequestMetaObject,
        version: Option<&ProtocolVersion>,
    ) -> Option<LogLevel> {
        #[allow(deprecated)]
        if let Some(level) = meta.log_level() {
            return Some(to_log_level(level));
        }
        version
            .is_some_and(|v| v.has_initialize())
            .then(|| LogLevel::from_rank(self.min_log.load(Ordering::Relaxed)))
    }
}

/// Where a `tools/call` came from and what it may reach: read from rmcp's request context, or
/// built by the direct HTTP path (`direct.rs`) for a plain stateless request.
pub struct CallOrigin<'a> {
    /// The tools the request may reach.
    pub access: Access,
    /// Who sent it, for per-client bounds.
    pub client: ClientId,
    /// What the client declared it can do.
    pub capabilities: Option<ClientCapabilities>,
    /// The request belongs to a session that began with `initialize`.
    pub legacy_session: bool,
    /// The request came over stdio.
    pub stdio: bool,
    /// The client, to notify and ask mid-call; `None` when nothing may be sent before the
    /// result (the direct path takes only requests that asked for no progress or log).
    pub peer: Option<&'a Peer<RoleServer>>,
    /// The progress token the request carried.
    pub progress_token: Option<ProgressToken>,
    /// The least severe log level forwarded; `None`: no log messages.
    pub min_log: Option<LogLevel>,
    /// Cancelled when the client cancels the request or the server stops.
    pub cancelled: &'a CancellationToken,
}

impl McpServer {
    /// Run one `tools/call`: as a task, through input-required rounds, or inline with its
    /// reports forwarded to the client.
    pub async fn call(
        &self,
        request: CallToolRequestParams,
        origin: CallOrigin<'_>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Written straight from the parsed map (no copy of it first).
        let args = match &request.arguments {
            Some(object) => serde_json::to_string(object)
                .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?,
            None => "{}".to_owned(),
        };
        let host = self.served.host();
        let CallOrigin {
            access,
            client,
            capabilities,
            legacy_session,
            stdio,
            peer,
            progress_token,
            min_log,
            cancelled,
        } = origin;
        // The HTTP front refuses these with a scope challenge; this is the second line.
        if !access.reaches(host.policy(), &request.name) {
            return Err(ErrorData::invalid_request(
                format!(
                    "this request's access token has no scope that reaches `{}`",
                    request.name
                ),
                None,
            ));
        }
        let consenter = access.consenter(&client);
        let declared = questions::declared(capabilities.as_ref());
        let can_elicit = declared.contains(&ClientMethod::Elicit);
        let wants_task = capabilities.as_ref().is_some_and(|c| c.supports_tasks());
        let task_required = host.task_required(&request.name);
        if task_required && !wants_task {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let asked_limit = host.asked_time_limit(&request.name);
        // Status notifications need a lasting channel: stdio, or a session.
        let notify = (stdio || legacy_session).then(|| peer.cloned()).flatten();
        // A tool that needs a task gathers its input through input-required rounds first, for a
        // client that answers through them.
        if task_required
            && !legacy_session
            && let Some(limit) = asked_limit.or_else(|| host.time_limit(&request.name))
        {
            let input = input_approver(&request, &args, &client, &declared)?;
            let call = TaskCall {
                tool: request.name.to_string(),
                args_json: args,
                time_limit: limit,
                declared,
                client,
                consenter,
                notify,
            };
            let gathered = tokio::select! {
                biased;
                () = cancelled.cancelled() => {
                    tracing::info!(tool = %request.name, "call cancelled by the client");
                    return Err(ErrorData::internal_error("the call was cancelled", None));
                }
                gathered = Box::pin(gather::gather(host, call, input)) => gathered,
            };
            return match gathered.map_err(|e| ErrorData::invalid_request(e.to_string(), None))? {
                Gathered::Task(task) => Ok(CreateTaskResult::new(task).into()),
                Gathered::Input(asking) => asked(&asking)?.ok_or_else(|| {
                    ErrorData::internal_error("the call stopped without a question", None)
                }),
            };
        }
        if wants_task
            && (task_required || asked_limit.is_some_and(tasks::runs_as_task))
            && let Some(limit) = asked_limit.or_else(|| host.time_limit(&request.name))
        {
            let call = TaskCall {
                tool: request.name.to_string(),
                args_json: args,
                time_limit: limit,
                declared,
                client,
                consenter,
                notify,
            };
            let task = tasks::start(host, call)
                .map_err(|e| ErrorData::invalid_request(e.to_string(), None))?;
            return Ok(CreateTaskResult::new(task).into());
        }
        let (events, mut reports) = CallEvents::channel();
        let forward = Forward {
            tool: &request.name,
            progress_token,
            min_log,
            peer,
        };
        // A session that began with `initialize` is asked mid-call; a 2026-07-28 request is
        // asked through an input-required result and answers in its retry.
        let missed = Missed::default();
        let (asking, approver, client): (_, Arc<dyn Approver>, Arc<dyn ClientAsker>) =
            if legacy_session {
                let Some(peer) = peer else {
                    return Err(ErrorData::internal_error(
                        "a session's call reached the server without its session",
                        None,
                    ));
                };
                (
                    None,
                    Arc::new(ElicitationApprover::new(peer.clone(), can_elicit)),
                    Arc::new(SessionAsker::new(peer.clone(), declared, missed.clone())),
                )
            } else {
                let asking = Arc::new(input_approver(&request, &args, &client, &declared)?);
                (Some(asking.clone()), asking.clone(), asking)
            };
        let ctx = CallContext {
            approver,
            user: access::user_of(&consenter),
            consenter,
            events,
            client,
        };
        // Boxed, as the rare branches' futures are: every front moves this handler's future for
        // each request, and inline they made it 6.7 KB instead of 1.5 KB.
        let mut call = Box::pin(host.call_in(&request.name, &args, &ctx));
        // Reports are forwarded while the call runs. A `notifications/cancelled` drops the call
        // future: the store yields at every epoch tick, so the instance stops within a tick and
        // is freed with its store.
        let report = loop {
            tokio::select! {
                biased;
                () = cancelled.cancelled() => {
                    tracing::info!(tool = %request.name, "call cancelled by the client");
                    return Err(ErrorData::internal_error("the call was cancelled", None));
                }
                Some(event) = reports.recv() => Box::pin(forward.send(event)).await,
                report = &mut call => break report,
            }
        };
        while let Ok(event) = reports.try_recv() {
            Box::pin(forward.send(event)).await;
        }
        if let Some(method) = missed.method() {
            return Err(questions::missing_capability(method));
        }
        if let Some(asking) = &asking
            && let Some(response) = asked(asking)?
        {
            return Ok(response);
        }
        let result = match report.result {
            Ok(output) => content::success(output),
            // The host failed, not the tool: a protocol error, so the client does not hand it
            // to the model as something the tool said.
            Err(ToolError::HostFault(fault)) => {
                return Err(ErrorData::internal_error(
                    format!("host fault: {fault}"),
                    None,
                ));
            }
            Err(e) => content::failure(&e),
        };
        Ok(result.into())
    }
}

#[allow(deprecated)]
fn to_log_level(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info | LoggingLevel::Notice => LogLevel::Info,
        LoggingLevel::Warning => LogLevel::Warn,
        _ => LogLevel::Error,
    }
}

/// Forwards one call's reports to the client that made it.
struct Forward<'a> {
    tool: &'a str,
    progress_token: Option<ProgressToken>,
    /// `None`: the client did not opt in to log messages.
    min_log: Option<LogLevel>,
    /// `None`: nothing is sent before the result.
    peer: Option<&'a Peer<RoleServer>>,
}

impl Forward<'_> {
    /// Send one report as a notification. Progress goes only to a client that asked for it (by
    /// a progress token); a failed send (client gone) is not the call's failure.
    #[allow(deprecated)]
    async fn send(&self, event: CallEvent) {
        let Some(peer) = self.peer else {
            return;
        };
        let sent = match event {
            CallEvent::Progress {
                done,
                total,
                message,
            } => {
                let Some(token) = &self.progress_token else {
                    return;
                };
                let mut param = ProgressNotificationParam::new(token.clone(), done);
                param.total = total;
                param.message = message;
                peer.notify_progress(param).await
            }
            CallEvent::Log(entry) => {
                if self.min_log.is_none_or(|min| entry.level < min) {
                    return;
                }
                let level = match entry.level {
                    LogLevel::Trace | LogLevel::Debug => LoggingLevel::Debug,
                    LogLevel::Info => LoggingLevel::Info,
                    LogLevel::Warn => LoggingLevel::Warning,
                    LogLevel::Error => LoggingLevel::Error,
                };
                let mut param =
                    LoggingMessageNotificationParam::new(level, Value::String(entry.message));
                param.logger = Some(self.tool.to_owned());
                peer.notify_logging_message(param).await
            }
        };
        if let Err(e) = sent {
            tracing::debug!(tool = self.tool, error = %e, "cannot forward a call report");
        }
    }
}

/// A tool spec as an MCP tool.
pub fn to_mcp_tool(spec: &ToolSpec) -> Tool {
    let a = spec.annotations;
    let mut tool = Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        Arc::new(as_object(&spec.input_schema)),
    )
    .with_annotations(
        ToolAnnotations::new()
            .read_only(a.read_only)
            .destructive(a.destructive)
            .idempotent(a.idempotent)
            .open_world(a.open_world),
    );
    if let Some(schema) = &spec.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(as_object(schema)));
    }
    tool
}

fn as_object(schema: &Value) -> JsonObject {
    schema.as_object().cloned().unwrap_or_default()
}

/// One page of `items` from the opaque `cursor` (an offset), and the cursor of the next page.
pub fn page<T: Clone>(
    items: &[T],
    cursor: Option<&str>,
    size: usize,
) -> Result<(Vec<T>, Option<String>), String> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= items.len())
            .ok_or_else(|| format!("invalid cursor `{c}`"))?,
    };
    let end = (start + size).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

/// What a call that asked through an input-required result answers, if it stopped at a
/// question: -32021 for a capability the client lacks, else the input-required result.
fn asked(asking: &InputApprover) -> Result<Option<CallToolResponse>, ErrorData> {
    if let Some(method) = asking.missed_question() {
        return Err(questions::missing_capability(method));
    }
    if asking.missed_capability() {
        let mut required = ClientCapabilities::default();
        required.elicitation = Some(ElicitationCapability::new());
        return Err(ErrorData::missing_required_client_capability(required));
    }
    let question = asking
        .input_required()
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(question.map(Into::into))
}

/// The error for a read of `uri`: chitin serves tools only, so no resource exists.
fn resource_not_found(uri: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "resource not found: {uri} (chitin serves tools only; its resource list is always \
             empty)"
        ),
        Some(serde_json::json!({ "uri": uri })),
    )
}

impl ServerHandler for McpServer {
    /// What is served, and nothing more: tools (with list changes), logging for sessions that
    /// ask, tasks, and prompts, resources and completions that are always empty (chitin serves
    /// tools; every capability is a signed component's tool with a grant).
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_resources()
                .enable_completions()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("chitin", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "chitin: every tool runs in a fresh WebAssembly sandbox. Tool errors come back as \
                 results with isError set and the error kind first (invalid-args, not-found, \
                 permission-denied, invalid-path, execution-failed, timeout, rate-limited, \
                 external-service).",
        )
    }

    /// The offered tools the request's access reaches (an OAuth token: those its scopes cover)
    /// and the client can call: a tool that runs only as a task is listed to clients that
    /// declared tasks.
    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (access, _) = access::of_request(&context);
        let declares_tasks = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        let host = self.served.host();
        let tools: Vec<Tool> = host
            .tools()
            .filter(|t| access.reaches(host.policy(), &t.name))
            .filter(|t| declares_tasks || !host.task_required(&t.name))
            .map(to_mcp_tool)
            .collect();
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) =
            page(&tools, cursor, self.page_size).map_err(|e| ErrorData::invalid_params(e, None))?;
        let mut result = ListToolsResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    /// No resource exists (the list is always empty), so every read is of a resource not found:
    /// invalid params naming the URI in `data.uri`, as SEP-2164 asks.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Err(resource_not_found(&request.uri))
    }

    /// The called tool's schema, which the HTTP transport checks `Mcp-Param-*` headers against
    /// (the `x-mcp-header` properties).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.served.host().tool(name).map(to_mcp_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (access, client) = access::of_request(&context);
        let origin = CallOrigin {
            access,
            client,
            capabilities: context.client_capabilities(),
            legacy_session: context
                .protocol_version()
                .is_some_and(|v| v.has_initialize()),
            stdio: context.extensions.get::<http::request::Parts>().is_none(),
            peer: Some(&context.peer),
            progress_token: context.meta.get_progress_token(),
            min_log: self.min_log_from(&context.meta, context.protocol_version().as_ref()),
            cancelled: &context.ct,
        };
        self.call(request, origin).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        tasks::owned_by(&request.task_id, &access::of_request(&context).1)?;
        tasks::tasks()
            .get_task(&request.task_id)
            .map(GetTaskResult::new)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::owned_by(&request.task_id, &access::of_request(&context).1)?;
        tasks::tasks().update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::owned_by(&request.task_id, &access::of_request(&context).1)?;
        tasks::tasks().cancel_task(&request.task_id)
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.min_log
            .store(to_log_level(request.level).rank(), Ordering::Relaxed);
        Ok(())
    }

    /// Sessions that began with `initialize` (spec 2025-11-25 and earlier) get
    /// `notifications/tools/list_changed` whenever the served tool set changes.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut changes = self.served.subscribe();
        let peer = context.peer;
        tokio::spawn(async move {
            // Ends when the host is gone (Closed) or the session is (the send fails).
            while let Ok(()) | Err(RecvError::Lagged(_)) = changes.recv().await {
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }

    /// Spec 2026-07-28 clients ask for tool-list changes through `subscriptions/listen`; the
    /// SDK narrows this to what the client asked for.
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.served.subscribe();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(()) | Err(RecvError::Lagged(_)) => {
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

/// The input-required approver of a 2026-07-28 `tools/call` with `args`: its request state is
/// verified and redeemed here, so a tampered or replayed state is an invalid-params error.
fn input_approver(
    request: &CallToolRequestParams,
    args: &str,
    client: &ClientId,
    declared: &[ClientMethod],
) -> Result<InputApprover, ErrorData> {
    InputApprover::new(
        &request.name,
        args,
        client,
        declared.to_vec(),
        request.request_state.as_deref(),
        request.input_responses.as_ref(),
    )
    .map_err(|e| ErrorData::invalid_params(e.to_string(), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_each_other_until_the_end() {
        let items: Vec<u32> = (0..5).collect();
        let (first, next) = page(&items, None, 2).expect("page");
        assert_eq!((first, next.as_deref()), (vec![0, 1], Some("2")));
        let (second, next) = page(&items, next.as_deref(), 2).expect("page");
        assert_eq!((second, next.as_deref()), (vec![2, 3], Some("4")));
        let (last, next) = page(&items, next.as_deref(), 2).expect("page");
        assert_eq!((last, next), (vec![4], None));
    }

    #[test]
    fn a_bad_cursor_is_refused() {
        let items = [1, 2];
        assert!(page(&items, Some("x"), 2).is_err());
        assert!(page(&items, Some("9"), 2).is_err());
    }
}
