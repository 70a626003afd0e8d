//! Questions a call puts to the MCP client that made it (`chitin:host/client`): a form for its
//! user, a completion by its model, its roots. The front decides how they travel (a request to a
//! 2025-11-25 session, an input-required result to a 2026-07-28 request, a task's
//! `inputRequests`); without an MCP client nobody is asked.

use serde_json::Value;

pub use chitin_registry::manifest::ClientMethod;

/// One question.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientQuestion {
    /// Names it; the answer comes back under this key.
    pub key: String,
    /// What is asked.
    pub method: ClientMethod,
    /// The MCP request's params.
    pub params: Value,
}

impl ClientQuestion {
    /// The MCP method name.
    pub fn mcp_method(&self) -> &'static str {
        mcp_method(self.method)
    }

    /// The question as an MCP request object (`method` and `params`).
    pub fn as_request(&self) -> Value {
        serde_json::json!({"method": self.mcp_method(), "params": self.params})
    }
}

/// The MCP method of `method`.
pub fn mcp_method(method: ClientMethod) -> &'static str {
    match method {
        ClientMethod::Elicit => "elicitation/create",
        ClientMethod::Sample => "sampling/createMessage",
        ClientMethod::ListRoots => "roots/list",
    }
}

/// The client capability (`elicitation`, `sampling`, `roots`) `method` needs.
pub fn capability(method: ClientMethod) -> &'static str {
    match method {
        ClientMethod::Elicit => "elicitation",
        ClientMethod::Sample => "sampling",
        ClientMethod::ListRoots => "roots",
    }
}

/// Someone who can put questions to the calling client.
#[async_trait::async_trait]
pub trait ClientAsker: Send + Sync {
    /// The methods the client declared.
    fn declared(&self) -> Vec<ClientMethod>;
    /// Ask every question; the answers in the questions' order, or why there are none.
    async fn ask(&self, questions: &[ClientQuestion]) -> Result<Vec<Value>, String>;
}

/// Used where no MCP client made the call (the CLI): nothing is declared, nothing answered.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoClient;

#[async_trait::async_trait]
impl ClientAsker for NoClient {
    fn declared(&self) -> Vec<ClientMethod> {
        Vec::new()
    }

    async fn ask(&self, _questions: &[ClientQuestion]) -> Result<Vec<Value>, String> {
        Err(
            "no MCP client made this call, so there is nobody to ask; call the tool through \
             an MCP client that supports elicitation, sampling or roots"
                .into(),
        )
    }
}
