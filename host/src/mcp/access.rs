//! What one MCP request may reach and who sent it, as the HTTP front decided from its
//! credentials: the MCP handler lists and calls only what the request's access reaches, and
//! bounds tasks per client.

use std::collections::BTreeSet;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use crate::approver::Consenter;
use crate::policy::Policy;

/// The tools a request may reach.
#[derive(Debug, Clone)]
pub enum Access {
    /// Every offered tool: stdio, the static bearer token, or an unauthenticated loopback test
    /// server.
    All,
    /// The tools an OAuth token's scopes reach (`[oauth] scopes` in the policy).
    Scopes(Arc<BTreeSet<String>>),
}

impl Access {
    /// Whether this access reaches `tool`.
    pub fn reaches(&self, policy: &Policy, tool: &str) -> bool {
        match self {
            Self::All => true,
            Self::Scopes(scopes) => policy
                .scopes_reaching(tool)
                .iter()
                .any(|s| scopes.contains(*s)),
        }
    }
}

impl Access {
    /// Whose "always allow" covers a call of `client` with this access: an OAuth token's
    /// holder (whose token has scopes) is a person of their own; everything else came with the
    /// operator's credentials (stdio, the server's bearer token, no token on loopback).
    pub fn consenter(&self, client: &ClientId) -> Consenter {
        match self {
            Self::All => Consenter::Operator,
            Self::Scopes(_) => Consenter::Holder {
                holder: Arc::from(client.owner.as_str()),
                person: Arc::from(client.person.as_str()),
            },
        }
    }
}

/// The user an MCP call of `consenter` counts as for per-user limits (outbound HTTP rate windows
/// and kept-alive connections): an OAuth token's user, so one user cannot spend another's;
/// `mcp` for the operator's channels.
pub fn user_of(consenter: &Consenter) -> Arc<str> {
    consenter
        .person()
        .cloned()
        .unwrap_or_else(|| Arc::from("mcp"))
}

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientId {
    /// What the client's sessions, tasks and request states belong to: an OAuth token's
    /// application and user, else the peer address; `stdio` for the one client on stdio.
    pub owner: String,
    /// What the per-client bounds (open sessions, running tasks) count: an OAuth token's user
    /// alone, whichever application they came through; else the owner.
    pub person: String,
}

impl ClientId {
    /// A client that counts as itself: a peer, or stdio.
    pub fn own(owner: impl Into<String>) -> Self {
        let owner = owner.into();
        Self {
            person: owner.clone(),
            owner,
        }
    }
}

/// The access and client of a request. Over HTTP the front attached both; a request over HTTP
/// without them reaches nothing (fail closed).
pub fn of_request(context: &RequestContext<RoleServer>) -> (Access, ClientId) {
    match context.extensions.get::<http::request::Parts>() {
        Some(parts) => of_http(parts),
        None => (Access::All, ClientId::own("stdio")),
    }
}

/// The access and client the HTTP front attached to a request; none reaches nothing.
pub fn of_http(parts: &http::request::Parts) -> (Access, ClientId) {
    let access = parts
        .extensions
        .get::<Access>()
        .cloned()
        .unwrap_or_else(|| Access::Scopes(Arc::default()));
    let client = parts
        .extensions
        .get::<ClientId>()
        .cloned()
        .unwrap_or_else(|| ClientId::own("(unknown)"));
    (access, client)
}
