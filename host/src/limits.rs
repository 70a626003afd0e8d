//! Per-call resource limits and the memory limiter that enforces the memory cap.

use std::time::{Duration, Instant};

use chitin_registry::manifest::Limit;
use serde::Deserialize;

/// One MiB, for readable limits.
pub const MIB: usize = 1024 * 1024;

/// The most linear memory any call can be given: a 32-bit linear memory cannot grow past 4 GiB,
/// and the engine's pool reserves that much per memory (see `engine.rs`).
pub const MAX_MEMORY_BYTES: usize = 4096 * MIB;

/// The longest wall-clock timeout any call can be given: one day. A deadline is an `Instant`,
/// which cannot hold an arbitrarily distant time, so the policy refuses a larger ceiling.
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

/// The policy's `[limits]`: what a component gets when its manifest asks nothing, and the most it
/// may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyLimits {
    /// What a call gets for each limit its manifest does not ask for (`[limits.default]`).
    pub default: Limits,
    /// The most a manifest may ask for; larger requests are clamped (`[limits.ceiling]`).
    pub ceiling: LimitCeiling,
}

impl PolicyLimits {
    /// Defaults and ceiling both `limits`: a manifest may ask for less, never more.
    pub fn fixed(limits: Limits) -> Self {
        Self {
            default: limits,
            ceiling: LimitCeiling::from(limits),
        }
    }
}

/// The most a manifest may ask for, per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitCeiling {
    /// Linear memory, in bytes.
    pub memory_bytes: usize,
    /// Fuel.
    pub fuel: u64,
    /// Wall-clock time, in milliseconds.
    pub timeout_ms: u64,
    /// Bytes of result handed to the agent.
    pub output_bytes: usize,
}

impl Default for LimitCeiling {
    /// 256 MiB memory (a Python or JavaScript runtime needs tens of MiB), 5·10¹⁰ fuel, 5 min,
    /// 1 MiB output.
    fn default() -> Self {
        Self {
            memory_bytes: 256 * MIB,
            fuel: 50_000_000_000,
            timeout_ms: 300_000,
            output_bytes: MIB,
        }
    }
}

impl LimitCeiling {
    /// Its value of `limit`.
    pub fn get(&self, limit: Limit) -> u64 {
        match limit {
            Limit::MemoryBytes => self.memory_bytes as u64,
            Limit::Fuel => self.fuel,
            Limit::TimeoutMs => self.timeout_ms,
            Limit::OutputBytes => self.output_bytes as u64,
        }
    }
}

impl From<Limits> for LimitCeiling {
    fn from(l: Limits) -> Self {
        Self {
            memory_bytes: l.memory_bytes,
            fuel: l.fuel,
            timeout_ms: l.timeout_ms,
            output_bytes: l.output_bytes,
        }
    }
}

/// What one call may use: the policy's defaults, or what the component's manifest asks for,
/// clamped by the policy's ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Linear memory a call may grow to, in bytes (default 10 MiB: ample for JSON tools, small
    /// enough that 1000 live calls stay within a laptop's memory).
    pub memory_bytes: usize,
    /// Fuel (roughly one unit per WebAssembly instruction) a call may burn: a CPU budget that,
    /// unlike the wall-clock deadline, does not depend on how loaded the machine is.
    pub fuel: u64,
    /// Wall-clock time a call may take, in milliseconds.
    pub timeout_ms: u64,
    /// Bytes of result handed to the agent; longer results are cut with a visible marker.
    pub output_bytes: usize,
    /// Log entries (from `chitin:host/log`, stdout and stderr) kept per call; the rest are counted.
    pub log_entries: usize,
    /// Bytes kept of one log entry.
    pub log_entry_bytes: usize,
}

impl Default for Limits {
    /// 10 MiB memory, 5·10⁹ fuel, 30 s, 64 KiB output, 1000 log entries of 4 KiB.
    fn default() -> Self {
        Self {
            memory_bytes: 10 * MIB,
            fuel: 5_000_000_000,
            timeout_ms: 30_000,
            output_bytes: 64 * 1024,
            log_entries: 1000,
            log_entry_bytes: 4096,
        }
    }
}

impl Limits {
    /// The wall-clock timeout as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// When a call started at `start` must end: its timeout later, at most [`MAX_TIMEOUT_MS`]
    /// (the policy refuses more; the bound keeps the sum within what an `Instant` holds).
    pub fn deadline(&self, start: Instant) -> Instant {
        start + Duration::from_millis(self.timeout_ms.min(MAX_TIMEOUT_MS))
    }

    /// Its value of `limit`.
    pub fn get(&self, limit: Limit) -> u64 {
        match limit {
            Limit::MemoryBytes => self.memory_bytes as u64,
            Limit::Fuel => self.fuel,
            Limit::TimeoutMs => self.timeout_ms,
            Limit::OutputBytes => self.output_bytes as u64,
        }
    }

    /// These limits with each of the per-call limits at `ceiling`'s (the log limits stay).
    pub fn at_ceiling(mut self, ceiling: &LimitCeiling) -> Self {
        for limit in Limit::ALL {
            self.set(limit, ceiling.get(limit));
        }
        self
    }

    /// Set `limit` to `value`; a byte count past the address space is the largest there is.
    pub fn set(&mut self, limit: Limit, value: u64) {
        let bytes = usize::try_from(value).unwrap_or(usize::MAX);
        match limit {
            Limit::MemoryBytes => self.memory_bytes = bytes,
            Limit::Fuel => self.fuel = value,
            Limit::TimeoutMs => self.timeout_ms = value,
            Limit::OutputBytes => self.output_bytes = bytes,
        }
    }
}

/// Refuses linear-memory growth past the call's cap and remembers that it did, so the trap that
/// follows (a Rust guest aborts when allocation fails) can be reported as a memory refusal.
pub struct MemoryLimiter {
    max_bytes: usize,
    refused: Option<usize>,
}

impl MemoryLimiter {
    /// A limiter for one call.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            refused: None,
        }
    }

    /// The size the guest asked for when growth was refused, if it was.
    pub fn refused(&self) -> Option<usize> {
        self.refused
    }

    /// The cap in bytes.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.refused = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold function references; 10k entries is far beyond any tool's needs.
        Ok(desired <= 10_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_is_the_timeout_later_and_never_past_a_day() {
        let start = Instant::now();
        let limits = Limits::default();
        assert_eq!(limits.deadline(start), start + Duration::from_secs(30));
        let endless = Limits {
            timeout_ms: u64::MAX,
            ..Limits::default()
        };
        assert_eq!(endless.deadline(start), start + Duration::from_secs(86_400));
    }

    #[test]
    fn each_limit_reads_and_sets_the_field_its_key_names() {
        let text = "memory_bytes = 1\nfuel = 2\ntimeout_ms = 3\noutput_bytes = 4\n";
        let ceiling: LimitCeiling = toml::from_str(text).expect("ceiling");
        let limits: Limits =
            toml::from_str(&format!("{text}log_entries = 5\nlog_entry_bytes = 6\n"))
                .expect("limits");
        let mut raised = Limits::default();
        for (limit, want) in Limit::ALL.into_iter().zip(1..) {
            assert_eq!(ceiling.get(limit), want, "{}", limit.key());
            assert_eq!(limits.get(limit), want, "{}", limit.key());
            raised.set(limit, want);
        }
        assert_eq!(
            raised,
            Limits {
                log_entries: 1000,
                log_entry_bytes: 4096,
                ..limits
            }
        );
        assert_eq!(Limits::default().at_ceiling(&ceiling), raised);
    }
}
