//! Counted slots for what a host runs at once: at most a number in this process (each chitin
//! process, a server or a terminal call, counts its own), and fewer for
//! one OAuth user ([`crate::mcp::oauth::TokenGrant::person`]), so that one user's agent on a
//! server several people reach cannot hold them all and have everyone else's refused. The
//! operator's own calls (terminal, stdio, the server's bearer token) count against the host's
//! number only. Processes ([`crate::caps::process`]) and top-level tool calls
//! ([`crate::host::Host::call_in`]) are counted this way, each in slots of their own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// What the slots count, as a refusal names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// The things counted, plural ("processes").
    pub noun: &'static str,
    /// What sets the host's bound ("the policy's `[processes] max_running`").
    pub host_bound: &'static str,
    /// What sets one user's bound.
    pub user_bound: &'static str,
}

/// How many may run at once, on the host and for one OAuth user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// On the whole host.
    pub host: usize,
    /// For one OAuth user, within `host`.
    pub user: usize,
}

/// No slot was free: a refusal naming the bound reached and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Busy(pub String);

/// The slots of one host for one kind of thing, shared by every caller.
#[derive(Debug)]
pub struct Slots {
    counted: Counted,
    held: Mutex<Held>,
}

/// What is running now.
#[derive(Debug, Default)]
struct Held {
    /// Running on the host.
    running: usize,
    /// Running per user; a user with none has no entry.
    per_user: HashMap<Arc<str>, usize>,
}

impl Slots {
    /// No slot of `counted` taken.
    pub fn new(counted: Counted) -> Self {
        Self {
            counted,
            held: Mutex::new(Held::default()),
        }
    }

    /// A slot for `user` (`None`: the operator) within `bounds`, or why there is none: the
    /// user's own bound first, so a user at its bound is told so whatever the host has free.
    pub fn take(self: &Arc<Self>, user: Option<&Arc<str>>, bounds: Bounds) -> Result<Slot, Busy> {
        let Counted {
            noun,
            host_bound,
            user_bound,
        } = self.counted;
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(user) = user
            && held.per_user.get(user).copied().unwrap_or(0) >= bounds.user
        {
            return Err(Busy(format!(
                "{user} already runs {} {noun} (the limit for one user, through whichever \
                 applications: {user_bound}); retry when one of them ends",
                bounds.user
            )));
        }
        if held.running >= bounds.host {
            return Err(Busy(format!(
                "{} {noun} are already running in this chitin process (the limit: {host_bound}); retry \
                 when one ends",
                bounds.host
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

/// One slot, given back when dropped (what held it ended, or its call did).
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

    const THINGS: Counted = Counted {
        noun: "things",
        host_bound: "the policy's `[things] max_running`",
        user_bound: "the policy's `[things] max_running_per_user`",
    };
    const BOUNDS: Bounds = Bounds { host: 5, user: 2 };

    fn busy(result: Result<Slot, Busy>) -> String {
        match result {
            Err(Busy(why)) => why,
            other => panic!("expected a busy refusal, got {other:?}"),
        }
    }

    #[test]
    fn one_user_takes_at_most_their_share_and_gets_it_back() {
        let slots = Arc::new(Slots::new(THINGS));
        let alice: Arc<str> = "oauth user \"alice\"".into();
        let bob: Arc<str> = "oauth user \"bob\"".into();
        let alices: Vec<Slot> = (0..BOUNDS.user)
            .map(|_| {
                slots
                    .take(Some(&alice), BOUNDS)
                    .expect("within alice's share")
            })
            .collect();
        let why = busy(slots.take(Some(&alice), BOUNDS));
        assert!(
            why.contains(&*alice)
                && why.contains("runs 2 things")
                && why.contains("limit for one user")
                && why.contains("`[things] max_running_per_user`"),
            "{why}"
        );
        let bobs = slots
            .take(Some(&bob), BOUNDS)
            .expect("bob has a share of his own");
        let operators: Vec<Slot> = (0..BOUNDS.host - BOUNDS.user - 1)
            .map(|_| {
                slots
                    .take(None, BOUNDS)
                    .expect("the operator takes what is left")
            })
            .collect();
        let why = busy(slots.take(None, BOUNDS));
        assert!(
            why.contains("5 things are already running in this chitin process")
                && why.contains("`[things] max_running`"),
            "{why}"
        );
        drop(alices);
        assert!(!held(&slots).per_user.contains_key(&alice));
        let again = slots
            .take(Some(&alice), BOUNDS)
            .expect("alice's slots came back");
        drop((again, bobs, operators));
        assert!(held(&slots).per_user.is_empty());
        assert_eq!(held(&slots).running, 0);
    }

    #[test]
    fn a_user_refused_by_a_full_host_holds_nothing() {
        let slots = Arc::new(Slots::new(THINGS));
        let operators: Vec<Slot> = (0..BOUNDS.host)
            .map(|_| slots.take(None, BOUNDS).expect("the operator's"))
            .collect();
        let alice: Arc<str> = "alice".into();
        let why = busy(slots.take(Some(&alice), BOUNDS));
        assert!(why.contains("in this chitin process"), "{why}");
        assert!(held(&slots).per_user.is_empty());
        drop(operators);
        let _held: Vec<Slot> = (0..BOUNDS.user)
            .map(|_| slots.take(Some(&alice), BOUNDS).expect("free again"))
            .collect();
    }

    #[test]
    fn the_bounds_given_are_the_ones_kept() {
        let slots = Arc::new(Slots::new(THINGS));
        let three = Bounds { host: 3, user: 3 };
        let alice: Arc<str> = "alice".into();
        let alices: Vec<Slot> = (0..3)
            .map(|_| slots.take(Some(&alice), three).expect("within the bounds"))
            .collect();
        let why = busy(slots.take(Some(&alice), three));
        assert!(why.contains("runs 3 things"), "{why}");
        let why = busy(slots.take(None, three));
        assert!(why.contains("3 things are already running"), "{why}");
        drop(alices);
        let _one = slots
            .take(None, Bounds { host: 1, user: 1 })
            .expect("the host's own");
    }

    fn held(slots: &Slots) -> std::sync::MutexGuard<'_, Held> {
        slots.held.lock().expect("lock")
    }
}
