//! Approvals over MCP: a call whose tool needs a person's approval is put to the person at the
//! client through `elicitation/create`. A client that cannot ask gets a refusal that names the
//! tool and why it needed approval; the agent never answers for the person.

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationSchema};
use rmcp::service::Peer;
use serde_json::Value;

use crate::approver::{ApprovalRequest, Approver, Decision};

/// The form field the person ticks to approve.
const APPROVE_FIELD: &str = "approve";
/// The optional form field the person ticks to remember the approval ("always allow").
const ALWAYS_FIELD: &str = "always";

/// Asks the person at one MCP client.
pub struct ElicitationApprover {
    peer: Peer<RoleServer>,
    /// Why nobody can be asked through this client, if nobody can.
    unavailable: Option<&'static str>,
}

impl ElicitationApprover {
    /// An approver asking through `peer`, a session that began with `initialize` (2026-07-28
    /// requests are asked through input-required results instead, see `input_required`).
    /// `can_elicit`: the client declared form elicitation.
    pub fn new(peer: Peer<RoleServer>, can_elicit: bool) -> Self {
        let unavailable = if !can_elicit {
            Some("this MCP client did not declare the elicitation capability, so it cannot ask")
        } else {
            None
        };
        Self { peer, unavailable }
    }
}

/// The approval question for `request`, as an elicitation form with a required tick box to
/// approve and an optional one to remember the approval.
pub fn question(request: &ApprovalRequest) -> Result<ElicitRequestParams, String> {
    let schema = ElicitationSchema::builder()
        .required_bool(APPROVE_FIELD)
        .optional_bool(ALWAYS_FIELD, false)
        .build()
        .map_err(|e| format!("cannot build the approval form: {e}"))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "Allow `{}` from {} to run? It needs approval because {}.\nArguments: {}",
            request.tool, request.component, request.reason, request.args_json
        ),
        requested_schema: schema,
    })
}

/// The decision an elicitation answer (an `ElicitResult` as JSON) gives about running `tool`:
/// only an accepted form with the box ticked approves.
pub fn decision(tool: &str, answer: &Value) -> Decision {
    let action = answer.get("action").and_then(Value::as_str);
    let field = |name| {
        answer
            .get("content")
            .and_then(|c| c.get(name))
            .and_then(Value::as_bool)
    };
    match (action, field(APPROVE_FIELD)) {
        (Some("accept"), Some(true)) if field(ALWAYS_FIELD) == Some(true) => {
            Decision::ApprovedAlways
        }
        (Some("accept"), Some(true)) => Decision::Approved,
        (Some("accept"), _) => Decision::Denied(format!(
            "the person did not approve `{tool}` (the approve box was not ticked)"
        )),
        (Some("decline"), _) => Decision::Denied(format!("the person declined to run `{tool}`")),
        // Cancel, and any answer a later protocol adds: not an approval.
        _ => Decision::Denied(format!(
            "the person dismissed the approval request for `{tool}`"
        )),
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
        let params = match question(request) {
            Ok(params) => params,
            Err(e) => return Decision::Denied(e),
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
        match serde_json::to_value(&answer) {
            Ok(answer) => decision(&request.tool, &answer),
            Err(e) => Decision::Denied(format!("cannot read the approval answer: {e}")),
        }
    }
}
