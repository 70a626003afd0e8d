//! Outbound request rate limits per (user, tool): sliding windows of a minute and an hour,
//! kept in the state database so they hold across every chitin process on a data directory.
//!
//! Hand-rolled rather than `governor` (which the host uses elsewhere): GCRA smooths a rate and
//! cannot say "60 in any minute" with the exact time the oldest request leaves the window,
//! which is what a refused caller is told. Storage is bounded: a key keeps at most its hourly
//! limit of timestamps, and keys idle for an hour are dropped. When the database cannot be
//! reached the request is refused, never sent unlimited.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chitin_registry::manifest::http::RateLimitRequest;

use super::error::HttpRefusal;
use crate::services::Services;
use crate::state_db::{StateDb, StateError};

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

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
        }
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
            // A poisoned lock only means another caller panicked; the time is still a time.
            let mut last = self.last_sweep.lock().unwrap_or_else(|p| p.into_inner());
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
        }
        // The record holds request times in milliseconds since the Unix epoch, as
        // little-endian u64s, oldest first.
        self.db.rate_update(user, tool, |stored| {
            let mut stamps = stored.map(decode).unwrap_or_default();
            stamps.retain(|t| now.saturating_sub(*t) < millis(HOUR));
            let full = |window: Duration, limit: u32| {
                // Timestamps within `window` of now are the ones counted; the first of them is
                // the one whose leaving frees a slot.
                let window = millis(window);
                let start = stamps.partition_point(|t| now.saturating_sub(*t) >= window);
                let in_window = stamps.len() - start;
                (in_window >= limit as usize).then(|| {
                    let leaves = stamps
                        .get(in_window.saturating_sub(limit as usize) + start)
                        .map_or(window, |t| window.saturating_sub(now.saturating_sub(*t)));
                    retry_secs(Duration::from_millis(leaves))
                })
            };
            if let Some(retry_after_secs) = full(MINUTE, limits.per_minute) {
                return Err(HttpRefusal::RateLimited {
                    window: "minute",
                    limit: limits.per_minute,
                    retry_after_secs,
                });
            }
            if let Some(retry_after_secs) = full(HOUR, limits.per_hour) {
                return Err(HttpRefusal::RateLimited {
                    window: "hour",
                    limit: limits.per_hour,
                    retry_after_secs,
                });
            }
            // Callers take `now` before the lock, so a later caller can arrive first; keep
            // order.
            let at = stamps.partition_point(|t| *t <= now);
            stamps.insert(at, now);
            Ok((encode(&stamps), ()))
        })
    }

    /// How many (user, tool) keys hold timestamps (for tests of the storage bound).
    #[cfg(test)]
    fn keys(&self) -> usize {
        self.db.rate_len().unwrap_or_default()
    }
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
}
