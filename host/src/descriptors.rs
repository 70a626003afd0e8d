//! The process's file descriptors: its open-files limit, raised once to the hard limit (a
//! service's soft one is often 1024), and split so that neither tool calls nor HTTP connections
//! can take what the other, and the host itself (the database, components, the compile cache,
//! processes' pipes), needs. Past its share a call is stopped and a connection refused, rather
//! than every part of the server failing with "too many open files".

use std::sync::OnceLock;

/// Descriptors kept for the host itself, beside the calls' and the connections' shares.
pub const RESERVED: u64 = 256;

/// The fewest descriptors each share holds, however low the limit.
const LEAST_SHARE: u64 = 64;

/// How the open-files limit is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// The open-files limit in force.
    pub limit: u64,
    /// Files all tool calls of this process may hold open together.
    pub calls: usize,
    /// Connections the HTTP server holds in all.
    pub connections: usize,
}

impl Split {
    /// Half the limit for the calls' files, the rest less [`RESERVED`] for connections.
    pub fn of(limit: u64) -> Self {
        let calls = (limit / 2).max(LEAST_SHARE);
        let connections = limit
            .saturating_sub(calls)
            .saturating_sub(RESERVED)
            .max(LEAST_SHARE);
        Self {
            limit,
            calls: usize::try_from(calls).unwrap_or(usize::MAX),
            connections: usize::try_from(connections).unwrap_or(usize::MAX),
        }
    }
}

/// The split of this process's limit, raising the limit the first time.
pub fn split() -> Split {
    static SPLIT: OnceLock<Split> = OnceLock::new();
    *SPLIT.get_or_init(|| Split::of(raise()))
}

/// Raise the soft open-files limit to the hard one; the limit then in force.
fn raise() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    // Unlimited (`None`) is taken as a large finite number: the kernel's own `nr_open` bounds it.
    let hard = limit.maximum.unwrap_or(1 << 20);
    match setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(hard),
            maximum: limit.maximum,
        },
    ) {
        Ok(()) => hard,
        Err(_) => limit.current.unwrap_or(hard),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_raised_and_split_with_the_reserve_left_over() {
        let split = split();
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(
            limit.current, limit.maximum,
            "the soft limit is raised to the hard one"
        );
        assert_eq!(split.limit, limit.current.unwrap_or(1 << 20));
        assert_eq!(
            split.calls as u64 + split.connections as u64 + RESERVED,
            split.limit
        );
    }

    #[test]
    fn each_share_keeps_a_floor_however_low_the_limit() {
        assert_eq!(
            Split::of(1024),
            Split {
                limit: 1024,
                calls: 512,
                connections: 256
            }
        );
        let tiny = Split::of(100);
        assert_eq!((tiny.calls, tiny.connections), (64, 64));
    }
}
