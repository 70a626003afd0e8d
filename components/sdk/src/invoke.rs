//! Calling another tool through the `chitin:host/invoke` import, by an alias the component's
//! manifest declares under `[capabilities.invoke] tools`. The host applies its policy to the
//! tool called and runs it in its own sandbox under its own grant.

use crate::ToolError;

/// Calls the tool declared as `alias` with `args`; its JSON result. A refusal (undeclared
/// alias, a tool the policy does not offer, denied approval, the depth or count cap) is a
/// permission error; the tool's own failure is an execution error.
pub fn call(alias: &str, args: &serde_json::Value) -> Result<serde_json::Value, ToolError> {
    let text = call_json(alias, &args.to_string())?;
    serde_json::from_str(&text).map_err(|e| {
        ToolError::execution_failed(format!("`{alias}` returned a result that is not JSON: {e}"))
    })
}

/// [`call`] with the arguments and result as JSON text.
pub fn call_json(alias: &str, args_json: &str) -> Result<String, ToolError> {
    host_call(alias, args_json)
}

#[cfg(target_arch = "wasm32")]
mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package chitin:sdk-invoke;
                 world imports { import chitin:host/invoke@0.1.0; }",
        generate_all,
    });
}

#[cfg(target_arch = "wasm32")]
fn host_call(alias: &str, args_json: &str) -> Result<String, ToolError> {
    use bindings::chitin::host::invoke::{InvokeError, call};
    call(alias, args_json).map_err(|e| match e {
        InvokeError::Refused(why) => ToolError::permission_denied(why),
        InvokeError::Failed(why) => ToolError::execution_failed(why),
    })
}

// Natively there is no host to call through.
#[cfg(not(target_arch = "wasm32"))]
fn host_call(alias: &str, _args_json: &str) -> Result<String, ToolError> {
    Err(ToolError::permission_denied(format!(
        "cannot invoke `{alias}`: tools are only invoked inside a chitin host"
    )))
}
