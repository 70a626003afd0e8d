//! Kept-alive HTTP/1.1 connections, reused by later requests of the same load of the same
//! component. A connection is reused only when nothing about it could differ from a new one:
//! the same owner (one load of one component: its grant, policy and TLS configuration), the
//! same user, scheme, host name (the TLS server name) and port, and a peer address that this
//! request's own address check allowed (a name that now resolves elsewhere gets a new, checked
//! connection). Every request still passes every check of the send path before it gets here.
//!
//! A connection comes back only through [`Lease::release`], which the response body calls once
//! it has been read to its end; it is kept only when hyper reports it ready for another request
//! (the response was complete and the server did not ask to close). The pool is bounded per key
//! and in all, and an idle connection is dropped after [`IDLE_TIMEOUT`]. A request takes a
//! connection whose task runs on its own thread before one on another: under `serve --http`
//! each thread has its own runtime (see [`crate::mcp::lanes`]), and a connection driven from
//! another thread wakes that thread for every read and write.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;

/// Idle connections kept per key: enough for a tool's few parallel requests to one host.
pub const MAX_IDLE_PER_KEY: usize = 4;
/// Idle connections kept in all, over every component and host: each holds a socket and a
/// task, so the pool never holds more than this many of either.
pub const MAX_IDLE: usize = 64;
/// How long an idle connection is kept. Servers commonly close after 5–60 s; a connection the
/// server closed first is noticed by its driver and dropped earlier.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a released connection may take to become ready again before it is dropped; hyper
/// needs only its own task's next poll, so this bounds a stuck connection, not a slow one.
const READY_WAIT: Duration = Duration::from_secs(1);

/// The sending half of a connection, as the send path uses it.
pub type Sender = SendRequest<Full<Bytes>>;

/// What a connection may be reused for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    /// The load of the component that opened it ([`super::HttpConfig::owner`]).
    pub owner: u64,
    /// The user whose call opened it.
    pub user: String,
    /// Whether it is TLS.
    pub https: bool,
    /// The host name (or IP literal) it was opened for, which is the TLS server name.
    pub host: String,
    /// The port in the URL.
    pub port: u16,
}

/// An open connection: its sending half, where it leads, and the thread its task was started
/// on.
pub struct Connection {
    /// The sending half.
    pub sender: Sender,
    /// The address it is connected to.
    pub peer: SocketAddr,
    /// The thread whose runtime drives it.
    pub driver: ThreadId,
}

struct Idle {
    connection: Connection,
    since: Instant,
}

impl Idle {
    fn usable(&self, now: Instant) -> bool {
        let sender = &self.connection.sender;
        !sender.is_closed() && sender.is_ready() && now.duration_since(self.since) < IDLE_TIMEOUT
    }
}

#[derive(Default)]
struct Inner {
    idle: HashMap<PoolKey, Vec<Idle>>,
    count: usize,
    reaper: bool,
}

impl Inner {
    /// Drop every connection that is closed, not ready or past its idle time; the earliest
    /// time one of those left will expire.
    fn sweep(&mut self, now: Instant) -> Option<Instant> {
        self.idle.retain(|_, list| {
            list.retain(|c| c.usable(now));
            !list.is_empty()
        });
        self.count = self.idle.values().map(Vec::len).sum();
        self.idle
            .values()
            .flatten()
            .map(|c| c.since + IDLE_TIMEOUT)
            .min()
    }

    /// Make room for one more connection under `key`: the oldest of the key, or of all, goes.
    fn make_room(&mut self, key: &PoolKey) {
        if let Some(list) = self.idle.get_mut(key)
            && list.len() >= MAX_IDLE_PER_KEY
        {
            list.remove(0);
            self.count -= 1;
        }
        if self.count >= MAX_IDLE {
            let oldest = self
                .idle
                .iter()
                .filter_map(|(k, list)| list.first().map(|c| (c.since, k.clone())))
                .min_by_key(|(since, _)| *since);
            if let Some((_, k)) = oldest
                && let Some(list) = self.idle.get_mut(&k)
            {
                list.remove(0);
                self.count -= 1;
                if list.is_empty() {
                    self.idle.remove(&k);
                }
            }
        }
    }
}

/// The host's idle connections (one per host, kept in its services).
#[derive(Default)]
pub struct Pool {
    inner: Mutex<Inner>,
}

impl Pool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A poisoned lock only means a holder panicked; the lists are still lists of sockets.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection under `key` to one of `allowed` (the addresses this request's check
    /// passed): the most recently used of those driven from this thread, else of all.
    pub fn checkout(&self, key: &PoolKey, allowed: &[SocketAddr]) -> Option<Connection> {
        let mut inner = self.lock();
        let now = Instant::now();
        let list = inner.idle.get_mut(key)?;
        let before = list.len();
        list.retain(|c| c.usable(now));
        let here = std::thread::current().id();
        let found = list
            .iter()
            .rposition(|c| allowed.contains(&c.connection.peer) && c.connection.driver == here)
            .or_else(|| {
                list.iter()
                    .rposition(|c| allowed.contains(&c.connection.peer))
            })
            .map(|i| list.remove(i));
        let after = list.len();
        if after == 0 {
            inner.idle.remove(key);
        }
        inner.count -= before - after;
        found.map(|c| c.connection)
    }

    /// `connection` in use for a request under `key`.
    pub fn lease(self: &Arc<Self>, key: PoolKey, connection: Connection) -> Lease {
        Lease {
            pool: self.clone(),
            key,
            connection,
        }
    }

    /// Idle connections held now (closed and expired ones dropped first).
    pub fn idle(&self) -> usize {
        let mut inner = self.lock();
        inner.sweep(Instant::now());
        inner.count
    }

    fn checkin(self: &Arc<Self>, key: PoolKey, connection: Connection) {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.sweep(now);
        inner.make_room(&key);
        inner.idle.entry(key).or_default().push(Idle {
            connection,
            since: now,
        });
        inner.count += 1;
        if !inner.reaper
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            inner.reaper = true;
            runtime.spawn(reap(Arc::downgrade(self)));
        }
    }
}

/// Drop idle connections as they expire, while any are held; ends when the pool is empty or
/// gone, and the next check-in starts it again.
async fn reap(pool: Weak<Pool>) {
    loop {
        let next = {
            let Some(pool) = pool.upgrade() else {
                return;
            };
            let mut inner = pool.lock();
            let next = inner.sweep(Instant::now());
            if next.is_none() {
                inner.reaper = false;
            }
            next
        };
        match next {
            Some(at) => tokio::time::sleep_until(at.into()).await,
            None => return,
        }
    }
}

/// A connection carrying one request. Dropped, it closes; released after a complete
/// response, it goes back to the pool.
pub struct Lease {
    pool: Arc<Pool>,
    key: PoolKey,
    connection: Connection,
}

impl Lease {
    /// The response on this connection was read to its end: keep the connection if hyper says
    /// it is ready for another request (waiting briefly for its task to get there).
    pub fn release(self) {
        let Self {
            pool,
            key,
            mut connection,
        } = self;
        if connection.sender.is_ready() {
            pool.checkin(key, connection);
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            if let Ok(Ok(())) = tokio::time::timeout(READY_WAIT, connection.sender.ready()).await {
                pool.checkin(key, connection);
            }
        });
    }
}

/// The pool is this capability's service; the core keeps it without knowing it.
impl crate::services::Services {
    /// The host's idle outbound HTTP connections.
    pub fn http_pool(&self) -> Arc<Pool> {
        match self.shared(|_| Ok::<_, std::convert::Infallible>(Pool::new())) {
            Ok(pool) => pool,
            Err(never) => match never {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper_util::rt::TokioIo;
    use tokio::net::{TcpListener, TcpStream};

    fn key(owner: u64) -> PoolKey {
        PoolKey {
            owner,
            user: "alice".into(),
            https: false,
            host: "example.test".into(),
            port: 8080,
        }
    }

    /// A ready HTTP/1.1 connection to a listener on 127.0.0.1, with the server's end.
    async fn connection() -> (Connection, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let peer = listener.local_addr().expect("addr");
        let (client, accepted) = tokio::join!(TcpStream::connect(peer), listener.accept());
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(client.expect("connect")))
                .await
                .expect("handshake");
        tokio::spawn(conn);
        sender.ready().await.expect("ready");
        let driver = std::thread::current().id();
        let connection = Connection {
            sender,
            peer,
            driver,
        };
        (connection, accepted.expect("accept").0)
    }

    #[tokio::test]
    async fn a_connection_is_reused_only_by_its_owner_and_only_to_a_checked_address() {
        let pool = Arc::new(Pool::new());
        let (connection, _server) = connection().await;
        let peer = connection.peer;
        pool.lease(key(1), connection).release();
        assert_eq!(pool.idle(), 1);
        // Another load of a component, even of the same name, never gets it.
        assert!(pool.checkout(&key(2), &[peer]).is_none());
        // Nor does a request whose name now resolves elsewhere (DNS rebinding).
        let elsewhere: SocketAddr = "127.0.0.2:8080".parse().expect("addr");
        assert!(pool.checkout(&key(1), &[elsewhere]).is_none());
        let mut other_user = key(1);
        other_user.user = "bob".into();
        assert!(pool.checkout(&other_user, &[peer]).is_none());
        assert_eq!(pool.idle(), 1);
        let reached = pool
            .checkout(&key(1), &[elsewhere, peer])
            .expect("its own connection");
        assert_eq!(reached.peer, peer);
        assert_eq!(pool.idle(), 0);
    }

    #[tokio::test]
    async fn the_pool_keeps_at_most_its_cap_per_key() {
        let pool = Arc::new(Pool::new());
        let mut servers = Vec::new();
        for _ in 0..MAX_IDLE_PER_KEY + 2 {
            let (connection, server) = connection().await;
            servers.push(server);
            pool.lease(key(1), connection).release();
        }
        assert_eq!(pool.idle(), MAX_IDLE_PER_KEY);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_dropped() {
        let pool = Arc::new(Pool::new());
        let (connection, server) = connection().await;
        let peer = connection.peer;
        pool.lease(key(1), connection).release();
        assert_eq!(pool.idle(), 1);
        drop(server);
        let gone = async {
            while pool.idle() > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), gone)
            .await
            .expect("the closed connection leaves the pool");
        assert!(pool.checkout(&key(1), &[peer]).is_none());
    }

    #[tokio::test]
    async fn a_connection_not_released_is_never_kept() {
        let pool = Arc::new(Pool::new());
        let (connection, _server) = connection().await;
        drop(pool.lease(key(1), connection));
        assert_eq!(pool.idle(), 0);
    }

    #[tokio::test]
    async fn a_connection_driven_from_this_thread_is_taken_first() {
        let pool = Arc::new(Pool::new());
        let (here, _server) = connection().await;
        let (mut elsewhere, _other_server) = connection().await;
        let (here_peer, elsewhere_peer) = (here.peer, elsewhere.peer);
        elsewhere.driver = std::thread::spawn(|| std::thread::current().id())
            .join()
            .expect("thread");
        pool.lease(key(1), here).release();
        // Checked in last, so the most recently used.
        pool.lease(key(1), elsewhere).release();
        let taken = pool
            .checkout(&key(1), &[here_peer, elsewhere_peer])
            .expect("a connection");
        assert_eq!(taken.peer, here_peer);
        // With none of this thread's left, another thread's is still used.
        let taken = pool
            .checkout(&key(1), &[here_peer, elsewhere_peer])
            .expect("a connection");
        assert_eq!(taken.peer, elsewhere_peer);
    }
}
