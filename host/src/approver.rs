//! Approvals: before a call that needs a person's consent, the host asks an [`Approver`]. The
//! front decides who that is (a terminal prompt, MCP elicitation); an agent never answers for
//! itself.

use std::sync::Arc;

use crate::client::{ClientAsker, NoClient};
use crate::events::CallEvents;

/// What a person is asked to approve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The tool to run.
    pub tool: String,
    /// The component carrying it (`namespace/name`, or the file stem without a manifest).
    pub component: String,
    /// Why approval is needed.
    pub reason: String,
    /// The call's arguments, as JSON.
    pub args_json: String,
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run the call.
    Approved,
    /// Run the call, and do not ask again for this tool while the component's content and its
    /// effective grant stay the same (remembered in the database; `chitin approvals revoke`
    /// forgets it). For a tool the policy marks `always`, this counts as `Approved`.
    ApprovedAlways,
    /// Do not run it; why, in words for the agent.
    Denied(String),
}

/// Someone who can approve calls.
#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    /// Ask about one call.
    async fn approve(&self, request: &ApprovalRequest) -> Decision;
}

/// Used where nobody can be asked: refuses every request and says how to approve instead.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoApprover;

#[async_trait::async_trait]
impl Approver for NoApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        Decision::Denied(format!(
            "`{}` needs a person's approval ({}), but nobody can be asked here: run it from a \
             terminal, pass --yes to pre-approve, or use an MCP client that supports elicitation",
            request.tool, request.reason
        ))
    }
}

/// Whose consent a remembered "always allow" is, and so whose calls it spares the question.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Consenter {
    /// The operator: the terminal, an MCP client on stdio, and HTTP requests with the server's
    /// own bearer token. One person's channels share what that person allowed.
    #[default]
    Operator,
    /// The holder of an OAuth access token: a person of their own, whose "always allow"
    /// covers their own calls only, and whom nobody else's covers.
    Holder {
        /// The token's application and user ([`crate::mcp::oauth::TokenGrant::holder`]),
        /// whose approvals these are.
        holder: Arc<str>,
        /// The user alone ([`crate::mcp::oauth::TokenGrant::person`]), whose per-user bounds
        /// the call counts in, whichever application it came through.
        person: Arc<str>,
    },
}

impl Consenter {
    /// The holder an approval is remembered for; `None` for the operator.
    pub fn holder(&self) -> Option<&str> {
        match self {
            Self::Operator => None,
            Self::Holder { holder, .. } => Some(holder),
        }
    }

    /// The user whose per-user bounds (processes, outbound requests) the call counts in;
    /// `None` for the operator.
    pub fn person(&self) -> Option<&Arc<str>> {
        match self {
            Self::Operator => None,
            Self::Holder { person, .. } => Some(person),
        }
    }
}

/// Who is calling and who approves: what a front passes with every call.
#[derive(Clone)]
pub struct CallContext {
    /// Asked before calls that need approval.
    pub approver: Arc<dyn Approver>,
    /// Whose "always allow" covers this call, and is remembered when given.
    pub consenter: Consenter,
    /// The caller, for per-user limits (`local` on the CLI).
    pub user: Arc<str>,
    /// Where the call's progress and log reports go while it runs (nowhere by default).
    pub events: CallEvents,
    /// Who puts the component's questions to the calling MCP client (nobody by default).
    pub client: Arc<dyn ClientAsker>,
}

impl Default for CallContext {
    /// The local user, with nobody to ask.
    fn default() -> Self {
        Self {
            approver: Arc::new(NoApprover),
            consenter: Consenter::Operator,
            user: "local".into(),
            events: CallEvents::none(),
            client: Arc::new(NoClient),
        }
    }
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("user", &self.user)
            .field("consenter", &self.consenter)
            .finish_non_exhaustive()
    }
}
