//! The client an HTTP peer is counted as by the per-client bounds (request rate, open
//! connections, sessions, tasks).
//!
//! - An IPv4 address is one client; an IPv4-mapped IPv6 address, as a dual-stack listener sees
//!   IPv4 peers, is the IPv4 client it maps.
//! - An IPv6 address is not: one host is routinely given a whole /64 and may pick any of its
//!   2^64 addresses for each connection, so bounds keyed by the full address would bound
//!   nothing. Such a peer is counted by its /64, the smallest prefix an end site is given
//!   (RFC 6177). Link-local peers all share `fe80::/64`, so the bounds hold for the link as a
//!   whole: a neighbour may pick any link-local address too.
//! - A peer on this machine is one client for each user owning a socket
//!   ([`crate::mcp::local_peer`]), whichever address it connects from: every loopback address
//!   (all of `127.0.0.0/8`, and `::1`) is this machine's, and any local process may bind any of
//!   them, so counted by address a local user would be a new client at each. Counted by address
//!   alone, another user could spend the bounds of the user whose agent calls in, with no token
//!   at all.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The network every peer on this machine is counted in.
const THIS_MACHINE: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Bits of an IPv6 address that name the client's network.
pub const IPV6_CLIENT_PREFIX: u32 = 64;

/// A peer reduced to the client it is counted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerClient {
    net: IpAddr,
    /// The user owning the peer's socket, for a peer on this machine whose owner is known.
    owner: Option<u32>,
}

impl PeerClient {
    /// The client a peer at address `peer` is counted as, its owner not known.
    pub fn of(peer: IpAddr) -> Self {
        let net = match peer {
            IpAddr::V4(v4) if v4.is_loopback() => THIS_MACHINE,
            IpAddr::V4(_) => peer,
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => return Self::of(IpAddr::V4(v4)),
                None if v6.is_loopback() => THIS_MACHINE,
                None => {
                    let mask = u128::MAX << (128 - IPV6_CLIENT_PREFIX);
                    IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & mask))
                }
            },
        };
        Self { net, owner: None }
    }

    /// The same client, counted apart for each user owning its socket (`None`: not known). A
    /// peer whose owner is known is on this machine, whichever of its addresses it came from.
    pub fn owned_by(self, owner: Option<u32>) -> Self {
        match owner {
            Some(_) => Self {
                net: THIS_MACHINE,
                owner,
            },
            None => Self { owner, ..self },
        }
    }
}

impl fmt::Display for PeerClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.net {
            THIS_MACHINE => write!(f, "this machine")?,
            IpAddr::V6(v6) => write!(f, "{v6}/{IPV6_CLIENT_PREFIX}")?,
            ip => write!(f, "{ip}")?,
        }
        match self.owner {
            Some(uid) => write!(f, " (uid {uid})"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(s: &str) -> PeerClient {
        PeerClient::of(s.parse().expect("an address"))
    }

    #[test]
    fn every_address_of_one_ipv6_64_is_one_client() {
        let a = client("2001:db8:1:2::1");
        assert_eq!(a, client("2001:db8:1:2:ffff:ffff:ffff:ffff"));
        assert_eq!(a, client("2001:db8:1:2:dead:beef:0:7"));
        assert_eq!(a.to_string(), "2001:db8:1:2::/64");
    }

    #[test]
    fn neighbouring_ipv6_64s_are_different_clients() {
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db8:1:3::1"));
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db9:1:2::1"));
    }

    #[test]
    fn an_ipv4_address_is_one_client_however_it_arrives() {
        assert_eq!(client("192.0.2.7"), client("::ffff:192.0.2.7"));
        assert_ne!(client("192.0.2.7"), client("192.0.2.8"));
        assert_eq!(client("::ffff:192.0.2.7").to_string(), "192.0.2.7");
    }

    #[test]
    fn every_loopback_address_is_this_machine() {
        let local = client("127.0.0.1");
        for other in ["127.0.0.2", "127.255.255.254", "::1", "::ffff:127.0.0.9"] {
            assert_eq!(client(other), local, "{other}");
        }
        assert_eq!(local.to_string(), "this machine");
        assert_ne!(client("::2"), local);
    }

    #[test]
    fn each_user_on_this_machine_is_one_client_from_any_address() {
        let local = client("127.0.0.1");
        let (a, b) = (local.owned_by(Some(1000)), local.owned_by(Some(1001)));
        assert_ne!(a, b);
        assert_ne!(a, local, "an unknown owner is not any user's");
        assert_eq!(a, client("::ffff:127.0.0.3").owned_by(Some(1000)));
        // The listener's own address, which a local process may connect from too.
        assert_eq!(a, client("192.0.2.7").owned_by(Some(1000)));
        assert_eq!(a.to_string(), "this machine (uid 1000)");
        assert_eq!(local.owned_by(None), local);
    }
}
