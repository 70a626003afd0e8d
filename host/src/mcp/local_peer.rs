//! Who opened a connection from this machine: the kernel's socket table (`sock_diag(7)`) names
//! the user owning the peer's end. The HTTP front counts a local peer by its user as well as its
//! address, because every local process reaches a loopback listener from the same address:
//! counted by address alone, another user of the machine could spend the request rate and the
//! connections of the user whose agent calls in, with no token at all.

use std::io;
use std::net::{IpAddr, SocketAddr};

use netlink_packet_core::{NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_sys::protocols::NETLINK_SOCK_DIAG;
use netlink_sys::{Socket, SocketAddr as KernelAddr};

/// `INET_DIAG_NOCOOKIE`: the socket is named by its addresses alone.
const NO_COOKIE: [u8; 8] = [0xff; 8];

/// Room for one answer: an `inet_diag_msg` (72 bytes) behind its header, no attributes asked.
const ANSWER_BYTES: usize = 1024;

/// Asks the kernel which user owns the far end of a TCP connection from this machine.
pub struct SocketOwners {
    /// `None` where the kernel or a sandbox refuses `NETLINK_SOCK_DIAG`: no owner is known.
    socket: Option<Socket>,
    sequence: u32,
    answer: Vec<u8>,
}

impl SocketOwners {
    /// A connection to the kernel's socket table, or, where it cannot be had, one that knows no
    /// owner (every local peer is then counted by its address alone, as before).
    pub fn open() -> Self {
        let socket = Socket::new(NETLINK_SOCK_DIAG).and_then(|mut socket| {
            socket.bind_auto()?;
            socket.connect(&KernelAddr::new(0, 0))?;
            Ok(socket)
        });
        let socket = socket
            .inspect_err(|e| {
                tracing::warn!(
                    error = %e,
                    "cannot read the kernel's socket table (sock_diag): local HTTP clients are \
                     counted by address only, so every local user shares one client's bounds"
                );
            })
            .ok();
        Self {
            socket,
            sequence: 0,
            answer: vec![0; ANSWER_BYTES],
        }
    }

    /// The user owning the socket at `peer` that is connected to `local`, when `peer` is on this
    /// machine (a loopback address, or the listener's own) and the kernel still lists it.
    pub fn owner(&mut self, peer: SocketAddr, local: SocketAddr) -> Option<u32> {
        let (peer_ip, local_ip) = (unmapped(peer.ip()), unmapped(local.ip()));
        if !(peer_ip.is_loopback() || peer_ip == local_ip) {
            return None;
        }
        let (family, mut id) = match (peer_ip, local_ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) => (AF_INET, SocketId::new_v4()),
            (IpAddr::V6(_), IpAddr::V6(_)) => (AF_INET6, SocketId::new_v6()),
            _ => return None,
        };
        // The peer's own socket: its source is the peer, its destination the listener.
        id.source_address = peer_ip;
        id.source_port = peer.port();
        id.destination_address = local_ip;
        id.destination_port = local.port();
        id.cookie = NO_COOKIE;
        let request = InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::all(),
            socket_id: id,
        };
        match self.ask(request) {
            Ok(owner) => owner,
            Err(e) => {
                tracing::debug!(error = %e, %peer, "cannot look up the owner of a local peer");
                None
            }
        }
    }

    /// Send `request` and read its answer: the owner, or `None` when no process holds the
    /// socket.
    fn ask(&mut self, request: InetRequest) -> io::Result<Option<u32>> {
        let Some(socket) = &self.socket else {
            return Ok(None);
        };
        self.sequence = self.sequence.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST;
        header.sequence_number = self.sequence;
        let mut message = NetlinkMessage::new(header, SockDiagMessage::InetRequest(request).into());
        message.finalize();
        let mut bytes = vec![0; message.buffer_len()];
        message.serialize(&mut bytes);
        socket.send(&bytes, 0)?;
        // The kernel answers within the send, so the answer is waiting: never block for it. An
        // answer to an earlier request (one whose read failed) is skipped by its number.
        loop {
            let read = socket.recv(&mut &mut self.answer[..], libc::MSG_DONTWAIT)?;
            let answer = self.answer.get(..read).ok_or_else(|| {
                io::Error::other(format!("an answer of {read} bytes was cut short"))
            })?;
            let answer = NetlinkMessage::<SockDiagMessage>::deserialize(answer)
                .map_err(|e| io::Error::other(format!("an answer that does not parse: {e}")))?;
            if answer.header.sequence_number != self.sequence {
                continue;
            }
            return match answer.payload {
                // A socket no process holds any more (closed: orphaned, or in TIME_WAIT, which
                // the kernel reports as root's) has no owner: what it sent before it closed must
                // not count against the user it names.
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(found)) => {
                    Ok((found.header.inode != 0).then_some(found.header.uid))
                }
                // ENOENT: the peer closed its end before it was looked up.
                NetlinkPayload::Error(_) => Ok(None),
                other => Err(io::Error::other(format!("an unexpected answer: {other:?}"))),
            };
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it maps (a dual-stack listener's view).
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn effective_uid() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    /// A client and the listener's accepted end, with both of their addresses.
    fn connected(bind: &str) -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind(bind).expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (accepted, _) = listener.accept().expect("accept");
        (client, accepted)
    }

    #[test]
    fn the_owner_of_a_loopback_peer_is_the_user_that_opened_it() {
        let mut owners = SocketOwners::open();
        for bind in ["127.0.0.1:0", "[::1]:0", "[::ffff:127.0.0.1]:0"] {
            let (_client, accepted) = connected(bind);
            let peer = accepted.peer_addr().expect("peer");
            let local = accepted.local_addr().expect("local");
            assert_eq!(
                owners.owner(peer, local),
                Some(effective_uid()),
                "{bind}: {peer} → {local}"
            );
        }
    }

    #[test]
    fn a_peer_that_has_gone_or_is_elsewhere_has_no_owner() {
        let mut owners = SocketOwners::open();
        let (client, accepted) = connected("127.0.0.1:0");
        let local = accepted.local_addr().expect("local");
        let peer = accepted.peer_addr().expect("peer");
        // No socket of that address pair: another port.
        let unknown = SocketAddr::new(peer.ip(), peer.port().wrapping_add(1).max(1));
        assert_eq!(owners.owner(unknown, local), None);
        // Another machine's address is never looked up.
        let remote: SocketAddr = "192.0.2.1:40000".parse().expect("addr");
        assert_eq!(owners.owner(remote, local), None);
        // The answers stay in step: the next lookup is still right.
        assert_eq!(owners.owner(peer, local), Some(effective_uid()));
        // Closed by its process, the peer's socket lingers in the kernel's table, owned by no
        // one: whatever it sent is not counted against the user it was opened by.
        drop(client);
        assert_eq!(owners.owner(peer, local), None);
    }
}
