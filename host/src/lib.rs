//! chitin's host: loads signed WebAssembly tool components, links the capabilities their grants
//! allow, and runs every call in a fresh, limited sandbox. The host implements capabilities,
//! never tools.

#![deny(missing_docs)]

/// `eprintln!` that never fails: when nobody reads stderr any more (a client that closed the
/// server's stderr, `2>&1 | head`), the diagnostic is dropped and the work goes on.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::stderr::write(format_args!($($arg)*), true)
    };
}

/// `eprint!` that never fails (see [`errln`]).
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::stderr::write(format_args!($($arg)*), false)
    };
}

pub mod approver;
mod bindings;
pub mod cache;
pub mod call;
pub mod call_log;
pub mod capability;
pub mod caps;
pub mod cli;
pub mod client;
pub mod contract;
pub mod data_dir;
pub mod descriptors;
pub mod engine;
pub mod error;
pub mod events;
pub mod fault;
pub mod file_lock;
pub mod grant;
pub mod heap;
pub mod host;
pub mod installed;
pub mod leak;
pub mod library;
pub mod limits;
pub mod load;
pub mod mcp;
pub mod pins;
pub mod policy;
mod private_dir;
pub mod record_table;
pub mod remembered_approvals;
pub mod runtime;
pub mod sandbox;
pub mod secrets;
pub mod services;
pub mod signing_keys;
pub mod slots;
pub mod spec;
pub mod state;
pub mod state_db;
mod stderr;
pub mod tool_error;
pub mod typed_exports;
pub mod workspace;

pub use approver::CallContext;
pub use error::{LoadError, ToolError};
pub use host::Host;
pub use limits::{LimitCeiling, Limits, PolicyLimits};
pub use runtime::{CallOutput, CallReport, LoadedComponent, Runtime};
pub use services::Services;
