//! The host's process slots: at most the policy's `[processes] max_running` processes run at
//! once (5 by default), and at most `max_running_per_user` of them (2) for one OAuth user
//! ([`crate::mcp::oauth::TokenGrant::person`]), so that one user's agent on a server several
//! people reach cannot hold every slot (five `sleep 300`s) and have everyone else's processes
//! refused. The operator's own calls (terminal, stdio, the server's bearer token) are bounded by
//! the host's slots only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::RunError;
pub use crate::policy::ProcessPolicy as SlotLimits;

/// The slots of one host, shared by all its components.
#[derive(Debug, Default)]
pub struct Slots {
    held: Mutex<Held>,
}

/// What is running now.
#[derive(Debug, Default)]
struct Held {
    /// Processes running on the host.
    running: usize,
    /// Processes running per user; a user with none has no entry.
    per_user: HashMap<Arc<str>, usize>,
}

impl Slots {
    /// A slot for one process of `user` (`None`: the operator) within `limits`, or why there is
    /// none: the user's own bound first, so a user at its bound is told so whatever the host
    /// has free.
    pub fn take(
        self: &Arc<Self>,
        user: Option<&Arc<str>>,
        limits: SlotLimits,
    ) -> Result<Slot, RunError> {
        let SlotLimits {
            max_running,
            max_running_per_user,
        } = limits;
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(user) = user
            && held.per_user.get(user).copied().unwrap_or(0) >= max_running_per_user
        {
            return Err(RunError::Busy(format!(
                "{user} already runs {max_running_per_user} processes (the limit for one user, \
                 through whichever applications, of this host's {max_running}: the policy's \
                 `[processes] max_running_per_user`); retry when one of them ends"
            )));
        }
        if held.running >= max_running {
            return Err(RunError::Busy(format!(
                "{max_running} processes are already running on this host (the limit: the \
                 policy's `[processes] max_running`); retry when one ends"
            )));
        }
        held.running += 1;
        if let Some(user) = user {
            *held.per_user.entry(user.clone()).or_default() += 1;
        }
        Ok(Slot {
            slots: self.clone(),
            user: user.cloned(),
        })
    }
}

/// One running process's slot, given back when dropped (the process ended, or its call did).
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    user: Option<Arc<str>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self
            .slots
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        held.running = held.running.saturating_sub(1);
        let Some(user) = self.user.take() else {
            return;
        };
        if let Some(count) = held.per_user.get_mut(&user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.per_user.remove(&user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(result: Result<Slot, RunError>) -> String {
        match result {
            Err(RunError::Busy(why)) => why,
            other => panic!("expected a busy refusal, got {other:?}"),
        }
    }

    #[test]
    fn one_user_takes_at_most_their_share_and_gets_it_back() {
        let slots = Arc::new(Slots::default());
        let limits = SlotLimits::default();
        let alice: Arc<str> = "oauth user \"alice\"".into();
        let bob: Arc<str> = "oauth user \"bob\"".into();
        let alices: Vec<Slot> = (0..limits.max_running_per_user)
            .map(|_| {
                slots
                    .take(Some(&alice), limits)
                    .expect("within alice's share")
            })
            .collect();
        let why = busy(slots.take(Some(&alice), limits));
        assert!(
            why.contains(&*alice) && why.contains("limit for one user"),
            "{why}"
        );
        let bobs = slots
            .take(Some(&bob), limits)
            .expect("bob has a share of his own");
        let operators: Vec<Slot> = (0..limits.max_running - limits.max_running_per_user - 1)
            .map(|_| {
                slots
                    .take(None, limits)
                    .expect("the operator takes what is left")
            })
            .collect();
        let why = busy(slots.take(None, limits));
        assert!(why.contains("on this host"), "{why}");
        drop(alices);
        assert!(!held(&slots).per_user.contains_key(&alice));
        let again = slots
            .take(Some(&alice), limits)
            .expect("alice's slots came back");
        drop((again, bobs, operators));
        assert!(held(&slots).per_user.is_empty());
        assert_eq!(held(&slots).running, 0);
    }

    #[test]
    fn a_user_refused_by_a_full_host_holds_nothing() {
        let slots = Arc::new(Slots::default());
        let limits = SlotLimits::default();
        let operators: Vec<Slot> = (0..limits.max_running)
            .map(|_| slots.take(None, limits).expect("the operator's"))
            .collect();
        let alice: Arc<str> = "alice".into();
        let why = busy(slots.take(Some(&alice), limits));
        assert!(why.contains("on this host"), "{why}");
        assert!(held(&slots).per_user.is_empty());
        drop(operators);
        let _held: Vec<Slot> = (0..limits.max_running_per_user)
            .map(|_| slots.take(Some(&alice), limits).expect("free again"))
            .collect();
    }

    #[test]
    fn the_policys_limits_are_the_ones_kept() {
        let slots = Arc::new(Slots::default());
        let limits = SlotLimits {
            max_running: 3,
            max_running_per_user: 3,
        };
        let alice: Arc<str> = "alice".into();
        let alices: Vec<Slot> = (0..3)
            .map(|_| {
                slots
                    .take(Some(&alice), limits)
                    .expect("within the policy's")
            })
            .collect();
        let why = busy(slots.take(Some(&alice), limits));
        assert!(
            why.contains("runs 3 processes") && why.contains("max_running_per_user"),
            "{why}"
        );
        let why = busy(slots.take(None, limits));
        assert!(
            why.contains("3 processes are already running") && why.contains("max_running`"),
            "{why}"
        );
        drop(alices);
        let _one = slots
            .take(
                None,
                SlotLimits {
                    max_running: 1,
                    max_running_per_user: 1,
                },
            )
            .expect("the host's own");
    }

    fn held(slots: &Slots) -> std::sync::MutexGuard<'_, Held> {
        slots.held.lock().expect("lock")
    }
}
