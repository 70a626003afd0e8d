//! Outbound request rate limits per (user, tool), or per (user, library) for a library's
//! requests: sliding windows of a minute and an hour, kept in the state database so they hold
//! across every chitin process on a data directory.
//!
//! Hand-rolled rather than `governor` (which the host uses elsewhere): GCRA smooths a rate and
//! cannot say "60 in any minute" with the exact time the oldest request leaves the window,
//! which is what a refused caller is told. Storage is bounded: a key keeps at most its hourly
//! limit of timestamps, and keys idle for an hour are dropped. When the database cannot be
//! reached the request is refused, never sent unlimited.
//!
//! Counting a request is a durable commit. When a key's requests come faster than one a
//! [`LEASE`], one commit reserves several slots, and the process hands them out without
//! another until the lease ends: the reserved slots are stamped at its end, so each request is
//! counted at or after the time it was made and no window ever holds more than its limit. A
//! reservation doubles while each is used up within its lease (to at most [`MAX_LEASE`] slots,
//! and an eighth of a minute's limit); slots a lease leaves unused go back at the key's next
//! commit. A slot goes only to a request whose limits are no tighter than those it was reserved
//! under: two grants may count under one key, and the tighter one must not spend room the
//! looser one's window check found.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chitin_registry::manifest::http::RateLimitRequest;

use super::error::HttpRefusal;
use super::lock;
use crate::services::Services;
use crate::state_db::{StateDb, StateError};

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// How long a reservation's slots are handed out; they are stamped at its end.
const LEASE: Duration = Duration::from_secs(1);
/// The most slots one commit reserves.
const MAX_LEASE: u32 = 16;

pub use crate::policy::RateLimits;

impl RateLimits {
    /// What a manifest asked for, each window clamped to the policy's ceiling; a window it did
    /// not ask about takes the ceiling.
    pub fn resolve(asked: Option<&RateLimitRequest>, policy_max: RateLimits) -> RateLimits {
        let clamp = |asked: Option<u32>, max: u32| asked.map_or(max, |n| n.min(max));
        RateLimits {
            per_minute: clamp(asked.and_then(|a| a.per_minute), policy_max.per_minute),
            per_hour: clamp(asked.and_then(|a| a.per_hour), policy_max.per_hour),
        }
    }
}

/// Sliding-window counters for every (user, tool), shared by every process on the database.
#[derive(Debug)]
pub struct RateLimiter {
    db: Arc<StateDb>,
    /// When this process last dropped idle keys, in ms since the epoch.
    last_sweep: Mutex<Option<u64>>,
    /// Each (user, tool)'s reservation. A key's lock is held while its window is updated, so a
    /// request waiting on it takes a slot that update reserved.
    leases: Mutex<HashMap<(String, String), SharedLease>>,
}

/// One key's reservation, locked while its window is updated.
type SharedLease = Arc<Mutex<Lease>>;

/// The slots one commit reserved for this process beyond the request that made it.
#[derive(Debug, Default)]
struct Lease {
    /// When it was taken, in ms since the epoch.
    at: u64,
    /// Slots not handed out yet; each is stamped `at` + [`LEASE`].
    left: u32,
    /// The slots the commit took, its own request's included; 0 before the first.
    taken: u32,
    /// The limits the commit checked the windows against.
    limits: RateLimits,
}

impl Lease {
    /// Hand out one of its slots to a request at `now` under `limits`, if it has one, has not
    /// ended, and was reserved under limits no looser than the request's.
    fn take(&mut self, now: u64, limits: RateLimits) -> bool {
        let live = self.at <= now && now <= self.at.saturating_add(millis(LEASE));
        let within =
            self.limits.per_minute <= limits.per_minute && self.limits.per_hour <= limits.per_hour;
        let taken = live && within && self.left > 0;
        if taken {
            self.left -= 1;
        }
        taken
    }

    /// The slots the next commit, at `now`, should reserve: twice the last if that was used
    /// up within its lease, else one.
    fn next(&self, now: u64, limits: RateLimits) -> u32 {
        let most = MAX_LEASE
            .min(limits.per_minute / 8)
            .min(limits.per_hour / 64)
            .max(1);
        let used_up =
            self.taken > 0 && self.left == 0 && self.at <= now && now - self.at <= millis(LEASE);
        if used_up {
            self.taken.saturating_mul(2).min(most)
        } else {
            1
        }
    }
}

/// What one commit of a key's window decided.
enum Counted {
    /// The request is counted, and this many slots reserved in all.
    Granted(u32),
    /// The request is refused; the commit only gave back unused slots.
    Refused(HttpRefusal),
}

/// The rate limiter is this capability's service; the core keeps it without knowing it.
impl Services {
    /// The outbound HTTP rate limiter, shared by every call of this host (limits are per user
    /// and tool, across calls).
    pub fn http_rate(&self) -> Arc<RateLimiter> {
        let started = self.shared(|s| Ok::<_, Infallible>(RateLimiter::new(s.state().clone())));
        match started {
            Ok(limiter) => limiter,
            Err(never) => match never {},
        }
    }
}

impl From<StateError> for HttpRefusal {
    fn from(e: StateError) -> Self {
        HttpRefusal::RateStore {
            reason: e.to_string(),
        }
    }
}

impl RateLimiter {
    /// A limiter keeping its windows in `db`.
    pub fn new(db: Arc<StateDb>) -> Self {
        Self {
            db,
            last_sweep: Mutex::new(None),
            leases: Mutex::new(HashMap::new()),
        }
    }

    /// Count a request by `tool` for `user` under `limits` at `now` against a slot this process
    /// reserved earlier, without touching the database; false when there is none to take at once
    /// (then [`RateLimiter::check`] decides).
    pub fn take_reserved(
        &self,
        user: &str,
        tool: &str,
        limits: RateLimits,
        now: SystemTime,
    ) -> bool {
        let now = millis(now.duration_since(UNIX_EPOCH).unwrap_or_default());
        let lease = lock(&self.leases)
            .get(&(user.to_owned(), tool.to_owned()))
            .cloned();
        // A key being committed is skipped rather than waited for: the caller is on the
        // runtime's thread.
        lease.is_some_and(|lease| {
            lease
                .try_lock()
                .is_ok_and(|mut lease| lease.take(now, limits))
        })
    }

    /// The reservation of (`user`, `tool`), created empty.
    fn lease(&self, user: &str, tool: &str) -> SharedLease {
        lock(&self.leases)
            .entry((user.to_owned(), tool.to_owned()))
            .or_default()
            .clone()
    }

    /// Count a request by `tool` for `user` at `now`, or refuse it with the time until the full
    /// window has room. A refused request is not counted.
    pub fn check(
        &self,
        user: &str,
        tool: &str,
        limits: RateLimits,
        now: SystemTime,
    ) -> Result<(), HttpRefusal> {
        let now = millis(now.duration_since(UNIX_EPOCH).unwrap_or_default());
        let sweep = {
            let mut last = lock(&self.last_sweep);
            let due = last.is_none_or(|t| now.saturating_sub(t) >= millis(MINUTE));
            if due {
                *last = Some(now);
            }
            due
        };
        if sweep {
            let idle = |stamps: &[u8]| {
                let last = decode(stamps).last().copied().unwrap_or_default();
                now.saturating_sub(last) >= millis(HOUR)
            };
            self.db.rate_sweep(&idle)?;
            // A lease an hour old has no slot left in any window.
            lock(&self.leases).retain(|_, lease| {
                lease
                    .try_lock()
                    .map_or(true, |l| now.saturating_sub(l.at) < millis(HOUR))
            });
        }
        let lease = self.lease(user, tool);
        let mut lease = lock(&lease);
        if lease.take(now, limits) {
            return Ok(());
        }
        let want = lease.next(now, limits);
        let (unused, stamped) = (lease.left, lease.at.saturating_add(millis(LEASE)));
        // The record holds request times in milliseconds since the Unix epoch, as
        // little-endian u64s, oldest first.
        let counted = self.db.rate_update(user, tool, |stored| {
            let mut stamps = stored.map(decode).unwrap_or_default();
            // The slots this process's last lease left unused go back.
            let mut back = 0;
            while back < unused {
                let Some(at) = stamps.iter().rposition(|t| *t == stamped) else {
                    break;
                };
                stamps.remove(at);
                back += 1;
            }
            stamps.retain(|t| now.saturating_sub(*t) < millis(HOUR));
            match room(&stamps, now, limits) {
                Ok(room) => {
                    let granted = want.min(room);
                    // Callers take `now` before the lock, so a later caller can arrive first;
                    // keep order.
                    let at = stamps.partition_point(|t| *t <= now);
                    stamps.insert(at, now);
                    let ends = now.saturating_add(millis(LEASE));
                    let at = stamps.partition_point(|t| *t <= ends);
                    stamps.splice(at..at, (1..granted).map(|_| ends));
                    Ok((encode(&stamps), Counted::Granted(granted)))
                }
                // Nothing to give back: nothing to write.
                Err(refused) if back == 0 => Err(refused),
                Err(refused) => Ok((encode(&stamps), Counted::Refused(refused))),
            }
        });
        match counted {
            Ok(Counted::Granted(granted)) => {
                *lease = Lease {
                    at: now,
                    left: granted - 1,
                    taken: granted,
                    limits,
                };
                Ok(())
            }
            Ok(Counted::Refused(refused)) => {
                *lease = Lease::default();
                Err(refused)
            }
            Err(refused) => Err(refused),
        }
    }

    /// How many (user, tool) keys hold timestamps (for tests of the storage bound).
    #[cfg(test)]
    fn keys(&self) -> usize {
        self.db.rate_len().unwrap_or_default()
    }

    /// The timestamps stored for (`user`, `tool`) (for tests; rewrites them unchanged).
    #[cfg(test)]
    fn stamps(&self, user: &str, tool: &str) -> Vec<u64> {
        self.db
            .rate_update(user, tool, |stored| {
                let stored = stored.unwrap_or_default().to_vec();
                let stamps = decode(&stored);
                Ok::<_, StateError>((stored, stamps))
            })
            .expect("read the stamps")
    }
}

/// How many more requests the windows take at `now` (at least one), or the refusal naming the
/// full window and when it has room.
fn room(stamps: &[u64], now: u64, limits: RateLimits) -> Result<u32, HttpRefusal> {
    let mut room = u32::MAX;
    for (name, window, limit) in [
        ("minute", MINUTE, limits.per_minute),
        ("hour", HOUR, limits.per_hour),
    ] {
        // Timestamps within `window` of now are the ones counted; the first of them is the one
        // whose leaving frees a slot. A reserved slot's stamp may lie ahead of now.
        let window = millis(window);
        let start = stamps.partition_point(|t| now.saturating_sub(*t) >= window);
        let in_window = u32::try_from(stamps.len() - start).unwrap_or(u32::MAX);
        if in_window >= limit {
            let leaves = stamps
                .get((in_window - limit) as usize + start)
                .map_or(window, |t| t.saturating_add(window).saturating_sub(now));
            return Err(HttpRefusal::RateLimited {
                window: name,
                limit,
                retry_after_secs: retry_secs(Duration::from_millis(leaves)),
            });
        }
        room = room.min(limit - in_window);
    }
    Ok(room)
}

/// Whole milliseconds of `d`.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Timestamps from their stored form; a trailing partial value (never written) is ignored.
fn decode(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect()
}

fn encode(stamps: &[u64]) -> Vec<u8> {
    stamps.iter().flat_map(|t| t.to_le_bytes()).collect()
}

/// Whole seconds to wait, rounded up and at least one, so retrying after that long succeeds.
fn retry_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A limiter over a fresh database; the directory lives as long as the limiter is used.
    fn limiter() -> (tempfile::TempDir, RateLimiter) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Arc::new(StateDb::new(&dir.path().join("chitin.db")));
        (dir, RateLimiter::new(db))
    }

    const SMALL: RateLimits = RateLimits {
        per_minute: 3,
        per_hour: 5,
    };

    fn window_of(err: HttpRefusal) -> (&'static str, u64) {
        match err {
            HttpRefusal::RateLimited {
                window,
                retry_after_secs,
                ..
            } => (window, retry_after_secs),
            other => panic!("expected rate-limited, got {other}"),
        }
    }

    #[test]
    fn sixty_pass_then_the_sixty_first_is_refused_until_the_oldest_leaves() {
        let (_dir, limiter) = limiter();
        let t0 = SystemTime::now();
        let limits = RateLimits::default();
        for i in 0..60 {
            let at = t0 + Duration::from_millis(500 * i);
            limiter
                .check("u", "http", limits, at)
                .expect("within the limit");
        }
        let at = t0 + Duration::from_secs(30);
        let err = limiter.check("u", "http", limits, at).unwrap_err();
        assert_eq!(err.kind(), "rate-limited");
        assert!(
            err.to_string()
                .contains("rate limit of 60 requests per minute reached; retry in 30 s"),
            "{err}"
        );
        let (window, retry) = window_of(err);
        assert_eq!((window, retry), ("minute", 30));
        assert!(retry <= 60);
        // The first request (at t0) leaves the window at t0 + 60 s: one slot frees.
        let later = t0 + Duration::from_secs(60);
        limiter
            .check("u", "http", limits, later)
            .expect("the oldest expired");
        assert!(limiter.check("u", "http", limits, later).is_err());
    }

    #[test]
    fn the_retry_time_is_rounded_up_and_exact() {
        let (_dir, limiter) = limiter();
        let t0 = SystemTime::now();
        for _ in 0..3 {
            limiter.check("u", "t", SMALL, t0).unwrap();
        }
        let at = t0 + Duration::from_millis(59_001);
        assert_eq!(
            window_of(limiter.check("u", "t", SMALL, at).unwrap_err()),
            ("minute", 1)
        );
        let at = t0 + Duration::from_millis(100);
        assert_eq!(
            window_of(limiter.check("u", "t", SMALL, at).unwrap_err()),
            ("minute", 60)
        );
    }

    #[test]
    fn the_hour_window_holds_after_minutes_pass() {
        let (_dir, limiter) = limiter();
        let t0 = SystemTime::now();
        for i in 0..5u64 {
            let at = t0 + Duration::from_secs(120 * i);
            limiter.check("u", "t", SMALL, at).unwrap();
        }
        let at = t0 + Duration::from_secs(1000);
        let err = limiter.check("u", "t", SMALL, at).unwrap_err();
        assert!(err.to_string().contains("5 requests per hour"), "{err}");
        assert_eq!(window_of(err), ("hour", 2600));
        limiter
            .check("u", "t", SMALL, t0 + HOUR)
            .expect("the first left the hour");
    }

    #[test]
    fn users_and_tools_count_separately() {
        let (_dir, limiter) = limiter();
        let t0 = SystemTime::now();
        for _ in 0..3 {
            limiter.check("alice", "http", SMALL, t0).unwrap();
        }
        assert!(limiter.check("alice", "http", SMALL, t0).is_err());
        limiter.check("bob", "http", SMALL, t0).expect("other user");
        limiter
            .check("alice", "fetch", SMALL, t0)
            .expect("other tool");
    }

    #[test]
    fn refused_requests_are_not_counted_and_idle_keys_are_dropped() {
        let (_dir, limiter) = limiter();
        let t0 = SystemTime::now();
        for _ in 0..3 {
            limiter.check("u", "t", SMALL, t0).unwrap();
        }
        for _ in 0..10 {
            assert!(limiter.check("u", "t", SMALL, t0).is_err());
        }
        limiter
            .check("u", "t", SMALL, t0 + MINUTE)
            .expect("refusals did not fill the hour");
        for i in 0..50 {
            limiter.check(&format!("user{i}"), "t", SMALL, t0).unwrap();
        }
        assert_eq!(limiter.keys(), 51);
        limiter
            .check("late", "t", SMALL, t0 + HOUR + MINUTE)
            .unwrap();
        assert_eq!(limiter.keys(), 1, "only the new key is kept");
    }

    #[test]
    fn two_limiters_on_one_database_share_the_windows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("chitin.db");
        let a = RateLimiter::new(Arc::new(StateDb::new(&path)));
        let b = RateLimiter::new(Arc::new(StateDb::new(&path)));
        let t0 = SystemTime::now();
        a.check("u", "t", SMALL, t0).unwrap();
        b.check("u", "t", SMALL, t0).unwrap();
        a.check("u", "t", SMALL, t0).unwrap();
        assert!(
            b.check("u", "t", SMALL, t0).is_err(),
            "a's requests count for b"
        );
    }

    /// A request at `at` through `limiter` as the HTTP capability makes it: a reserved slot if
    /// there is one, else a commit; whether it was let through, and whether it committed.
    fn request(limiter: &RateLimiter, limits: RateLimits, at: SystemTime) -> (bool, bool) {
        if limiter.take_reserved("u", "t", limits, at) {
            return (true, false);
        }
        (limiter.check("u", "t", limits, at).is_ok(), true)
    }

    const WIDE: RateLimits = RateLimits {
        per_minute: 10_000,
        per_hour: 100_000,
    };

    #[test]
    fn a_burst_commits_once_per_reservation_and_reservations_double() {
        let (_dir, limiter) = limiter();
        let t0 = SystemTime::now();
        let commits: Vec<bool> = (0..100).map(|_| request(&limiter, WIDE, t0).1).collect();
        // Reservations of 1, 2, 4, 8 and then 16 slots: a commit at each.
        let at: Vec<usize> = (0..100).filter(|i| commits[*i]).collect();
        assert_eq!(at, [0, 1, 3, 7, 15, 31, 47, 63, 79, 95]);
        // 96 slots were reserved at the burst's end; the first of each commit is stamped at
        // the request, the rest at the lease's end.
        let stamps = limiter.stamps("u", "t");
        let now = millis(t0.duration_since(UNIX_EPOCH).expect("after 1970"));
        let ends = now + millis(LEASE);
        assert_eq!(stamps.len(), 1 + 2 + 4 + 8 + 16 * 6);
        assert_eq!(stamps.iter().filter(|t| **t == now).count(), 10);
        assert_eq!(stamps.iter().filter(|t| **t == ends).count(), 111 - 10);
        // A request after the lease ended gives back what it left unused: the 11 of the last
        // reservation not handed out. It commits alone, since the last lease was not used up.
        let later = t0 + LEASE + Duration::from_millis(1);
        assert_eq!(request(&limiter, WIDE, later), (true, true));
        assert_eq!(limiter.stamps("u", "t").len(), 100 + 1);
        assert_eq!(request(&limiter, WIDE, later), (true, true), "reserves 2");
        assert_eq!(request(&limiter, WIDE, later), (true, false));
    }

    #[test]
    fn a_reservation_takes_at_most_an_eighth_of_the_minute() {
        let (_dir, limiter) = limiter();
        let t0 = SystemTime::now();
        let commits = (0..60)
            .filter(|_| {
                let (passed, committed) = request(&limiter, RateLimits::default(), t0);
                assert!(passed);
                committed
            })
            .count();
        // 60 a minute: reservations of 1, 2, 4, then 7 (60 / 8).
        assert_eq!(commits, 3 + (60 - 7usize).div_ceil(7));
        // The 61st finds the minute full, leased slots and all.
        assert_eq!(request(&limiter, RateLimits::default(), t0), (false, true));
    }

    /// A small deterministic generator (xorshift64*), so the schedule is the same every run.
    struct Xorshift(u64);

    impl Xorshift {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        }
    }

    #[test]
    fn no_minute_ever_lets_more_than_its_limit_through_two_processes_with_reservations() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("chitin.db");
        let processes = [
            RateLimiter::new(Arc::new(StateDb::new(&path))),
            RateLimiter::new(Arc::new(StateDb::new(&path))),
        ];
        let limits = RateLimits {
            per_minute: 64,
            per_hour: 100_000,
        };
        let t0 = SystemTime::now();
        let mut random = Xorshift(0x9e37_79b9_7f4a_7c15);
        let (mut passed, mut refused) = (Vec::new(), 0);
        let mut at = 0u64;
        for _ in 0..3000 {
            // Bursts of requests a millisecond or so apart, with pauses of up to 4 s.
            at += match random.below(10) {
                0 => random.below(4000),
                _ => random.below(3),
            };
            let process = &processes[random.below(2) as usize];
            let now = t0 + Duration::from_millis(at);
            let through = process.take_reserved("u", "t", limits, now)
                || process.check("u", "t", limits, now).is_ok();
            let in_minute = passed.iter().filter(|t| at - **t < 60_000).count();
            if through {
                assert!(
                    in_minute < limits.per_minute as usize,
                    "a request at {at} ms let through with {in_minute} in the minute before it"
                );
                passed.push(at);
            } else {
                // What a refusal may count beyond the minute's requests: each process's unused
                // slots (one lease of at most an eighth of the minute), and the requests a lease
                // let through up to a lease before the minute, stamped at its end.
                let held = 2 * (limits.per_minute / 8) as usize;
                let stamped_late = passed
                    .iter()
                    .filter(|t| at - **t < 60_000 + millis(LEASE))
                    .count();
                assert!(
                    stamped_late + held >= limits.per_minute as usize,
                    "refused at {at} ms with only {in_minute} in the minute before it \
                     ({stamped_late} with the lease before it)"
                );
                refused += 1;
            }
        }
        assert!(
            refused > 100 && passed.len() > 500,
            "the schedule hits the limit: {} through, {refused} refused",
            passed.len()
        );
    }

    #[test]
    fn manifest_requests_are_clamped_by_the_policy() {
        let max = RateLimits {
            per_minute: 30,
            per_hour: 500,
        };
        assert_eq!(RateLimits::resolve(None, max), max);
        let asked = RateLimitRequest {
            per_minute: Some(100),
            per_hour: Some(50),
        };
        assert_eq!(
            RateLimits::resolve(Some(&asked), max),
            RateLimits {
                per_minute: 30,
                per_hour: 50
            }
        );
        let only_minute = RateLimitRequest {
            per_minute: Some(5),
            per_hour: None,
        };
        assert_eq!(
            RateLimits::resolve(Some(&only_minute), max),
            RateLimits {
                per_minute: 5,
                per_hour: 500
            }
        );
        assert_eq!(
            RateLimits::default(),
            RateLimits {
                per_minute: 60,
                per_hour: 1000
            }
        );
    }

    #[test]
    fn a_tighter_grant_on_the_same_key_does_not_spend_a_looser_ones_reservation() {
        let (_dir, limiter) = limiter();
        let t0 = SystemTime::now();
        let loose = RateLimits {
            per_minute: 1000,
            per_hour: 100_000,
        };
        let tight = RateLimits {
            per_minute: 2,
            per_hour: 100,
        };
        // The looser grant's burst leaves slots reserved.
        for _ in 0..8 {
            assert!(request(&limiter, loose, t0).0);
        }
        let lease = limiter.lease("u", "t");
        assert!(lock(&lease).left > 0, "the burst left a reservation");
        // The tighter grant finds its minute already over its limit: nothing goes through.
        let through = (0..20).filter(|_| request(&limiter, tight, t0).0).count();
        assert_eq!(
            through, 0,
            "a grant of 2 a minute sent {through} in a full minute"
        );
        // The looser grant still sends, and a slot reserved under tighter limits serves it.
        assert!(request(&limiter, loose, t0).0);
        let mut lease = lock(&lease);
        *lease = Lease {
            at: millis(t0.duration_since(UNIX_EPOCH).expect("after the epoch")),
            left: 1,
            taken: 2,
            limits: tight,
        };
        let now = millis(t0.duration_since(UNIX_EPOCH).expect("after the epoch"));
        assert!(
            lease.take(now, loose),
            "a slot reserved under tighter limits serves looser ones"
        );
    }
}
