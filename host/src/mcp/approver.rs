//! Approvals over MCP: a call whose tool needs a person's approval is put to the person at the
//! client through `elicitation/create`. A client that cannot ask gets a refusal that names the
//! tool and why it needed approval; the agent never answers for the person.

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::Peer;

use crate::approval::{ApprovalRequest, Approver, Decision};

/// The form field the person ticks to approve.
const APPROVE_FIELD: &str = "approve";
/// The form's optional box: remember the approval for this component version and grant.
const ALWAYS_FIELD: &str = "always";

/// Asks the person at one MCP client.
pub struct ElicitationApprover {
    peer: Peer<RoleServer>,
    /// Why nobody can be asked through this client, if nobody can.
    unavailable: Option<&'static str>,
}

impl ElicitationApprover {
    /// An approver asking through `peer`. `can_elicit`: the client declared form elicitation;
    /// `legacy_session`: it connected with `initialize`, so the server may send it requests
    /// during a call (2026-07-28 asks through input-required results instead, not served yet).
    pub fn new(peer: Peer<RoleServer>, can_elicit: bool, legacy_session: bool) -> Self {
        let unavailable = if !legacy_session {
            Some(
                "this client speaks MCP 2026-07-28, where chitin cannot ask for approval yet; \
                 connect with protocol 2025-11-25 and the elicitation capability",
            )
        } else if !can_elicit {
            Some("this MCP client did not declare the elicitation capability, so it cannot ask")
        } else {
            None
        };
        Self { peer, unavailable }
    }
}

#[async_trait::async_trait]
impl Approver for ElicitationApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        if let Some(why) = self.unavailable {
            return Decision::Denied(format!(
                "`{}` ({}) needs a person's approval because {}, but {why}; run it with \
                 `chitin call` from a terminal instead",
                request.tool, request.component, request.reason
            ));
        }
        let schema = match ElicitationSchema::builder()
            .required_bool(APPROVE_FIELD)
            .optional_bool(ALWAYS_FIELD, false)
            .build()
        {
            Ok(schema) => schema,
            Err(e) => return Decision::Denied(format!("cannot build the approval form: {e}")),
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!(
                "Allow `{}` from {} to run? It needs approval because {}.\nArguments: {}",
                request.tool, request.component, request.reason, request.args_json
            ),
            requested_schema: schema,
        };
        let answer = match self.peer.create_elicitation(params).await {
            Ok(answer) => answer,
            Err(e) => {
                return Decision::Denied(format!(
                    "`{}` needs a person's approval, but asking the client failed: {e}",
                    request.tool
                ));
            }
        };
        let field = |name| {
            answer
                .content
                .as_ref()
                .and_then(|c| c.get(name))
                .and_then(serde_json::Value::as_bool)
        };
        let ticked = field(APPROVE_FIELD);
        match (answer.action, ticked) {
            (ElicitationAction::Accept, Some(true)) if field(ALWAYS_FIELD) == Some(true) => {
                Decision::ApprovedAlways
            }
            (ElicitationAction::Accept, Some(true)) => Decision::Approved,
            (ElicitationAction::Accept, _) => Decision::Denied(format!(
                "the person did not approve `{}` (the approve box was not ticked)",
                request.tool
            )),
            (ElicitationAction::Decline, _) => {
                Decision::Denied(format!("the person declined to run `{}`", request.tool))
            }
            // Cancel, and any answer a later protocol adds: not an approval.
            _ => Decision::Denied(format!(
                "the person dismissed the approval request for `{}`",
                request.tool
            )),
        }
    }
}
