//! Host faults met inside a running call: the database or the secret store failing under a
//! capability. Such a fault is the operator's to fix, not the tool's, so the call must end as
//! [`crate::ToolError::HostFault`] whatever the component does with the error it was handed.
//! Each capability records the fault in the call's [`Faults`] (and traps the instance where its
//! interface lets it); the runtime reports a call that recorded one as a host fault.

use std::sync::{Arc, Mutex};

/// The error a capability traps the instance with after recording a host fault.
#[derive(Debug, thiserror::Error)]
#[error("host fault: {0}")]
pub struct HostFault(pub String);

/// The host faults one call met; shared by the call's capabilities and the runtime reporting it.
#[derive(Debug, Clone, Default)]
pub struct Faults(Arc<Mutex<Option<String>>>);

impl Faults {
    /// Record `message` (the first fault of a call is kept: later ones are usually its
    /// consequences) and return the error to trap the instance with.
    pub fn record(&self, message: impl Into<String>) -> HostFault {
        let message = message.into();
        tracing::warn!(fault = %message, "host fault during a call");
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert_with(|| message.clone());
        HostFault(message)
    }

    /// The first fault recorded, if any.
    pub fn first(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_fault_is_kept_and_shared_by_clones() {
        let faults = Faults::default();
        assert_eq!(faults.first(), None);
        let seen_by_a_capability = faults.clone();
        let trap = seen_by_a_capability.record("database x is corrupt");
        assert_eq!(trap.to_string(), "host fault: database x is corrupt");
        seen_by_a_capability.record("a consequence");
        assert_eq!(faults.first().as_deref(), Some("database x is corrupt"));
    }
}
