//! The host being served, swappable while serving: a reload replaces it atomically (calls in
//! flight finish on the host they started on) and tells every session that the tool set changed.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::broadcast;

use crate::host::Host;

/// Tool-set changes a slow session may fall behind by before it just gets one notification.
const CHANGE_BACKLOG: usize = 16;

/// The served host and the channel announcing tool-set changes.
pub struct Served {
    host: ArcSwap<Host>,
    changed: broadcast::Sender<()>,
}

impl Served {
    /// Serve `host`.
    pub fn new(host: Host) -> Arc<Self> {
        let (changed, _) = broadcast::channel(CHANGE_BACKLOG);
        Arc::new(Self {
            host: ArcSwap::from_pointee(host),
            changed,
        })
    }

    /// The current host; a call holds it until it ends, even across a reload.
    pub fn host(&self) -> Arc<Host> {
        self.host.load_full()
    }

    /// Serve `host` from now on and notify every session that the tool list changed.
    pub fn replace(&self, host: Host) {
        self.host.store(Arc::new(host));
        // No receivers just means no session is connected yet.
        let _ = self.changed.send(());
    }

    /// A receiver of tool-set changes, for one session.
    pub fn subscribe(&self) -> broadcast::Receiver<()> {
        self.changed.subscribe()
    }
}
