//! A bound on the MCP sessions (begun with `initialize`) one client keeps open over HTTP. rmcp
//! keeps a session until it has been idle for five minutes and bounds neither their number nor
//! who starts them: one client with a token, however narrow its scopes, starting sessions at
//! its request rate held some 67 KB each, gigabytes within the idle time. A session past its
//! client's bound is closed as soon as it is made, and the client told why.
//!
//! A session also belongs to the client that began it. rmcp takes any request that carries a
//! live `Mcp-Session-Id`, so another client that learnt the id (from a log, a proxy, a shared
//! terminal) could read the session's stream, answer the questions the server asks its owner
//! (an approval of a shell command among them) or end it. A request on a session another client
//! began is answered as one on an unknown session.

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
    "this client ({client}) already has {open} MCP sessions open, the most one client (for an \
     OAuth token: one user, through whichever applications) may; end unused ones with an HTTP DELETE of their Mcp-Session-Id (idle ones end after 5 minutes), or \
     make stateless 2026-07-28 requests, which need no session"
)]
pub struct TooManySessions {
    /// The client.
    pub client: String,
    /// Its open sessions.
    pub open: usize,
}

/// A request on a session that this client did not begin (another did, or none).
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown MCP session: this client ({client}) began no session with this Mcp-Session-Id; \
     begin one with `initialize`"
)]
pub struct NotItsSession {
    /// The client that sent the request.
    pub client: String,
}

/// The sessions each client began, checked against those rmcp still holds.
pub struct Sessions {
    manager: Arc<LocalSessionManager>,
    ledger: Mutex<Ledger>,
    most: usize,
}

/// Who began which session, both ways round.
#[derive(Default)]
struct Ledger {
    /// Sessions per [`ClientId::person`].
    by_client: HashMap<String, Vec<SessionId>>,
    owner: HashMap<SessionId, ClientId>,
}

impl Sessions {
    /// Bound the sessions of `manager` to `most` per client.
    pub fn new(manager: Arc<LocalSessionManager>, most: usize) -> Self {
        Self {
            manager,
            ledger: Mutex::default(),
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
            let mut ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
            let Ledger { by_client, owner } = &mut *ledger;
            if by_client.len() > PRUNE_CLIENTS_AT {
                by_client.retain(|_, ids| {
                    ids.retain(|id| live.contains_key(id));
                    !ids.is_empty()
                });
                owner.retain(|id, _| live.contains_key(id));
            }
            let ids = by_client.entry(client.person.clone()).or_default();
            ids.retain(|id| {
                let open = live.contains_key(id);
                if !open {
                    owner.remove(id);
                }
                open
            });
            if ids.len() >= self.most {
                Some(ids.len())
            } else {
                ids.push(session.clone());
                owner.insert(session.clone(), client.clone());
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
            client: client.person.clone(),
            open,
        })
    }

    /// Whether `client` may use `session`: only a session it began. Another client's and one
    /// nobody began get the same refusal, so that no answer tells a live session id from a
    /// made-up one (rmcp's own answers would: its 404 for an unknown id, and 202 to a DELETE of
    /// one).
    pub fn check_owner(&self, client: &ClientId, session: &str) -> Result<(), NotItsSession> {
        let ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
        match ledger.owner.get(session) {
            Some(owner) if owner == client => Ok(()),
            _ => Err(NotItsSession {
                client: client.owner.clone(),
            }),
        }
    }
}
