//! Capabilities the host links into components. One module per capability; linking is one
//! visible list in [`add_to_linker`].

pub mod approval;
pub mod client;
pub mod env;
pub mod files;
pub mod http;
pub mod invoke;
pub mod kv;
pub mod log;
pub mod process;
pub mod progress;
pub mod secrets;
pub mod stdio;
pub mod wasi;

use wasmtime::component::Linker;

use crate::state::HostState;

/// Link every capability the host offers. What a given component may use is decided per call
/// from its grant; the linker itself is shared by all components.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    // `chitin:tool/types` holds only types; a component that uses them imports the interface
    // as an instance with nothing to call, which an empty instance satisfies.
    linker.instance(TOOL_TYPES)?;
    wasi::add_to_linker(linker)?;
    log::add_to_linker(linker)?;
    progress::add_to_linker(linker)?;
    kv::add_to_linker(linker)?;
    process::add_to_linker(linker)?;
    approval::add_to_linker(linker)?;
    client::add_to_linker(linker)?;
    invoke::add_to_linker(linker)?;
    secrets::add_to_linker(linker)?;
    http::add_to_linker(linker)?;
    Ok(())
}

/// The contract's type-only interface, linked as an empty instance.
const TOOL_TYPES: &str = "chitin:tool/types@0.1.0";

/// Whether an import name is something the host links (used to explain unmet imports).
pub fn is_linked(import: &str) -> bool {
    wasi::LINKED_PACKAGES.iter().any(|p| import.starts_with(p))
        || import.starts_with("chitin:host/log@")
        || import.starts_with("chitin:host/progress@")
        || import.starts_with(kv::LINKED_PACKAGE)
        || import.starts_with("chitin:host/process@")
        || import.starts_with("chitin:host/approval@")
        || import.starts_with("chitin:host/client@")
        || import.starts_with("chitin:host/invoke@")
        || import.starts_with("chitin:host/secrets@")
        || import.starts_with(http::LINKED_PACKAGE)
        || import.starts_with("chitin:tool/types@")
}
