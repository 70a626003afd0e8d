//! The core every capability's per-call state is built from ([`Call`]): who is calling, the
//! host's services, the call's log, redactor, faults and deadline, and where the call sits in a
//! chain of invocations. Built once per call by the store state; capabilities only read it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use crate::approver::CallContext;
use crate::call_log::SharedLog;
use crate::fault::Faults;
use crate::leak::LeakScanner;
use crate::services::Services;
use crate::tool_error::ToolError;

/// What one call's capability contexts are built from.
#[derive(Clone, Copy)]
pub struct Call<'a> {
    /// The host's workspace, data directory and database.
    pub services: &'a Arc<Services>,
    /// The caller and their approver.
    pub context: &'a CallContext,
    /// Where the call sits in a chain of invocations (`None` while loading).
    pub invoke: Option<Position<'a>>,
    /// The tool called and its arguments (`None` while loading).
    pub target: Option<CallTarget<'a>>,
    /// The call's log.
    pub log: &'a SharedLog,
    /// Redacts the secrets the call could reach.
    pub scanner: &'a Arc<LeakScanner>,
    /// Where capabilities record host faults.
    pub faults: &'a Faults,
    /// When the call's time runs out.
    pub deadline: Instant,
}

/// The tool a call runs, as agents name it, and the arguments it was given.
#[derive(Clone, Copy)]
pub struct CallTarget<'a> {
    /// The tool's exposed name, shared with its spec so a call copies no string for it.
    pub tool: &'a Arc<str>,
    /// The arguments as the caller wrote them.
    pub args_json: &'a str,
}

/// Where a call sits: at the top of a chain, whose [`InvokeScope`] is made only for a component
/// that can invoke (most cannot, and the scope costs a chain, a counter and a copy of the
/// caller's context), or inside one.
#[derive(Clone, Copy)]
pub enum Position<'a> {
    /// A top-level call.
    Top {
        /// Runs the tools the call invokes.
        invoker: &'a Arc<dyn Invoker>,
        /// The tool called.
        tool: &'a str,
        /// The caller and their approver.
        ctx: &'a CallContext,
    },
    /// A call invoked as one link of this chain.
    Within(&'a InvokeScope),
}

impl<'a> Position<'a> {
    /// The caller and their approver.
    pub fn ctx(self) -> &'a CallContext {
        match self {
            Self::Top { ctx, .. } => ctx,
            Self::Within(scope) => &scope.ctx,
        }
    }

    /// The scope of the call's own invocations.
    pub fn scope(self) -> InvokeScope {
        match self {
            Self::Top { invoker, tool, ctx } => InvokeScope::root(invoker.clone(), tool, ctx),
            Self::Within(scope) => scope.clone(),
        }
    }
}

/// Deepest chain of invocations below a top-level call.
pub const MAX_DEPTH: usize = 4;
/// Most invocations in one top-level call, over the whole chain.
pub const MAX_CALLS: u32 = 20;

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
    pub(crate) fn child(&self, tool: &str) -> Result<Self, String> {
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
