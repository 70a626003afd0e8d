//! Asking whether a secret exists, through the `chitin:host/secrets` import, for names the
//! component's manifest covers under `[capabilities.secrets] names`. Values never reach a
//! component: the host injects them into HTTP requests where `[[capabilities.http.credentials]]`
//! maps them.

use crate::ToolError;

/// Whether the operator has set the secret `name`. A name outside the manifest's globs is a
/// permission error (the same whether or not the secret exists).
pub fn exists(name: &str) -> Result<bool, ToolError> {
    host_exists(name)
}

#[cfg(target_arch = "wasm32")]
mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package chitin:sdk-secrets;
                 world imports { import chitin:host/secrets@0.1.0; }",
        generate_all,
    });
}

#[cfg(target_arch = "wasm32")]
fn host_exists(name: &str) -> Result<bool, ToolError> {
    bindings::chitin::host::secrets::exists(name).map_err(ToolError::permission_denied)
}

// Natively there is no host to ask.
#[cfg(not(target_arch = "wasm32"))]
fn host_exists(name: &str) -> Result<bool, ToolError> {
    Err(ToolError::permission_denied(format!(
        "cannot look up secret `{name}`: secrets exist only inside a chitin host"
    )))
}
