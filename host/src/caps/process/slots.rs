//! The host's process slots: at most [`DEFAULT_CONCURRENCY`] processes run at once, and at most
//! [`PER_USER`] of them for one OAuth user ([`crate::mcp::oauth::TokenGrant::person`]), so that
//! one user's agent on a server several people reach cannot hold every slot (five `sleep
//! 300`s) and have everyone else's processes refused. The operator's own calls (terminal,
//! stdio, the server's bearer token) are bounded by the host's slots only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{DEFAULT_CONCURRENCY, RunError};

/// Processes one OAuth user may run at once, of the host's [`DEFAULT_CONCURRENCY`]: fewer than
/// half, so one user always leaves most slots to the others.
pub const PER_USER: usize = 2;

/// The slots of one host, shared by all its components.
#[derive(Debug)]
pub struct Slots {
    /// The host's slots.
    host: Arc<Semaphore>,
    /// Processes running per user; a user with none has no entry.
    held: Mutex<HashMap<Arc<str>, usize>>,
}

impl Default for Slots {
    /// [`DEFAULT_CONCURRENCY`] slots, none taken.
    fn default() -> Self {
        Self {
            host: Arc::new(Semaphore::new(DEFAULT_CONCURRENCY)),
            held: Mutex::new(HashMap::new()),
        }
    }
}

impl Slots {
    /// A slot for one process of `user` (`None`: the operator), or why there is none: the
    /// user's own bound first, so a user at its bound is told so whatever the host has free.
    pub fn take(self: &Arc<Self>, user: Option<&Arc<str>>) -> Result<Slot, RunError> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(user) = user
            && held.get(user).copied().unwrap_or(0) >= PER_USER
        {
            return Err(RunError::Busy(format!(
                "{user} already runs {PER_USER} processes (the limit for one user, through \
                 whichever applications, of this host's {DEFAULT_CONCURRENCY}); retry when one \
                 of them ends"
            )));
        }
        let permit = self.host.clone().try_acquire_owned().map_err(|_| {
            RunError::Busy(format!(
                "{DEFAULT_CONCURRENCY} processes are already running on this host (the limit); \
                 retry when one ends"
            ))
        })?;
        if let Some(user) = user {
            *held.entry(user.clone()).or_default() += 1;
        }
        Ok(Slot {
            _permit: permit,
            user: user.map(|u| (self.clone(), u.clone())),
        })
    }
}

/// One running process's slot, given back when dropped (the process ended, or its call did).
#[derive(Debug)]
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    user: Option<(Arc<Slots>, Arc<str>)>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some((slots, user)) = self.user.take() else {
            return;
        };
        let mut held = slots.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = held.get_mut(&user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&user);
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
        let alice: Arc<str> = "oauth user \"alice\"".into();
        let bob: Arc<str> = "oauth user \"bob\"".into();
        let alices: Vec<Slot> = (0..PER_USER)
            .map(|_| slots.take(Some(&alice)).expect("within alice's share"))
            .collect();
        let why = busy(slots.take(Some(&alice)));
        assert!(
            why.contains(&*alice) && why.contains("limit for one user"),
            "{why}"
        );
        let bobs = slots.take(Some(&bob)).expect("bob has a share of his own");
        let operators: Vec<Slot> = (0..DEFAULT_CONCURRENCY - PER_USER - 1)
            .map(|_| slots.take(None).expect("the operator takes what is left"))
            .collect();
        let why = busy(slots.take(None));
        assert!(why.contains("on this host"), "{why}");
        drop(alices);
        assert!(slots.held.lock().expect("lock").get(&alice).is_none());
        let again = slots.take(Some(&alice)).expect("alice's slots came back");
        drop((again, bobs, operators));
        assert!(slots.held.lock().expect("lock").is_empty());
        assert_eq!(slots.host.available_permits(), DEFAULT_CONCURRENCY);
    }

    #[test]
    fn a_user_refused_by_a_full_host_holds_nothing() {
        let slots = Arc::new(Slots::default());
        let operators: Vec<Slot> = (0..DEFAULT_CONCURRENCY)
            .map(|_| slots.take(None).expect("the operator's"))
            .collect();
        let alice: Arc<str> = "alice".into();
        let why = busy(slots.take(Some(&alice)));
        assert!(why.contains("on this host"), "{why}");
        assert!(slots.held.lock().expect("lock").is_empty());
        drop(operators);
        let _held: Vec<Slot> = (0..PER_USER)
            .map(|_| slots.take(Some(&alice)).expect("free again"))
            .collect();
    }
}
