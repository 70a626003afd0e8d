//! `chitin:host/approval`: a component asks, mid-call, for a person's approval of something the
//! host's own rules would not ask about (the shell asks before irreversible commands even where
//! the policy auto-approves it). The host passes the request to the call's [`Approver`]; a
//! component can add requests but never answer them or skip the host's own. The component's
//! reason passes the call's redactor before anyone sees it: a question is a way out too.

use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

use crate::approver::{ApprovalRequest, Approver, Decision};
use crate::call::CallTarget;
use crate::leak::LeakScanner;

/// Requests one call may make; more are refused without asking, so a component cannot flood a
/// person with prompts.
pub const MAX_APPROVAL_REQUESTS_PER_CALL: u32 = 3;
/// Bytes of a component's reason shown to a person.
pub const MAX_REASON_BYTES: usize = 1024;

/// Host bindings of `chitin:host/approval`.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        inline: "package chitin:approval-host;
                 world approval-host { import chitin:host/approval@0.1.0; }",
        imports: { default: async },
    });
}

/// The per-call state of the approval capability.
pub struct ApprovalCtx {
    approver: Arc<dyn Approver>,
    scanner: Arc<LeakScanner>,
    component: Arc<str>,
    /// The tool called and its arguments, shown to a person (`None` while loading).
    tool: Option<Arc<str>>,
    args_json: String,
    asked: u32,
}

impl ApprovalCtx {
    /// Requests from `component` during `target` (so a person sees the tool and its
    /// arguments) go to `approver`, redacted by `scanner`.
    pub fn new(
        approver: Arc<dyn Approver>,
        scanner: Arc<LeakScanner>,
        component: Arc<str>,
        target: Option<CallTarget<'_>>,
    ) -> Self {
        Self {
            approver,
            scanner,
            component,
            tool: target.map(|t| t.tool.clone()),
            args_json: target.map(|t| t.args_json.to_owned()).unwrap_or_default(),
            asked: 0,
        }
    }

    /// Ask the approver about `reason`; `Err` carries why it was refused.
    pub async fn request(&mut self, reason: &str) -> Result<(), String> {
        if self.asked >= MAX_APPROVAL_REQUESTS_PER_CALL {
            return Err(format!(
                "refused without asking: a call may ask for approval at most \
                 {MAX_APPROVAL_REQUESTS_PER_CALL} times"
            ));
        }
        self.asked += 1;
        let mut reason = self.scanner.redact(reason, "reason");
        reason.truncate(reason.floor_char_boundary(MAX_REASON_BYTES));
        let request = ApprovalRequest {
            tool: self.tool.as_deref().unwrap_or_default().to_owned(),
            component: self.component.to_string(),
            reason: format!("the component asks: {reason}"),
            args_json: self.scanner.redact(&self.args_json, "arguments"),
        };
        // A component's own request is about this call only: "always allow" is not remembered
        // for it, so it counts as a one-time approval.
        match self.approver.approve(&request).await {
            Decision::Approved | Decision::ApprovedAlways => Ok(()),
            Decision::Denied(why) => Err(why),
        }
    }
}

impl bindings::chitin::host::approval::Host for &mut ApprovalCtx {
    async fn request(&mut self, reason: String) -> Result<(), String> {
        ApprovalCtx::request(self, &reason).await
    }
}

/// `HasData` marker for the approval capability.
pub struct Approval;

impl HasData for Approval {
    type Data<'a> = &'a mut ApprovalCtx;
}

/// The interface prefix this module links.
pub const LINKS: &[&str] = &["chitin:host/approval@"];

/// Link `chitin:host/approval`; `get` finds the call's [`ApprovalCtx`] in the store state.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut ApprovalCtx,
) -> wasmtime::Result<()> {
    bindings::chitin::host::approval::add_to_linker::<T, Approval>(linker, get)
}
