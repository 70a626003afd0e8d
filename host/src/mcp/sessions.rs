//! A bound on the MCP sessions (begun with `initialize`) one client keeps open over HTTP. rmcp
//! keeps a session until it has been idle for five minutes and bounds neither their number nor
//! who starts them: one client with a token, however narrow its scopes, starting sessions at
//! its request rate held some 67 KB each, gigabytes within the idle time. A session past its
//! client's bound is closed as soon as it is made, and the client told why.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::transport::common::server_side_http::SessionId;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::mcp::access::ClientId;

/// Sessions one client may keep open at once.
pub const MAX_PER_CLIENT: usize = 64;

/// Clients remembered before those whose sessions have all ended are forgotten.
const PRUNE_CLIENTS_AT: usize = 10_000;

/// A session refused because its client holds the most it may.
#[derive(Debug, thiserror::Error)]
#[error(
    "this client ({client}) already has {open} MCP sessions open, the most one client may; end \
     unused ones with an HTTP DELETE of their Mcp-Session-Id (idle ones end after 5 minutes), or \
     make stateless 2026-07-28 requests, which need no session"
)]
pub struct TooManySessions {
    /// The client.
    pub client: String,
    /// Its open sessions.
    pub open: usize,
}

/// The sessions each client began, checked against those rmcp still holds.
pub struct Sessions {
    manager: Arc<LocalSessionManager>,
    by_client: Mutex<HashMap<ClientId, Vec<SessionId>>>,
    most: usize,
}

impl Sessions {
    /// Bound the sessions of `manager` to `most` per client.
    pub fn new(manager: Arc<LocalSessionManager>, most: usize) -> Self {
        Self {
            manager,
            by_client: Mutex::default(),
            most,
        }
    }

    /// Count `session`, just begun, for `client`; over the bound it is closed and refused.
    pub async fn admit(
        &self,
        client: &ClientId,
        session: SessionId,
    ) -> Result<(), TooManySessions> {
        let refused = {
            // Those that ended (idle, deleted, the server stopping) no longer count.
            let live = self.manager.sessions.read().await;
            let mut by_client = self
                .by_client
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if by_client.len() > PRUNE_CLIENTS_AT {
                by_client.retain(|_, ids| {
                    ids.retain(|id| live.contains_key(id));
                    !ids.is_empty()
                });
            }
            let ids = by_client.entry(client.clone()).or_default();
            ids.retain(|id| live.contains_key(id));
            if ids.len() >= self.most {
                Some(ids.len())
            } else {
                ids.push(session.clone());
                None
            }
        };
        let Some(open) = refused else {
            return Ok(());
        };
        if let Err(e) = self.manager.close_session(&session).await {
            tracing::warn!(error = %e, "cannot close a session over its client's bound");
        }
        Err(TooManySessions {
            client: client.0.clone(),
            open,
        })
    }
}
