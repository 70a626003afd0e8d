//! `chitin:host/invoke`: a component calls another tool by an alias its manifest declares. The
//! host resolves the alias, then runs the tool through the same path as any call — the policy
//! decides whether it is offered and whether a person must approve it, and it runs in its own
//! sandbox under its own grant. Chains are capped in depth and in count, so recursion and loops
//! end with an error that shows the chain.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use wasmtime::component::{HasData, Linker};

use crate::approval::CallContext;
use crate::error::ToolError;
use crate::fault::Faults;
use crate::state::HostState;

/// Deepest chain of invocations below a top-level call.
pub const MAX_DEPTH: usize = 4;
/// Most invocations in one top-level call, over the whole chain.
pub const MAX_CALLS: u32 = 20;

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

/// A boxed future of an invoked call's result.
pub type InvokeFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<String, ToolError>> + Send + 'static>,
>;

/// Runs an invoked tool: implemented by the host, which knows the loaded tools.
pub trait Invoker: Send + Sync {
    /// Call `tool` with `args_json` as one link of `scope`'s chain; its result text.
    fn invoke(self: Arc<Self>, tool: String, args_json: String, scope: InvokeScope)
    -> InvokeFuture;
}

/// Where a call sits in a chain of invocations, and where its own invocations go.
#[derive(Clone)]
pub struct InvokeScope {
    /// Runs the tools invoked.
    pub invoker: Arc<dyn Invoker>,
    /// The tools from the top-level call down to this one.
    pub chain: Vec<String>,
    /// Invocations made so far in the whole chain.
    pub count: Arc<AtomicU32>,
    /// The caller and their approver, passed down the chain.
    pub ctx: CallContext,
}

impl InvokeScope {
    /// The scope of a top-level call to `tool`.
    pub fn root(invoker: Arc<dyn Invoker>, tool: &str, ctx: &CallContext) -> Self {
        Self {
            invoker,
            chain: vec![tool.to_owned()],
            count: Arc::new(AtomicU32::new(0)),
            ctx: ctx.clone(),
        }
    }

    /// The scope of a call to `tool` made from this one, or why it is refused.
    fn child(&self, tool: &str) -> Result<Self, String> {
        let mut chain = self.chain.clone();
        chain.push(tool.to_owned());
        let shown = chain.join(" → ");
        if chain.len() > MAX_DEPTH + 1 {
            let looped = chain
                .iter()
                .enumerate()
                .any(|(i, t)| chain[..i].contains(t));
            let why = if looped {
                " (the chain is a loop: a tool calls itself through it)"
            } else {
                ""
            };
            return Err(format!(
                "invocation depth cap of {MAX_DEPTH} reached: {shown}{why}"
            ));
        }
        let made = self.count.fetch_add(1, Ordering::SeqCst);
        if made >= MAX_CALLS {
            return Err(format!(
                "invocation cap of {MAX_CALLS} calls per top-level call reached at {shown}"
            ));
        }
        Ok(Self {
            chain,
            ..self.clone()
        })
    }
}

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

/// `HasData` marker for the invoke capability.
pub struct Invoke;

impl HasData for Invoke {
    type Data<'a> = &'a mut InvokeCtx;
}

/// Link `chitin:host/invoke`.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    bindings::chitin::host::invoke::add_to_linker::<HostState, Invoke>(linker, |s| &mut s.invoke)
}
