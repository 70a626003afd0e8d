//! Where a request may connect: the SSRF defence. Every address a request would reach is
//! classified; loopback, private, link-local, metadata, CGNAT, multicast and other non-public
//! addresses are refused unless the operator's policy admits them.
//!
//! Names are resolved once, every resolved address is checked, and the caller connects only to
//! the addresses returned: a name cannot resolve to a public address for the check and to a
//! private one for the connection (DNS rebinding).
//!
//! IPv6 addresses that carry an IPv4 address are judged by it: IPv4-mapped (`::ffff:a.b.c.d`)
//! and NAT64 (`64:ff9b::a.b.c.d`) addresses pass only when the IPv4 address would. Forms that
//! reach IPv4 through a tunnel or translator whose behaviour the host cannot see are refused
//! outright: 6to4 (`2002::/16`), Teredo (`2001::/32`), local-use NAT64 (`64:ff9b:1::/48`, where
//! the IPv4 address's position depends on the operator's prefix length) and the deprecated
//! IPv4-compatible (`::a.b.c.d`) and IPv4-translated (`::ffff:0:a.b.c.d`) forms, which nothing
//! legitimate uses and some stacks route as IPv4. Outside these, only global unicast IPv6
//! (`2000::/3`) passes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::error::HttpRefusal;

/// How an IPv4 address was reached: directly or embedded in an IPv6 address.
#[derive(Clone, Copy)]
enum Via {
    Direct,
    Mapped,
    Compatible,
    Translated,
    Nat64,
}

/// Declares the IPv4 classes with their names, and the names of each as seen through an IPv6
/// form (`IPv4-mapped loopback`), all `&'static str` so refusals carry them without allocating.
macro_rules! v4_classes {
    ($($class:ident => $name:literal,)*) => {
        /// A non-public IPv4 range.
        #[derive(Clone, Copy, Debug)]
        enum V4Class { $($class,)* }

        impl V4Class {
            fn name(self, via: Via) -> &'static str {
                match (self, via) {
                    $(
                        (Self::$class, Via::Direct) => $name,
                        (Self::$class, Via::Mapped) => concat!("IPv4-mapped ", $name),
                        (Self::$class, Via::Compatible) => concat!("IPv4-compatible ", $name),
                        (Self::$class, Via::Translated) => concat!("IPv4-translated ", $name),
                        (Self::$class, Via::Nat64) => concat!("NAT64 ", $name),
                    )*
                }
            }
        }
    };
}

v4_classes! {
    Unspecified => "unspecified",
    Loopback => "loopback",
    Private => "private",
    LinkLocal => "link-local",
    Metadata => "metadata",
    Cgnat => "CGNAT",
    IetfProtocol => "IETF protocol assignment",
    Documentation => "documentation",
    Benchmarking => "benchmarking",
    SixToFourRelay => "6to4 relay",
    Multicast => "multicast",
    Broadcast => "broadcast",
    Reserved => "reserved",
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)
}

const fn v6(segments: [u16; 8], len: u8) -> Ipv6Net {
    let [a, b, c, d, e, f, g, h] = segments;
    Ipv6Net::new_assert(Ipv6Addr::new(a, b, c, d, e, f, g, h), len)
}

/// Non-public IPv4 ranges, first match wins (so single metadata addresses come before the
/// ranges that hold them).
const V4_BLOCKED: [(Ipv4Net, V4Class); 20] = [
    // Cloud instance metadata: AWS/GCP/Azure/OCI, AWS ECS task metadata, Alibaba, Azure's
    // wireserver (a public-looking address only reachable, and dangerous, inside Azure).
    (v4(169, 254, 169, 254, 32), V4Class::Metadata),
    (v4(169, 254, 170, 2, 32), V4Class::Metadata),
    (v4(100, 100, 100, 200, 32), V4Class::Metadata),
    (v4(168, 63, 129, 16, 32), V4Class::Metadata),
    (v4(0, 0, 0, 0, 8), V4Class::Unspecified),
    (v4(127, 0, 0, 0, 8), V4Class::Loopback),
    (v4(10, 0, 0, 0, 8), V4Class::Private),
    (v4(172, 16, 0, 0, 12), V4Class::Private),
    (v4(192, 168, 0, 0, 16), V4Class::Private),
    (v4(169, 254, 0, 0, 16), V4Class::LinkLocal),
    (v4(100, 64, 0, 0, 10), V4Class::Cgnat),
    (v4(192, 0, 0, 0, 24), V4Class::IetfProtocol),
    (v4(192, 0, 2, 0, 24), V4Class::Documentation),
    (v4(198, 51, 100, 0, 24), V4Class::Documentation),
    (v4(203, 0, 113, 0, 24), V4Class::Documentation),
    (v4(198, 18, 0, 0, 15), V4Class::Benchmarking),
    (v4(192, 88, 99, 0, 24), V4Class::SixToFourRelay),
    (v4(224, 0, 0, 0, 4), V4Class::Multicast),
    (v4(255, 255, 255, 255, 32), V4Class::Broadcast),
    (v4(240, 0, 0, 0, 4), V4Class::Reserved),
];

/// IPv6 ranges refused whatever they carry, first match wins. Checked after the forms that
/// embed IPv4 and before the global-unicast rule.
const V6_BLOCKED: [(Ipv6Net, &str); 12] = [
    // AWS's IPv6 instance metadata, named for the refusal (the ULA rule would refuse it too).
    (v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254], 128), "metadata"),
    (v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), "NAT64 local-use"),
    (v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16), "6to4"),
    (v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32), "Teredo"),
    (v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), "documentation"),
    (v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), "documentation"),
    (
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23),
        "IETF protocol assignment",
    ),
    (v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), "discard-only"),
    (v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), "unique-local"),
    (v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), "link-local"),
    (v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), "site-local"),
    (v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), "multicast"),
];

/// Global unicast IPv6: the only IPv6 space (besides IPv4 forms judged by their IPv4 address)
/// a request may reach.
const V6_GLOBAL: Ipv6Net = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3);

fn classify_v4(ip: Ipv4Addr) -> Option<V4Class> {
    V4_BLOCKED
        .iter()
        .find(|(net, _)| net.contains(&ip))
        .map(|(_, class)| *class)
}

/// The blocked class of an address, or `None` for a public one a request may reach.
pub fn classify(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(ip) => classify_v4(ip).map(|c| c.name(Via::Direct)),
        IpAddr::V6(ip) => classify_v6(ip),
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    let s = ip.segments();
    // The last 32 bits, where every IPv4-carrying form below puts the IPv4 address.
    let embedded = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    let judged = |via: Via| classify_v4(embedded).map(|c| c.name(via));
    match s {
        // ::ffff:a.b.c.d reaches a.b.c.d.
        [0, 0, 0, 0, 0, 0xffff, _, _] => judged(Via::Mapped),
        // 64:ff9b::a.b.c.d goes through the well-known NAT64 prefix to a.b.c.d.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => judged(Via::Nat64),
        [0, 0, 0, 0, 0, 0, _, _] => {
            judged(Via::Compatible).or(Some("IPv4-compatible (deprecated)"))
        }
        [0, 0, 0, 0, 0xffff, 0, _, _] => {
            judged(Via::Translated).or(Some("IPv4-translated (deprecated)"))
        }
        _ => V6_BLOCKED
            .iter()
            .find(|(net, _)| net.contains(&ip))
            .map(|(_, class)| *class)
            .or_else(|| (!V6_GLOBAL.contains(&ip)).then_some("reserved")),
    }
}

/// The operator's exceptions to the SSRF rules: addresses and ranges a request may reach even
/// though they are not public (a lab network, a test server on loopback).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    allowed: Vec<IpNet>,
}

impl AddressPolicy {
    /// A policy that admits `allowed` besides public addresses.
    pub fn new(allowed: Vec<IpNet>) -> Self {
        Self { allowed }
    }

    /// Whether a request to `host` may connect to `ip`.
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), HttpRefusal> {
        let Some(class) = classify(ip) else {
            return Ok(());
        };
        // An exception for 127.0.0.1 also covers ::ffff:127.0.0.1, which reaches it.
        let canonical = ip.to_canonical();
        if self
            .allowed
            .iter()
            .any(|net| net.contains(&ip) || net.contains(&canonical))
        {
            return Ok(());
        }
        Err(HttpRefusal::BlockedAddress {
            host: host.to_owned(),
            addr: ip,
            class,
        })
    }

    /// Check every address a name resolved to; any blocked one refuses the lot, since the
    /// connection could land on it. Duplicates are dropped.
    fn check_all(
        &self,
        host: &str,
        addrs: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<Vec<SocketAddr>, HttpRefusal> {
        let mut out: Vec<SocketAddr> = Vec::new();
        for addr in addrs {
            self.check(host, addr.ip())?;
            if !out.contains(&addr) {
                out.push(addr);
            }
        }
        if out.is_empty() {
            return Err(HttpRefusal::Resolve {
                host: host.to_owned(),
                reason: "the name has no addresses".into(),
            });
        }
        Ok(out)
    }
}

/// Whether `name` is `localhost` or under it, names for this machine whatever DNS says
/// (RFC 6761).
fn is_local_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    name.eq_ignore_ascii_case("localhost")
        || name
            .get(name.len().saturating_sub(".localhost".len())..)
            .is_some_and(|tail| tail.eq_ignore_ascii_case(".localhost"))
}

/// The addresses a request to `host:port` may connect to: an IP literal is checked as is; a
/// name is resolved once and refused if any address is blocked. Connect only to the addresses
/// returned, never by resolving the name again.
pub async fn resolve(
    host: &url::Host<String>,
    port: u16,
    policy: &AddressPolicy,
) -> Result<Vec<SocketAddr>, HttpRefusal> {
    let name = match host {
        url::Host::Ipv4(ip) => {
            return policy.check_all(&ip.to_string(), [SocketAddr::new((*ip).into(), port)]);
        }
        url::Host::Ipv6(ip) => {
            return policy.check_all(&format!("[{ip}]"), [SocketAddr::new((*ip).into(), port)]);
        }
        url::Host::Domain(name) => name,
    };
    if is_local_name(name) {
        return Err(HttpRefusal::LocalName { host: name.clone() });
    }
    let addrs = tokio::net::lookup_host((name.as_str(), port))
        .await
        .map_err(|e| HttpRefusal::Resolve {
            host: name.clone(),
            reason: e.to_string(),
        })?;
    policy.check_all(name, addrs)
}

/// The policy stays plain data; the HTTP capability reads its address rules from it.
impl crate::policy::Policy {
    /// The SSRF exceptions for outbound HTTP (`http.allow_addresses`).
    pub fn address_policy(&self) -> AddressPolicy {
        AddressPolicy::new(self.http.allow_addresses.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn every_non_public_range_is_classified() {
        let rows = [
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("10.0.0.1", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "metadata"),
            ("169.254.170.2", "metadata"),
            ("100.100.100.200", "metadata"),
            ("168.63.129.16", "metadata"),
            ("169.254.1.1", "link-local"),
            ("100.64.0.1", "CGNAT"),
            ("100.127.255.255", "CGNAT"),
            ("192.0.0.8", "IETF protocol assignment"),
            ("192.0.2.1", "documentation"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.9", "documentation"),
            ("198.18.0.1", "benchmarking"),
            ("198.19.255.255", "benchmarking"),
            ("192.88.99.1", "6to4 relay"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"),
            ("255.255.255.255", "broadcast"),
            ("::", "unspecified"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "IPv4-mapped loopback"),
            ("::ffff:7f00:1", "IPv4-mapped loopback"),
            ("::ffff:169.254.169.254", "IPv4-mapped metadata"),
            ("::ffff:10.1.2.3", "IPv4-mapped private"),
            ("::127.0.0.1", "IPv4-compatible loopback"),
            ("::8.8.8.8", "IPv4-compatible (deprecated)"),
            ("::ffff:0:127.0.0.1", "IPv4-translated loopback"),
            ("::ffff:0:8.8.8.8", "IPv4-translated (deprecated)"),
            ("64:ff9b::7f00:1", "NAT64 loopback"),
            ("64:ff9b::169.254.169.254", "NAT64 metadata"),
            ("64:ff9b:1::a00:1", "NAT64 local-use"),
            ("2002:7f00:1::", "6to4"),
            ("2001:0:4136:e378::1", "Teredo"),
            ("2001:db8::1", "documentation"),
            ("3fff::1", "documentation"),
            ("2001:2::1", "IETF protocol assignment"),
            ("100::1", "discard-only"),
            ("fd00:ec2::254", "metadata"),
            ("fd00:ec2::253", "unique-local"),
            ("fc00::1", "unique-local"),
            ("fe80::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("4000::1", "reserved"),
            ("5f00::1", "reserved"),
        ];
        for (addr, class) in rows {
            assert_eq!(classify(ip(addr)), Some(class), "{addr}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for addr in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "169.253.255.255",
            "223.255.255.255",
            "2606:2800:220:1::1",
            "2a00:1450:4001::200e",
            "::ffff:93.184.216.34",
            "64:ff9b::93.184.216.34",
        ] {
            assert_eq!(classify(ip(addr)), None, "{addr}");
        }
    }

    #[test]
    fn the_policy_admits_listed_addresses_and_ranges_only() {
        let none = AddressPolicy::default();
        let err = none.check("127.0.0.1", ip("127.0.0.1")).unwrap_err();
        assert_eq!(err.kind(), "blocked-address");
        assert!(
            err.to_string()
                .contains("`127.0.0.1` is at 127.0.0.1, a loopback address"),
            "{err}"
        );
        let lab = AddressPolicy::new(vec![
            "127.0.0.1/32".parse().unwrap(),
            "10.9.0.0/16".parse().unwrap(),
        ]);
        lab.check("h", ip("127.0.0.1")).expect("listed address");
        lab.check("h", ip("::ffff:127.0.0.1"))
            .expect("mapped form of a listed address");
        lab.check("h", ip("10.9.8.7")).expect("in a listed range");
        assert!(lab.check("h", ip("127.0.0.2")).is_err());
        assert!(lab.check("h", ip("10.10.0.1")).is_err());
        assert!(lab.check("h", ip("169.254.169.254")).is_err());
        lab.check("h", ip("93.184.216.34")).expect("public");
    }

    #[test]
    fn one_blocked_address_among_many_refuses_the_name() {
        let addrs = [
            SocketAddr::new(ip("93.184.216.34"), 443),
            SocketAddr::new(ip("10.0.0.5"), 443),
        ];
        let err = AddressPolicy::default()
            .check_all("rebind.test", addrs)
            .unwrap_err();
        assert_eq!(
            err,
            HttpRefusal::BlockedAddress {
                host: "rebind.test".into(),
                addr: ip("10.0.0.5"),
                class: "private",
            }
        );
        let public = [
            SocketAddr::new(ip("93.184.216.34"), 443),
            SocketAddr::new(ip("93.184.216.34"), 443),
            SocketAddr::new(ip("2606:2800:220:1::1"), 443),
        ];
        let ok = AddressPolicy::default()
            .check_all("example.test", public)
            .expect("all public");
        assert_eq!(ok.len(), 2, "duplicates dropped");
        let empty = AddressPolicy::default()
            .check_all("x.test", [])
            .unwrap_err();
        assert_eq!(empty.kind(), "resolve-failed");
    }

    #[tokio::test]
    async fn every_url_spelling_of_a_blocked_address_is_refused() {
        // Each row: how a URL writes the host, and the class the refusal must name.
        let rows = [
            ("127.0.0.1", "loopback"),
            ("2130706433", "loopback"),
            ("0x7f000001", "loopback"),
            ("0x7f.1", "loopback"),
            ("0177.0.0.1", "loopback"),
            ("0177.1", "loopback"),
            ("127.1", "loopback"),
            ("127.0.1", "loopback"),
            ("[::1]", "loopback"),
            ("[0:0:0:0:0:0:0:1]", "loopback"),
            ("[::ffff:127.0.0.1]", "IPv4-mapped loopback"),
            ("[::ffff:7f00:1]", "IPv4-mapped loopback"),
            ("[64:ff9b::7f00:1]", "NAT64 loopback"),
            ("[::127.0.0.1]", "IPv4-compatible loopback"),
            ("0", "unspecified"),
            ("0.0.0.0", "unspecified"),
            ("[::]", "unspecified"),
            ("10.0.0.1", "private"),
            ("012.0.0.1", "private"),
            ("167772161", "private"),
            ("0xc0.0xa8.1.1", "private"),
            ("[::ffff:192.168.1.1]", "IPv4-mapped private"),
            ("169.254.169.254", "metadata"),
            ("2852039166", "metadata"),
            ("0xa9.0xfe.0xa9.0xfe", "metadata"),
            ("0251.0376.0251.0376", "metadata"),
            ("169.254.43518", "metadata"),
            ("[::ffff:a9fe:a9fe]", "IPv4-mapped metadata"),
            ("[fd00:ec2::254]", "metadata"),
            ("100.64.0.1", "CGNAT"),
            ("224.0.0.1", "multicast"),
            ("[ff02::1]", "multicast"),
            ("[fe80::1]", "link-local"),
        ];
        let none = AddressPolicy::default();
        for (spelling, class) in rows {
            let url = url::Url::parse(&format!("https://{spelling}/")).expect(spelling);
            let host = url.host().expect(spelling).to_owned();
            let err = resolve(&host, 443, &none).await.unwrap_err();
            assert!(
                matches!(&err, HttpRefusal::BlockedAddress { class: c, .. } if *c == class),
                "{spelling}: {err}"
            );
            assert!(
                err.to_string().contains(&format!("a {class} address")),
                "{err}"
            );
        }
        for public in ["93.184.216.34", "1572395042", "[2606:2800:220:1::1]"] {
            let url = url::Url::parse(&format!("https://{public}/")).unwrap();
            let host = url.host().unwrap().to_owned();
            resolve(&host, 443, &none)
                .await
                .unwrap_or_else(|e| panic!("{public}: {e}"));
        }
    }

    #[tokio::test]
    async fn literals_are_checked_and_localhost_is_never_resolved() {
        let none = AddressPolicy::default();
        let host = |s: &str| url::Host::parse(s).unwrap();
        for literal in ["127.0.0.1", "[::1]", "[::ffff:169.254.169.254]", "0.0.0.0"] {
            let err = resolve(&host(literal), 443, &none).await.unwrap_err();
            assert_eq!(err.kind(), "blocked-address", "{literal}");
        }
        for name in ["localhost", "LOCALHOST.", "api.localhost", "a.b.localhost"] {
            let err = resolve(&host(name), 443, &none).await.unwrap_err();
            assert!(
                matches!(&err, HttpRefusal::LocalName { .. }),
                "{name}: {err}"
            );
            assert!(err.to_string().contains("names this machine"), "{err}");
        }
        let lab = AddressPolicy::new(vec!["127.0.0.1/32".parse().unwrap()]);
        let addrs = resolve(&host("127.0.0.1"), 8443, &lab).await.unwrap();
        assert_eq!(addrs, vec![SocketAddr::new(ip("127.0.0.1"), 8443)]);
        let public = resolve(&host("[2606:2800:220:1::1]"), 443, &none).await;
        assert_eq!(public.unwrap().len(), 1);
        assert!(!is_local_name("notlocalhost"));
        assert!(!is_local_name("localhost.example.com"));
    }
}
