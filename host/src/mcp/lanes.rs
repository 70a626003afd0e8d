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
use std::net::{IpAddr, SocketAddr};
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

/// How long the acceptor waits after an error that is not the peer's (too many open files)
/// before it accepts again, so that it does not spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Lanes by default: one per core the process may use.
pub fn default_count() -> NonZeroUsize {
    std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
}

/// Accept on `listener` until `accepting` is cancelled, serving each connection on one of
/// `count` lanes with the future `serve_lane` makes from the lane's listener (on the lane's
/// thread). A peer address with `per_peer` connections open has its next one closed at once. Returns once every lane's future has ended; the lanes' runtimes are kept running
/// until then, so a task one lane started that another lane waits for (an MCP session's
/// worker) is never dropped early. Dropped before that, it ends the lanes and their
/// connections.
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
    };
    let (stop, acceptor_ended) = (accepting, all_ended.clone());
    // Once it stops, the lanes' channels close; that tells a lane nothing, its future ends on
    // `accepting` itself.
    let spawned = std::thread::Builder::new()
        .name("chitin-accept".into())
        .spawn(move || {
            acceptor.block_on(async move {
                tokio::select! {
                    () = accept(&listener, &lanes, &peers, &stop) => {}
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

/// Open connections by peer address, and the most one address may hold: without a bound one
/// peer opening connections and sending nothing takes every file descriptor of the process,
/// and then no client is accepted and no tool can open a file.
struct Peers {
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
    most: usize,
}

/// What a peer over its bound of `most` connections is told before its connection is closed.
fn too_many_connections(most: usize) -> String {
    let body = format!(
        "too many open connections from this address (at most {most}): close idle ones, or \
         start the server with a higher --max-connections-per-client\n"
    );
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

impl Peers {
    /// A slot for one more connection of `peer`, unless it holds the most already.
    fn take(&self, peer: IpAddr) -> Option<PeerSlot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(peer).or_default();
        if *count >= self.most {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            open: self.open.clone(),
            peer,
        })
    }
}

/// One open connection of a peer, counted until it is dropped.
struct PeerSlot {
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
    peer: IpAddr,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.peer) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.peer);
            }
        }
    }
}

/// Hand each accepted connection to the lane with the fewest open, until `accepting` is
/// cancelled; close at once a connection from a peer holding the most `peers` allows.
async fn accept(
    listener: &TcpListener,
    lanes: &[Lane],
    peers: &Peers,
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
        let Some(slot) = peers.take(peer.ip()) else {
            // Best effort: the socket's send buffer is empty, and the peer is not waited for.
            let _ = stream.try_write(too_many_connections(peers.most).as_bytes());
            tracing::debug!(%peer, "too many open connections from this address; closed");
            continue;
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
                            _slot: slot,
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
    _slot: PeerSlot,
}

impl LaneStream {
    /// The socket itself.
    pub fn get_ref(&self) -> &TcpStream {
        &self.stream
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
        let accepting = CancellationToken::new();
        let stop = accepting.clone();
        let two = NonZeroUsize::new(2).expect("two");
        let server = tokio::spawn(serve(
            listener,
            two,
            NonZeroUsize::MAX,
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
                        let name = std::thread::current().name().unwrap_or("").to_owned();
                        stream.write_all(name.as_bytes()).await?;
                        stream.flush().await?;
                        // Held open, so the lane counts it when the next one is placed.
                        held.push(stream);
                    }
                }
            },
        ));
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
        accepting.cancel();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the lanes end when accepting stops")
            .expect("join")
            .expect("served");
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
}
