//! The table of the four per-call limits a manifest may ask for under `[limits]`: what each is
//! called, its unit, and where a [`LimitRequest`] holds it. Whatever lists the limits (the
//! policy's clamp and its cuts, the audit, the widening comparison) iterates [`Limit::ALL`].

use super::LimitRequest;

/// One of the per-call limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// Linear memory a call may grow to.
    MemoryBytes,
    /// Fuel a call may burn (about one unit per WebAssembly instruction).
    Fuel,
    /// Wall-clock time a call may take.
    TimeoutMs,
    /// Bytes of result handed to the agent.
    OutputBytes,
}

impl Limit {
    /// Every limit, in the order they are shown.
    pub const ALL: [Self; 4] = [
        Self::MemoryBytes,
        Self::Fuel,
        Self::TimeoutMs,
        Self::OutputBytes,
    ];

    /// Its key under `[limits]` (and under the policy's `[limits.default]` and
    /// `[limits.ceiling]`).
    pub fn key(self) -> &'static str {
        match self {
            Self::MemoryBytes => "memory_bytes",
            Self::Fuel => "fuel",
            Self::TimeoutMs => "timeout_ms",
            Self::OutputBytes => "output_bytes",
        }
    }

    /// The unit of its values, in words.
    pub fn unit(self) -> &'static str {
        match self {
            Self::MemoryBytes | Self::OutputBytes => "bytes",
            Self::Fuel => "units of fuel",
            Self::TimeoutMs => "milliseconds",
        }
    }
}

impl LimitRequest {
    /// What the manifest asks for `limit`, if it asks.
    pub fn get(&self, limit: Limit) -> Option<u64> {
        match limit {
            Limit::MemoryBytes => self.memory_bytes.map(|v| v as u64),
            Limit::Fuel => self.fuel,
            Limit::TimeoutMs => self.timeout_ms,
            Limit::OutputBytes => self.output_bytes.map(|v| v as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_reads_the_field_its_key_names() {
        let asked = LimitRequest {
            memory_bytes: Some(1),
            fuel: Some(2),
            timeout_ms: Some(3),
            output_bytes: Some(4),
        };
        let text = toml::to_string(&asked).unwrap();
        assert_eq!(text.lines().count(), Limit::ALL.len(), "{text}");
        for limit in Limit::ALL {
            let value = asked.get(limit).unwrap();
            assert!(
                text.lines()
                    .any(|l| l == format!("{} = {value}", limit.key())),
                "{}: {text}",
                limit.key()
            );
            assert_eq!(LimitRequest::default().get(limit), None);
        }
    }
}
