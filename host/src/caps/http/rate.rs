//! Outbound request rate limits per (user, tool): sliding windows of a minute and an hour.
//!
//! Hand-rolled rather than `governor` (which the host uses elsewhere): GCRA smooths a rate and
//! cannot say "60 in any minute" with the exact time the oldest request leaves the window,
//! which is what a refused caller is told. Memory is bounded: a key keeps at most its hourly
//! limit of timestamps, and keys idle for an hour are dropped.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chitin_registry::manifest::http::RateLimitRequest;
use serde::Deserialize;

use super::error::HttpRefusal;

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// Requests allowed per sliding window (also the policy's `[http] rate_limit` ceiling, where a
/// missing window takes the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimits {
    /// Requests in any 60 seconds.
    pub per_minute: u32,
    /// Requests in any 3600 seconds.
    pub per_hour: u32,
}

impl Default for RateLimits {
    /// 60 per minute, 1000 per hour.
    fn default() -> Self {
        Self {
            per_minute: 60,
            per_hour: 1000,
        }
    }
}

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

/// Request timestamps per user, then per tool, oldest first.
#[derive(Debug, Default)]
struct Windows {
    by_user: HashMap<String, HashMap<String, VecDeque<Instant>>>,
    last_sweep: Option<Instant>,
}

/// Sliding-window counters for every (user, tool); share one per host (`Arc`).
#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: Mutex<Windows>,
}

impl RateLimiter {
    /// An empty limiter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Count a request by `tool` for `user` at `now`, or refuse it with the time until the full
    /// window has room. A refused request is not counted.
    pub fn check(
        &self,
        user: &str,
        tool: &str,
        limits: RateLimits,
        now: Instant,
    ) -> Result<(), HttpRefusal> {
        // A poisoned lock only means another caller panicked mid-update; the counters are
        // still timestamps, so carry on with them.
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        windows.sweep(now);
        let stamps = windows
            .by_user
            .entry(user.to_owned())
            .or_default()
            .entry(tool.to_owned())
            .or_default();
        while stamps
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= HOUR)
        {
            stamps.pop_front();
        }
        let full = |window: Duration, limit: u32| {
            // Timestamps within `window` of now are the ones counted; the first of them is the
            // one whose leaving frees a slot.
            let start = stamps.partition_point(|t| now.saturating_duration_since(*t) >= window);
            let in_window = stamps.len() - start;
            (in_window >= limit as usize).then(|| {
                let leaves = stamps
                    .get(in_window.saturating_sub(limit as usize) + start)
                    .map_or(window, |t| {
                        window.saturating_sub(now.saturating_duration_since(*t))
                    });
                retry_secs(leaves)
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
        // Callers take `now` before the lock, so a later caller can arrive first; keep order.
        let at = stamps.partition_point(|t| *t <= now);
        stamps.insert(at, now);
        Ok(())
    }

    /// How many (user, tool) keys hold timestamps (for tests of the memory bound).
    #[cfg(test)]
    fn keys(&self) -> usize {
        let windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        windows.by_user.values().map(HashMap::len).sum()
    }
}

impl Windows {
    /// Once a minute, drop keys with nothing in the last hour, so idle users and tools cost no
    /// memory.
    fn sweep(&mut self, now: Instant) {
        if self
            .last_sweep
            .is_some_and(|t| now.saturating_duration_since(t) < MINUTE)
        {
            return;
        }
        self.last_sweep = Some(now);
        self.by_user.retain(|_, tools| {
            tools.retain(|_, stamps| {
                stamps
                    .back()
                    .is_some_and(|t| now.saturating_duration_since(*t) < HOUR)
            });
            !tools.is_empty()
        });
    }
}

/// Whole seconds to wait, rounded up and at least one, so retrying after that long succeeds.
fn retry_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let limiter = RateLimiter::new();
        let t0 = Instant::now();
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
        let limiter = RateLimiter::new();
        let t0 = Instant::now();
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
        let limiter = RateLimiter::new();
        let t0 = Instant::now();
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
        let limiter = RateLimiter::new();
        let t0 = Instant::now();
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
        let limiter = RateLimiter::new();
        let t0 = Instant::now();
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
