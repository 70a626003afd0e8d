//! `chitin:host/invoke`: a component calls another tool by an alias its manifest declares. The
//! host resolves the alias, then runs the tool through the same path as any call — the policy
//! decides whether it is offered and whether a person must approve it, and it runs in its own
//! sandbox under its own grant. Chains are capped in depth and in count, so recursion and loops
//! end with an error that shows the chain.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

use chitin_registry::manifest::InvokeGrant;

use crate::call::{Call, Position};
pub use crate::call::{InvokeFuture, InvokeScope, Invoker, MAX_CALLS, MAX_DEPTH};
use crate::capability::{Capability, CapabilityError, Cut, Holds, Load};
use crate::fault::Faults;
use crate::tool_error::ToolError;

/// Host bindings of `chitin:host/invoke`.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        inline: "package chitin:invoke-host;
                 world invoke-host { import chitin:host/invoke@0.1.0; }",
        imports: { default: async | trappable },
    });
}

use bindings::chitin::host::invoke::InvokeError;

/// The per-call state of the invoke capability.
#[derive(Default)]
pub struct InvokeCtx {
    /// Alias → tool, from the component's grant.
    pub aliases: Arc<BTreeMap<String, String>>,
    /// Where the call sits; `None` where no tools can be called (loading a component).
    pub scope: Option<InvokeScope>,
    /// Where a host fault of an invoked call is recorded as this call's own.
    pub faults: Faults,
}

impl InvokeCtx {
    /// Run the tool `alias` names; `Ok(Err(_))` is a refusal or failure the component is told,
    /// `Err(_)` a host fault under the invoked call, which traps this one.
    async fn call(
        &mut self,
        alias: &str,
        args_json: String,
    ) -> wasmtime::Result<Result<String, InvokeError>> {
        let Some(tool) = self.aliases.get(alias) else {
            let declared: Vec<&str> = self.aliases.keys().map(String::as_str).collect();
            let declared = if declared.is_empty() {
                "none".to_owned()
            } else {
                declared.join(", ")
            };
            return Ok(Err(InvokeError::Refused(format!(
                "alias `{alias}` is not declared in this component's manifest \
                 ([capabilities.invoke] tools; declared: {declared})"
            ))));
        };
        let Some(scope) = &self.scope else {
            return Ok(Err(InvokeError::Refused(
                "no tool can be invoked here (the component is being loaded, not called)".into(),
            )));
        };
        let child = match scope.child(tool) {
            Ok(child) => child,
            Err(why) => return Ok(Err(InvokeError::Refused(why))),
        };
        let invoker = scope.invoker.clone();
        Ok(match invoker.invoke(tool.clone(), args_json, child).await {
            Ok(text) => Ok(text),
            // The host failed, not the invoked tool: the whole chain ends as a host fault.
            Err(ToolError::HostFault(fault)) => return Err(self.faults.record(fault).into()),
            Err(e @ (ToolError::NotFound(_) | ToolError::PermissionDenied(_))) => Err(
                InvokeError::Refused(format!("`{tool}` (alias `{alias}`): {e}")),
            ),
            Err(e) => Err(InvokeError::Failed(format!(
                "`{tool}` (alias `{alias}`): {e}"
            ))),
        })
    }
}

impl bindings::chitin::host::invoke::Host for &mut InvokeCtx {
    async fn call(
        &mut self,
        alias: String,
        args_json: String,
    ) -> wasmtime::Result<Result<String, InvokeError>> {
        InvokeCtx::call(self, &alias, args_json).await
    }
}

/// The invoke capability (and its `HasData` marker).
pub struct Invoke;

impl HasData for Invoke {
    type Data<'a> = &'a mut InvokeCtx;
}

impl Capability for Invoke {
    type Section = InvokeGrant;
    type Config = Arc<BTreeMap<String, String>>;
    type Ctx = InvokeCtx;
    const LINKS: &'static [&'static str] = &["chitin:host/invoke@"];

    fn configure(
        section: Option<&InvokeGrant>,
        _load: &Load<'_>,
        _cuts: &mut Vec<Cut>,
    ) -> Result<Self::Config, CapabilityError> {
        Ok(Arc::new(
            section.map(|i| i.tools.clone()).unwrap_or_default(),
        ))
    }

    fn ctx(config: &Self::Config, call: &Call<'_>) -> InvokeCtx {
        InvokeCtx {
            aliases: config.clone(),
            // A component that declares no alias can invoke nothing: its calls are refused
            // before the scope is looked at, so it is not copied for them.
            scope: call
                .invoke
                .filter(|_| !config.is_empty())
                .map(Position::scope),
            faults: call.faults.clone(),
        }
    }

    fn add_to_linker<T: Holds<Self>>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        fn get<T: Holds<Invoke>>(state: &mut T) -> &mut InvokeCtx {
            state.parts().0
        }
        bindings::chitin::host::invoke::add_to_linker::<T, Invoke>(linker, get)
    }
}
