//! A component's questions to the calling client (`chitin:host/client`) over MCP, for sessions
//! that began with `initialize` (real `elicitation/create`, `sampling/createMessage` and
//! `roots/list` requests) and for tasks (the task's `inputRequests`, answered by
//! `tasks/update`). 2026-07-28 requests are asked through input-required results instead (see
//! `input_required`). A question whose method the client did not declare is never sent: the call
//! records it, and a direct call ends with -32021 naming the capability.

//!
//! Sampling and roots are deprecated in spec 2026-07-28 (SEP-2577) but still served to clients
//! that declare them; the `allow(deprecated)` is for that.
#![allow(deprecated)]

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, ElicitRequestParams, ElicitationCapability,
    InputRequest, RootsCapabilities, SamplingCapability,
};
use rmcp::service::Peer;
use rmcp::task_manager::TaskContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use crate::client::{ClientAsker, ClientMethod, ClientQuestion, capability};

/// The methods a client declared in `capabilities`.
pub fn declared(capabilities: Option<&ClientCapabilities>) -> Vec<ClientMethod> {
    let Some(c) = capabilities else {
        return Vec::new();
    };
    [
        (c.elicitation.is_some(), ClientMethod::Elicit),
        (c.sampling.is_some(), ClientMethod::Sample),
        (c.roots.is_some(), ClientMethod::ListRoots),
    ]
    .into_iter()
    .filter_map(|(yes, method)| yes.then_some(method))
    .collect()
}

/// The -32021 error for a question the client could not be asked.
pub fn missing_capability(method: ClientMethod) -> ErrorData {
    let mut required = ClientCapabilities::default();
    match method {
        ClientMethod::Elicit => required.elicitation = Some(ElicitationCapability::new()),
        ClientMethod::Sample => required.sampling = Some(SamplingCapability::default()),
        ClientMethod::ListRoots => required.roots = Some(RootsCapabilities::default()),
    }
    ErrorData::missing_required_client_capability(required)
}

/// `question` as an MCP input request; an error says what is wrong with its params.
pub fn input_request(question: &ClientQuestion) -> Result<InputRequest, String> {
    serde_json::from_value(question.as_request()).map_err(|e| {
        format!(
            "question `{}` is not a valid `{}` request: {e}",
            question.key,
            question.mcp_method()
        )
    })
}

/// The first method of a call's questions the client did not declare, shared by the asker and
/// the front that ends the call.
#[derive(Debug, Clone, Default)]
pub struct Missed(Arc<Mutex<Option<ClientMethod>>>);

impl Missed {
    /// Refuse `questions` if one needs a method not in `declared`, recording the method.
    pub fn check(
        &self,
        declared: &[ClientMethod],
        questions: &[ClientQuestion],
    ) -> Result<(), String> {
        let Some(q) = questions.iter().find(|q| !declared.contains(&q.method)) else {
            return Ok(());
        };
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(q.method);
        Err(format!(
            "question `{}` needs the client's `{}` capability, which this client did not \
             declare, so it cannot be asked",
            q.key,
            capability(q.method)
        ))
    }

    /// The method missed, if any.
    pub fn method(&self) -> Option<ClientMethod> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Asks a session that began with `initialize`, by requests to the client, one at a time.
pub struct SessionAsker {
    peer: Peer<RoleServer>,
    declared: Vec<ClientMethod>,
    missed: Missed,
}

impl SessionAsker {
    /// Ask through `peer`, whose client declared `declared`.
    pub fn new(peer: Peer<RoleServer>, declared: Vec<ClientMethod>, missed: Missed) -> Self {
        Self {
            peer,
            declared,
            missed,
        }
    }

    async fn ask_one(&self, question: &ClientQuestion) -> Result<Value, String> {
        let bad = |e: serde_json::Error| {
            format!(
                "question `{}` is not a valid `{}` request: {e}",
                question.key,
                question.mcp_method()
            )
        };
        let failed = |e: rmcp::service::ServiceError| {
            format!("asking the client `{}` failed: {e}", question.key)
        };
        let answer = match question.method {
            ClientMethod::Elicit => {
                let params: ElicitRequestParams =
                    serde_json::from_value(question.params.clone()).map_err(bad)?;
                serde_json::to_value(self.peer.create_elicitation(params).await.map_err(failed)?)
            }
            ClientMethod::Sample => {
                let params: CreateMessageRequestParams =
                    serde_json::from_value(question.params.clone()).map_err(bad)?;
                let result = self.peer.create_message(params).await.map_err(failed)?;
                serde_json::to_value(result)
            }
            ClientMethod::ListRoots => {
                let result = self.peer.list_roots().await.map_err(failed)?;
                serde_json::to_value(result)
            }
        };
        answer.map_err(|e| format!("cannot read the client's answer to `{}`: {e}", question.key))
    }
}

#[async_trait::async_trait]
impl ClientAsker for SessionAsker {
    fn declared(&self) -> Vec<ClientMethod> {
        self.declared.clone()
    }

    async fn ask(&self, questions: &[ClientQuestion]) -> Result<Vec<Value>, String> {
        self.missed.check(&self.declared, questions)?;
        let mut answers = Vec::with_capacity(questions.len());
        for question in questions {
            answers.push(self.ask_one(question).await?);
        }
        Ok(answers)
    }
}

/// Asks through a task: the task reports `input_required` with every question at once until
/// the client has answered them all with `tasks/update` (in one update or several).
pub struct TaskAsker {
    task: TaskContext,
    declared: Vec<ClientMethod>,
}

impl TaskAsker {
    /// Ask through `task`, whose client declared `declared`.
    pub fn new(task: TaskContext, declared: Vec<ClientMethod>) -> Self {
        Self { task, declared }
    }
}

#[async_trait::async_trait]
impl ClientAsker for TaskAsker {
    fn declared(&self) -> Vec<ClientMethod> {
        self.declared.clone()
    }

    async fn ask(&self, questions: &[ClientQuestion]) -> Result<Vec<Value>, String> {
        Missed::default().check(&self.declared, questions)?;
        let requests = questions
            .iter()
            .map(|q| input_request(q).map(|r| (q.key.clone(), r)))
            .collect::<Result<Vec<_>, _>>()?;
        let waits = requests
            .into_iter()
            .map(|(key, request)| self.task.request_input(key, request));
        futures::future::join_all(waits)
            .await
            .into_iter()
            .map(|answer| {
                answer.map_err(|_| "the question was withdrawn (the task was cancelled)".into())
            })
            .collect()
    }
}
