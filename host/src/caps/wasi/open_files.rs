//! The files a call holds open. Each is a descriptor of the host process: without a bound one
//! call could open files up to the process's open-files limit, and every other call, the
//! database and the HTTP server's accept loop would then fail with "too many open files". A call
//! holds at most [`MOST_PER_CALL`], and all calls together at most their share of the limit
//! ([`crate::descriptors`]); an open past either stops the call with a message saying which.
//!
//! Opens are counted where `descriptor.open-at` hands out a descriptor (`cached_open`) and
//! uncounted where the descriptor resource is dropped (this module's destructor, which replaces
//! wasmtime-wasi's); what a call still holds when it ends is given back with its state.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use wasmtime::component::{Linker, Resource, ResourceType};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};

use super::FILESYSTEM_TYPES;

/// Files one call may hold open at once (a common soft `ulimit -n` of desktop systems).
pub const MOST_PER_CALL: usize = 256;

/// The resource whose destructor is replaced.
const DESCRIPTOR: &str = "descriptor";

/// The files all calls share: how many they hold, and how many they may.
#[derive(Debug)]
pub struct Share {
    held: AtomicUsize,
    most: usize,
}

impl Share {
    /// A share of `most` files.
    pub fn new(most: usize) -> Self {
        Self {
            held: AtomicUsize::new(0),
            most,
        }
    }

    /// This process's share ([`crate::descriptors::split`]).
    pub fn of_this_process() -> Arc<Self> {
        static SHARE: std::sync::OnceLock<Arc<Share>> = std::sync::OnceLock::new();
        SHARE
            .get_or_init(|| Arc::new(Share::new(crate::descriptors::split().calls)))
            .clone()
    }
}

/// Why an open was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenFilesError {
    /// The call holds [`MOST_PER_CALL`] files.
    #[error(
        "the call holds {MOST_PER_CALL} open files, the most one call may, and was stopped at \
         the next open (close files before opening more)"
    )]
    Call,
    /// All calls together hold their share.
    #[error(
        "the calls of this chitin process hold {0} open files, their share of its open-files \
         limit, and this call was stopped at its next open; retry when others end, or raise the \
         limit (ulimit -n)"
    )]
    Process(usize),
}

/// The files one call holds open: the handles of the descriptors it opened.
#[derive(Debug)]
pub struct OpenFiles {
    handles: HashSet<u32>,
    share: Arc<Share>,
}

impl OpenFiles {
    /// A call that holds nothing yet, counting against `share`.
    pub fn new(share: Arc<Share>) -> Self {
        Self {
            handles: HashSet::new(),
            share,
        }
    }

    /// Whether the call may open one more file.
    pub fn admit(&self) -> Result<(), OpenFilesError> {
        if self.handles.len() >= MOST_PER_CALL {
            return Err(OpenFilesError::Call);
        }
        if self.share.held.load(Ordering::Relaxed) >= self.share.most {
            return Err(OpenFilesError::Process(self.share.most));
        }
        Ok(())
    }

    /// The call was handed the descriptor `handle`.
    pub fn opened(&mut self, handle: u32) {
        if self.handles.insert(handle) {
            self.share.held.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The call dropped the descriptor `handle` (a preopen's, never counted, is passed over).
    pub fn closed(&mut self, handle: u32) {
        if self.handles.remove(&handle) {
            self.share.held.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// How many files the call holds.
    pub fn held(&self) -> usize {
        self.handles.len()
    }
}

impl Drop for OpenFiles {
    fn drop(&mut self) {
        self.share
            .held
            .fetch_sub(self.handles.len(), Ordering::Relaxed);
    }
}

/// A store state that counts the files its call holds open.
pub trait CountsOpenFiles {
    /// The call's open files.
    fn open_files(&mut self) -> &mut OpenFiles;
}

/// Replace wasmtime-wasi's destructor of `descriptor` (linked before this) with one that also
/// uncounts the file.
pub fn add_to_linker<T: WasiFilesystemView + CountsOpenFiles + 'static>(
    l: &mut Linker<T>,
) -> wasmtime::Result<()> {
    l.allow_shadowing(true);
    let replaced = l.instance(FILESYSTEM_TYPES).and_then(|mut instance| {
        instance.resource(
            DESCRIPTOR,
            ResourceType::host::<Descriptor>(),
            |mut store, handle| {
                let state = store.data_mut();
                state.open_files().closed(handle);
                state
                    .filesystem()
                    .table
                    .delete(Resource::<Descriptor>::new_own(handle))?;
                Ok(())
            },
        )
    });
    l.allow_shadowing(false);
    replaced
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_holds_at_most_its_bound_and_closing_makes_room() {
        let share = Arc::new(Share::new(10_000));
        let mut call = OpenFiles::new(share.clone());
        for handle in 0..MOST_PER_CALL as u32 {
            call.admit().expect("under the bound");
            call.opened(handle);
        }
        assert_eq!(call.admit(), Err(OpenFilesError::Call));
        call.closed(7);
        call.admit().expect("room again");
        // A handle never counted (a preopen's) changes nothing.
        call.closed(7);
        call.closed(99_999);
        assert_eq!(call.held(), MOST_PER_CALL - 1);
        assert_eq!(share.held.load(Ordering::Relaxed), MOST_PER_CALL - 1);
    }

    #[test]
    fn all_calls_together_hold_at_most_the_share_and_an_ended_call_gives_its_files_back() {
        let share = Arc::new(Share::new(300));
        let mut first = OpenFiles::new(share.clone());
        let mut second = OpenFiles::new(share.clone());
        for handle in 0..200 {
            first.opened(handle);
        }
        for handle in 0..100 {
            second.admit().expect("within the share");
            second.opened(handle);
        }
        let refused = second.admit().expect_err("the share is held");
        assert_eq!(refused, OpenFilesError::Process(300));
        assert!(refused.to_string().contains("ulimit -n"), "{refused}");
        drop(first);
        assert_eq!(share.held.load(Ordering::Relaxed), 100);
        second.admit().expect("the ended call's files are back");
    }
}
