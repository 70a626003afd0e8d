//! `serve --http` on one single-threaded runtime per core ("lanes"): an acceptor hands each
//! connection to the lane holding the fewest, and that connection's requests, the calls they
//! make and the tasks those calls start (an outgoing request and its connection, a process's
//! pipes) stay on its lane's thread. On one work-stealing runtime those tasks were picked up by
//! whichever thread was idle, and every hand-over between them woke a sleeping thread: a served
//! tool's HTTPS GET woke the server's threads some six times, against between two and three on
//! a lane (see "One runtime per core" in docs/performance-log.md). A guest computing for long
//! yields to its lane's other connections at every epoch tick.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::mcp::local_peer::SocketOwners;
use crate::mcp::peer_client::PeerClient;

/// How long the acceptor waits after an error that is not the peer's (too many open files)
/// before it accepts again, so that it does not spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Lanes by default: one per core the process may use.
pub fn default_count() -> NonZeroUsize {
    std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
}

/// Accept on `listener` until `accepting` is cancelled, serving each connection on one of
/// `count` lanes with the future `serve_lane` makes from the lane's listener (on the lane's
/// thread). A client ([`PeerClient`]: an address or an IPv6 /64, and for a peer on this machine
/// the user owning its socket) with `per_peer` connections open has its next one closed at
/// once. Returns once every lane's future has ended; the lanes' runtimes are kept running until
/// then, so a task one lane started that another lane waits for (an MCP session's worker) is
/// never dropped early. Dropped before that, it ends the lanes and their connections.
pub async fn serve<F, Fut>(
    listener: TcpListener,
    count: NonZeroUsize,
    per_peer: NonZeroUsize,
    accepting: CancellationToken,
    serve_lane: F,
) -> io::Result<()>
where
    F: Fn(LaneListener) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = io::Result<()>> + 'static,
{
    let local = listener.local_addr()?;
    // Built here, so a runtime that cannot start is this call's error rather than a thread's.
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtimes = (0..count.get())
        .map(|_| runtime())
        .collect::<io::Result<Vec<_>>>()?;
    // The acceptor has a thread of its own, so neither a lane's calls nor the caller's thread
    // (which reloads components when they change) delay taking a connection.
    let acceptor = runtime()?;
    let listener = {
        let _on = acceptor.enter();
        TcpListener::from_std(listener.into_std()?)?
    };
    let serve_lane = Arc::new(serve_lane);
    // Cancelled when this returns, fails or is dropped: the threads end with it.
    let all_ended = CancellationToken::new();
    let _end_threads = all_ended.clone().drop_guard();
    let mut lanes = Vec::with_capacity(count.get());
    let mut ended = Vec::with_capacity(count.get());
    let started = |spawned: io::Result<std::thread::JoinHandle<()>>, what: &str| {
        spawned
            .map(drop)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {what}: {e}")))
    };
    for (i, runtime) in runtimes.into_iter().enumerate() {
        let (sender, incoming) = mpsc::unbounded_channel();
        let open = Arc::new(AtomicUsize::new(0));
        let listener = LaneListener {
            incoming,
            open: open.clone(),
            local,
        };
        let (done, lane_ended) = oneshot::channel();
        let (serve_lane, lane_all_ended) = (serve_lane.clone(), all_ended.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("chitin-lane-{i}"))
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        served = serve_lane(listener) => {
                            let _ = done.send(served);
                            lane_all_ended.cancelled().await;
                        }
                        () = lane_all_ended.cancelled() => {}
                    }
                });
            });
        started(spawned, &format!("serving thread {i}"))?;
        lanes.push(Lane { sender, open });
        ended.push(lane_ended);
    }
    let peers = Peers {
        open: Arc::default(),
        most: per_peer.get(),
        room: connection_room(),
    };
    let (stop, acceptor_ended) = (accepting, all_ended.clone());
    // Once it stops, the lanes' channels close; that tells a lane nothing, its future ends on
    // `accepting` itself.
    let spawned = std::thread::Builder::new()
        .name("chitin-accept".into())
        .spawn(move || {
            // On this thread: its netlink socket is asked once for each accepted connection.
            let mut owners = SocketOwners::open();
            acceptor.block_on(async move {
                tokio::select! {
                    () = accept(&listener, &lanes, &peers, &mut owners, &stop) => {}
                    () = acceptor_ended.cancelled() => {}
                }
            });
        });
    started(spawned, "the accepting thread")?;

    let mut result = Ok(());
    for lane in ended {
        let outcome = lane.await.unwrap_or_else(|_| {
            Err(io::Error::other(
                "a serving thread stopped without finishing its connections",
            ))
        });
        if result.is_ok() {
            result = outcome;
        }
    }
    result
}

/// One lane as the acceptor sees it: where to send a connection, and how many it holds.
struct Lane {
    sender: mpsc::UnboundedSender<Accepted>,
    open: Arc<AtomicUsize>,
}

/// A connection on its way to a lane, with its peer and the peer's slot it holds.
type Accepted = (std::net::TcpStream, SocketAddr, PeerSlot);

/// Open connections by client ([`PeerClient`]), the most one may hold, and the most all may:
/// without a bound one peer opening connections and sending nothing takes every file descriptor
/// of the process, and then no client is accepted and no tool can open a file; without the
/// second, many peers (addresses, users) together do.
struct Peers {
    open: Arc<Mutex<Open>>,
    most: usize,
    room: usize,
}

/// The connections open, by client and in all.
#[derive(Default)]
struct Open {
    by_client: HashMap<PeerClient, usize>,
    total: usize,
}

/// Why a connection was not taken.
enum Full {
    /// Its client holds `most` already.
    Client,
    /// The server holds `room` already.
    Server,
}

/// How many connections the server holds in all: its share of the open-files limit
/// ([`crate::descriptors`]), which is raised to the hard limit first.
pub fn connection_room() -> usize {
    crate::descriptors::split().connections
}

/// What the server says when it holds `room` connections before it closes the next.
fn server_full(room: usize) -> String {
    http_503(&format!(
        "this server holds as many open connections as it keeps file descriptors for ({room}); \
         retry shortly, or raise its open-files limit (ulimit -n)\n"
    ))
}

/// What a client over its bound of `most` connections is told before its connection is closed.
fn too_many_connections(client: PeerClient, most: usize) -> String {
    let body = format!(
        "too many open connections from {client} (at most {most} from one client: one address, \
         one /64 for IPv6, and one user on this machine): close idle ones, or start the server \
         with a higher --max-connections-per-client\n"
    );
    http_503(&body)
}

/// A whole 503 response saying `body`.
fn http_503(body: &str) -> String {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

impl Peers {
    /// A slot for one more connection of `peer`, unless it or the server holds the most
    /// already.
    fn take(&self, peer: PeerClient) -> Result<PeerSlot, Full> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.by_client.get(&peer).copied().unwrap_or(0) >= self.most {
            return Err(Full::Client);
        }
        if open.total >= self.room {
            return Err(Full::Server);
        }
        *open.by_client.entry(peer).or_default() += 1;
        open.total += 1;
        Ok(PeerSlot {
            open: self.open.clone(),
            peer,
        })
    }
}

/// One open connection of a peer, counted until it is dropped.
struct PeerSlot {
    open: Arc<Mutex<Open>>,
    peer: PeerClient,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.by_client.get_mut(&self.peer) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.by_client.remove(&self.peer);
            }
        }
    }
}

/// Hand each accepted connection to the lane with the fewest open, until `accepting` is
/// cancelled; close at once a connection from a client holding the most `peers` allows. A
/// local peer's client is its address and the user `owners` names for its socket.
async fn accept(
    listener: &TcpListener,
    lanes: &[Lane],
    peers: &Peers,
    owners: &mut SocketOwners,
    accepting: &CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            () = accepting.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            // The peer gave up before it was accepted: nothing to wait out.
            Err(e) if is_peer_error(&e) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "cannot accept a connection; retrying shortly");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let owner = stream
            .local_addr()
            .ok()
            .and_then(|local| owners.owner(peer, local));
        let client = PeerClient::of(peer.ip()).owned_by(owner);
        let slot = match peers.take(client) {
            Ok(slot) => slot,
            // Best effort: the socket's send buffer is empty, and the peer is not waited for.
            Err(Full::Client) => {
                let _ = stream.try_write(too_many_connections(client, peers.most).as_bytes());
                tracing::debug!(%peer, %client, "too many open connections from this client; closed");
                continue;
            }
            Err(Full::Server) => {
                let _ = stream.try_write(server_full(peers.room).as_bytes());
                tracing::warn!(%peer, %client, room = peers.room, "as many open connections as the server keeps room for; closed");
                continue;
            }
        };
        // A lane registers the socket with its own runtime; out of this one it goes first.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(error = %e, %peer, "cannot hand an accepted connection to a lane");
                continue;
            }
        };
        let Some(lane) = lanes.iter().min_by_key(|l| l.open.load(Ordering::Relaxed)) else {
            return;
        };
        lane.open.fetch_add(1, Ordering::Relaxed);
        if lane.sender.send((stream, peer, slot)).is_err() {
            lane.open.fetch_sub(1, Ordering::Relaxed);
            tracing::warn!(%peer, "a serving thread has stopped; the connection is closed");
        }
    }
}

/// Errors of one connection that came and went, not of the listener.
fn is_peer_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The connections the acceptor hands one lane, as axum's listener.
pub struct LaneListener {
    incoming: mpsc::UnboundedReceiver<Accepted>,
    open: Arc<AtomicUsize>,
    local: SocketAddr,
}

impl Listener for LaneListener {
    type Io = LaneStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (LaneStream, SocketAddr) {
        loop {
            let Some((stream, peer, slot)) = self.incoming.recv().await else {
                // The acceptor has stopped; the serve loop ends on its shutdown signal.
                return std::future::pending().await;
            };
            let counted = Counted(self.open.clone());
            match TcpStream::from_std(stream) {
                Ok(stream) => {
                    return (
                        LaneStream {
                            stream,
                            _counted: counted,
                            slot,
                        },
                        peer,
                    );
                }
                Err(e) => {
                    tracing::warn!(error = %e, %peer, "cannot serve an accepted connection");
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// One of a lane's open connections, counted until it is dropped.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection served on a lane; it counts as open there until dropped.
pub struct LaneStream {
    stream: TcpStream,
    _counted: Counted,
    slot: PeerSlot,
}

impl LaneStream {
    /// The socket itself.
    pub fn get_ref(&self) -> &TcpStream {
        &self.stream
    }

    /// The client the peer is counted as.
    pub fn client(&self) -> PeerClient {
        self.slot.peer
    }
}

impl AsyncRead for LaneStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for LaneStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Each lane answers with the name of its thread; `connections` connect and read it.
    #[tokio::test]
    async fn connections_are_spread_over_the_lanes_and_served_on_their_threads() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let two = NonZeroUsize::new(2).expect("two");
        let (accepting, server) = holding(listener, two, NonZeroUsize::MAX, || {
            std::thread::current().name().unwrap_or("").to_owned()
        });
        let mut threads = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..4 {
            let mut client = TcpStream::connect(addr).await.expect("connect");
            let mut name = vec![0; 13];
            client.read_exact(&mut name).await.expect("read");
            threads.push(String::from_utf8(name).expect("utf-8"));
            clients.push(client);
        }
        threads.sort();
        assert_eq!(
            threads,
            [
                "chitin-lane-0",
                "chitin-lane-0",
                "chitin-lane-1",
                "chitin-lane-1"
            ]
        );
        ended(accepting, server).await;
    }

    #[tokio::test]
    async fn dropping_the_server_ends_its_lanes_and_closes_its_listener() {
        /// Says so when the lane's future is dropped.
        struct Dropped(std::sync::mpsc::Sender<()>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (sender, dropped) = std::sync::mpsc::channel();
        let two = NonZeroUsize::new(2).expect("two");
        let server = tokio::spawn(serve(
            listener,
            two,
            NonZeroUsize::MAX,
            CancellationToken::new(),
            move |_lane| {
                let guard = Dropped(sender.clone());
                async move {
                    let _guard = guard;
                    std::future::pending::<io::Result<()>>().await
                }
            },
        ));
        // Served: a connection is accepted.
        TcpStream::connect(addr).await.expect("accepting");
        server.abort();
        let _ = server.await;
        for _ in 0..2 {
            dropped
                .recv_timeout(Duration::from_secs(10))
                .expect("each lane's future is dropped");
        }
        let refused = async {
            while TcpStream::connect(addr).await.is_ok() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), refused)
            .await
            .expect("the listener is closed");
    }

    #[tokio::test]
    async fn a_lane_that_fails_is_the_servers_error_and_the_others_still_end() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let accepting = CancellationToken::new();
        let stop = accepting.clone();
        let two = NonZeroUsize::new(2).expect("two");
        let server = tokio::spawn(serve(
            listener,
            two,
            NonZeroUsize::MAX,
            accepting.clone(),
            move |_lane| {
                let stop = stop.clone();
                async move {
                    if std::thread::current().name() == Some("chitin-lane-1") {
                        return Err(io::Error::other("lane one failed"));
                    }
                    stop.cancelled().await;
                    Ok(())
                }
            },
        ));
        accepting.cancel();
        let result = tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("ends")
            .expect("join");
        assert_eq!(
            result.expect_err("the failure is returned").to_string(),
            "lane one failed"
        );
    }

    fn at(s: &str) -> PeerClient {
        PeerClient::of(s.parse().expect("an address"))
    }

    #[test]
    fn one_ipv6_64_holds_one_clients_connections() {
        let peers = Peers {
            open: Arc::default(),
            most: 1,
            room: 100,
        };
        let held = peers
            .take(at("2001:db8:0:1::1"))
            .ok()
            .expect("the first is taken");
        assert!(
            matches!(peers.take(at("2001:db8:0:1::2")), Err(Full::Client)),
            "another address of the same /64 is the same client"
        );
        let other = peers.take(at("2001:db8:0:2::1"));
        assert!(other.is_ok(), "the next /64 is another client");
        drop(held);
        assert!(
            peers.take(at("2001:db8:0:1:ffff::9")).is_ok(),
            "a closed connection gives its slot back"
        );
    }

    #[test]
    fn many_clients_together_hold_no_more_than_the_servers_room() {
        let peers = Peers {
            open: Arc::default(),
            most: 2,
            room: 3,
        };
        let held: Vec<_> = ["192.0.2.1", "192.0.2.2", "192.0.2.3"]
            .map(|a| peers.take(at(a)).ok().expect("room for three"))
            .into();
        assert!(
            matches!(peers.take(at("192.0.2.4")), Err(Full::Server)),
            "a fourth client finds the server full"
        );
        assert!(server_full(3).contains("file descriptors for (3)"));
        drop(held);
        assert!(
            peers.take(at("192.0.2.4")).is_ok(),
            "closed ones give room back"
        );
    }

    #[test]
    fn the_connections_hold_their_share_of_the_open_files_limit() {
        let split = crate::descriptors::split();
        assert_eq!(connection_room(), split.connections);
        assert!(split.connections as u64 + crate::descriptors::RESERVED < split.limit);
    }

    /// `count` lanes that greet each connection with `greeting` and hold it open (so a lane
    /// counts it when the next is placed), at most `per_peer` per client; cancel the token to
    /// end them.
    fn holding(
        listener: TcpListener,
        count: NonZeroUsize,
        per_peer: NonZeroUsize,
        greeting: fn() -> String,
    ) -> (CancellationToken, tokio::task::JoinHandle<io::Result<()>>) {
        let accepting = CancellationToken::new();
        let stop = accepting.clone();
        let lanes = serve(
            listener,
            count,
            per_peer,
            accepting.clone(),
            move |mut lane| {
                let stop = stop.clone();
                async move {
                    let mut held = Vec::new();
                    loop {
                        let (mut stream, _) = tokio::select! {
                            () = stop.cancelled() => return Ok(()),
                            accepted = lane.accept() => accepted,
                        };
                        stream.write_all(greeting().as_bytes()).await?;
                        stream.flush().await?;
                        held.push(stream);
                    }
                }
            },
        );
        (accepting, tokio::spawn(lanes))
    }

    /// One lane that says `served` to each connection it holds, at most one per client.
    fn one_per_client(
        listener: TcpListener,
    ) -> (CancellationToken, tokio::task::JoinHandle<io::Result<()>>) {
        let one = NonZeroUsize::new(1).expect("one");
        holding(listener, one, one, || "served\n".to_owned())
    }

    /// Connect `socket` to `port` on 127.0.0.1 and read until the server closes it (refused) or
    /// says it is served (held open): the connection and what it was told.
    async fn told(socket: tokio::net::TcpSocket, port: u16) -> (TcpStream, String) {
        let mut stream = socket
            .connect(([127, 0, 0, 1], port).into())
            .await
            .expect("connect");
        let mut told = Vec::new();
        let read = async {
            let mut buf = [0; 1024];
            while told != b"served\n" {
                match stream.read(&mut buf).await.expect("read") {
                    0 => break,
                    n => told.extend_from_slice(&buf[..n]),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("answered or closed at once");
        (stream, String::from_utf8_lossy(&told).into_owned())
    }

    /// Stop accepting, and see the lanes end.
    async fn ended(accepting: CancellationToken, server: tokio::task::JoinHandle<io::Result<()>>) {
        accepting.cancel();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the lanes end when accepting stops")
            .expect("join")
            .expect("served");
    }

    /// A dual-stack listener sees IPv4 peers as IPv4-mapped IPv6 addresses, and any local
    /// process may bind any loopback address: each is still this machine, one client for its
    /// user, so a second address is no way around the bound.
    #[tokio::test]
    async fn every_loopback_address_is_one_client_for_its_user() {
        let listener = TcpListener::bind("[::ffff:127.0.0.1]:0")
            .await
            .expect("bind an IPv6 socket to a mapped loopback address");
        let port = listener.local_addr().expect("addr").port();
        let (accepting, server) = one_per_client(listener);
        let from = |address: &str| {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket
                .bind(format!("{address}:0").parse().expect("addr"))
                .expect("bind the client's address");
            socket
        };
        let (_held, first) = told(from("127.0.0.2"), port).await;
        assert_eq!(first, "served\n");
        for again in ["127.0.0.2", "127.0.0.3", "127.0.0.1"] {
            let (_, refused) = told(from(again), port).await;
            assert!(
                refused.starts_with("HTTP/1.1 503")
                    && refused.contains("from this machine")
                    && refused.contains("(at most 1 from one client"),
                "a second connection of this user from {again} is refused: {refused:?}"
            );
        }
        ended(accepting, server).await;
    }

    /// Every local process connects from the same loopback address; each user owning a socket is
    /// still a client of its own, so another user of the machine cannot spend this one's bounds.
    /// Making a socket as another user takes root: elsewhere only this user's side is shown.
    #[tokio::test]
    async fn each_local_user_is_a_client_of_its_own() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (accepting, server) = one_per_client(listener);
        let me = rustix::process::geteuid().as_raw();
        let (_held, first) = told(tokio::net::TcpSocket::new_v4().expect("socket"), port).await;
        assert_eq!(first, "served\n");
        let (_, refused) = told(tokio::net::TcpSocket::new_v4().expect("socket"), port).await;
        assert!(
            refused.contains(&format!("from this machine (uid {me}) (at most 1 ")),
            "this user's second connection is refused, naming the user: {refused:?}"
        );
        if me == 0 {
            // A socket is its creator's: made on a thread of its own that is `nobody` until it
            // ends (the user is per thread in Linux's own calls, which rustix makes).
            let nobody = std::thread::spawn(move || {
                let nobody = rustix::process::Uid::from_raw(65534);
                rustix::thread::set_thread_res_uid(nobody, nobody, None)
                    .expect("become nobody on this thread");
                std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect as nobody")
            })
            .join()
            .expect("the thread connects");
            nobody.set_nonblocking(true).expect("nonblocking");
            let mut nobody = TcpStream::from_std(nobody).expect("a tokio stream");
            let mut said = [0; 7];
            tokio::time::timeout(Duration::from_secs(10), nobody.read_exact(&mut said))
                .await
                .expect("answered at once")
                .expect("served, not closed");
            assert_eq!(
                &said, b"served\n",
                "another user on the same address is another client"
            );
            let (_, refused) = told(tokio::net::TcpSocket::new_v4().expect("socket"), port).await;
            assert!(
                refused.contains(&format!("(uid {me})")),
                "this user is still at its bound: {refused:?}"
            );
        } else {
            errln!("not root: the socket of another user was not made");
        }
        ended(accepting, server).await;
    }
}
