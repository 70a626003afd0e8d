//! Approvals and a component's questions for MCP 2026-07-28 clients, through input-required
//! results: the server cannot send a request in the middle of a call, so a call that needs
//! approval, or whose component asks the client something (`chitin:host/client`), ends with an
//! `input_required` result carrying the questions and a signed request state. The client
//! answers and retries the call with the answers and the state; the retry runs the call again in
//! a fresh instance, and what the state records (questions approved, earlier answers) and the
//! retry's answers are replayed to it in order. A question not answered yet (a new round, or a
//! key the client left out) ends the retry with another input-required result, whose state
//! carries every answer so far.
//!
//! The state is HMAC-SHA256 signed with a per-process key and bound to the client that was
//! asked, the tool and its arguments, expires after [`STATE_TTL`], and is accepted once: a
//! tampered, foreign, expired or replayed state is refused. Bound to the client, because it
//! carries that client's person's answers (an approval among them): another client that learnt
//! it must not run the call on them. An answer is bound to its question's digest, so a component that
//! asks something else under the same key is asked again.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rmcp::model::{
    ElicitRequest, InputRequest, InputRequiredResult, InputResponses, RequestStateCodec,
    SealOptions,
};
use serde::{Deserialize, Serialize};

use crate::approver::{ApprovalRequest, Approver, Decision};
use crate::client::{ClientAsker, ClientMethod, ClientQuestion};
use crate::mcp::access::ClientId;
use crate::mcp::approver::{decision, question};
use crate::mcp::questions::{Missed, input_request};

/// The key of the approval question in `inputRequests` and `inputResponses`.
pub const APPROVAL_KEY: &str = "approval";
/// How long a person has to answer before the state expires.
pub const STATE_TTL: Duration = Duration::from_secs(600);
/// Redeemed states remembered (to refuse replays) before new retries are refused.
const MAX_REDEEMED: usize = 10_000;

/// Why a retry's request state was refused.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The per-process key could not be made, so no state can be trusted.
    #[error("approval state is unavailable in this process: {0}")]
    Unavailable(String),
    /// The signature does not verify for this client, tool and arguments, or the state
    /// expired.
    #[error(
        "the request state was refused ({0}): it is not one this server issued to this client \
         for this tool and these arguments, or it expired; call the tool again without a \
         request state"
    )]
    Invalid(String),
    /// The state was already redeemed once.
    #[error(
        "the request state was already used: each approval answer is accepted once; call the \
         tool again without a request state"
    )]
    Replayed,
    /// Too many answers are in flight to remember another one.
    #[error("too many approval answers in the last {0:?}; retry later")]
    Busy(Duration),
}

/// What the signed request state carries.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// A random nonce: the state is accepted once.
    nonce: String,
    /// Digests of the questions already approved for this call.
    approved: Vec<String>,
    /// The digest of the approval question the person is being asked (empty: none).
    asked: String,
    /// Answers to the component's questions so far, by key.
    #[serde(default)]
    answers: BTreeMap<String, Answer>,
    /// The component's questions being asked: key → the question's digest.
    #[serde(default)]
    questions: BTreeMap<String, String>,
}

/// The client's answer to one of the component's questions.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Answer {
    /// The digest of the question it answers.
    question: String,
    /// The client's result.
    answer: serde_json::Value,
}

/// A component question's identity: its key, method and params.
fn question_digest(q: &ClientQuestion) -> String {
    let mut hasher = blake3::Hasher::new();
    for part in [q.key.as_str(), q.mcp_method(), &q.params.to_string()] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

/// The per-process signing key and the states already redeemed.
struct States {
    codec: RequestStateCodec,
    redeemed: Mutex<HashMap<String, Instant>>,
}

fn states() -> Result<&'static States, StateError> {
    static STATES: OnceLock<Result<States, String>> = OnceLock::new();
    STATES
        .get_or_init(|| {
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).map_err(|e| e.to_string())?;
            let codec = RequestStateCodec::try_new(key.to_vec()).map_err(|e| e.to_string())?;
            Ok(States {
                codec,
                redeemed: Mutex::new(HashMap::new()),
            })
        })
        .as_ref()
        .map_err(|e| StateError::Unavailable(e.clone()))
}

/// The data a state is bound to: this client, and this tool with exactly these arguments.
fn binding(client: &ClientId, tool: &str, args_json: &str) -> Vec<u8> {
    let client = &client.owner;
    format!(
        "chitin tools/call\0{}:{client}\0{tool}\0{args_json}",
        client.len()
    )
    .into_bytes()
}

/// A question's identity: who asks, about what, and why.
fn digest(request: &ApprovalRequest) -> String {
    let mut hasher = blake3::Hasher::new();
    for part in [
        &request.tool,
        &request.component,
        &request.reason,
        &request.args_json,
    ] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

fn random_nonce() -> Result<String, StateError> {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(|e| StateError::Unavailable(e.to_string()))?;
    Ok(nonce.iter().map(|b| format!("{b:02x}")).collect())
}

/// Asks through an input-required result: approves what the verified state says was approved,
/// and records the first new question so the call can end asking it.
pub struct InputApprover {
    tool: String,
    args_json: String,
    /// The client asked, whose retry alone the state serves.
    client: ClientId,
    /// The client declared elicitation for this request.
    can_elicit: bool,
    approved: HashSet<String>,
    /// Of those, the one this retry's answer approved for good ("always"): the host remembers
    /// it as it does an elicitation's.
    approved_always: Option<String>,
    /// The question the retry answered with a refusal, and why it is refused.
    refused: Option<(String, String)>,
    /// The first question nobody has answered yet.
    pending: Mutex<Option<ApprovalRequest>>,
    /// A question was put to a client that cannot elicit.
    missed_capability: AtomicBool,
    /// The methods the client declared, for the component's questions.
    declared: Vec<ClientMethod>,
    /// Answers to the component's questions, from the state and the retry.
    answers: BTreeMap<String, Answer>,
    /// The component's questions nobody has answered yet: key → (digest, request).
    pending_questions: Mutex<BTreeMap<String, (String, InputRequest)>>,
    /// A component question needed a method the client did not declare.
    missed: Missed,
}

impl InputApprover {
    /// The approver for one `tools/call` of `tool` with `args_json` from `client`: a retry's
    /// `request_state` is verified and redeemed here, and `responses` carries the person's
    /// answer.
    pub fn new(
        tool: &str,
        args_json: &str,
        client: &ClientId,
        declared: Vec<ClientMethod>,
        request_state: Option<&str>,
        responses: Option<&InputResponses>,
    ) -> Result<Self, StateError> {
        let mut approver = Self {
            tool: tool.to_owned(),
            args_json: args_json.to_owned(),
            client: client.clone(),
            can_elicit: declared.contains(&ClientMethod::Elicit),
            approved: HashSet::new(),
            approved_always: None,
            refused: None,
            pending: Mutex::new(None),
            missed_capability: AtomicBool::new(false),
            declared,
            answers: BTreeMap::new(),
            pending_questions: Mutex::new(BTreeMap::new()),
            missed: Missed::default(),
        };
        let Some(sealed) = request_state else {
            return Ok(approver);
        };
        let state = redeem(sealed, &binding(client, tool, args_json))?;
        approver.approved.extend(state.approved);
        approver.answers = state.answers;
        // Only answers to the questions the state says were asked count; other keys are ignored.
        for (key, question) in state.questions {
            if let Some(answer) = responses.and_then(|r| r.get(&key)) {
                let answer = Answer {
                    question,
                    answer: answer.clone(),
                };
                approver.answers.insert(key, answer);
            }
        }
        // No answer: the question is asked again.
        if let Some(answer) = responses.and_then(|r| r.get(APPROVAL_KEY))
            && !state.asked.is_empty()
        {
            match decision(tool, answer) {
                Decision::Approved => {
                    approver.approved.insert(state.asked);
                }
                Decision::ApprovedAlways => {
                    approver.approved.insert(state.asked.clone());
                    approver.approved_always = Some(state.asked);
                }
                Decision::Denied(why) => approver.refused = Some((state.asked, why)),
            }
        }
        Ok(approver)
    }

    /// The call needed approval from a client that did not declare elicitation.
    pub fn missed_capability(&self) -> bool {
        self.missed_capability.load(Ordering::Relaxed)
    }

    /// The method a component question needed that the client did not declare, if any.
    pub fn missed_question(&self) -> Option<ClientMethod> {
        self.missed.method()
    }

    /// The decision the state and the retry hold for `request`, if any.
    pub fn recorded(&self, request: &ApprovalRequest) -> Option<Decision> {
        let id = digest(request);
        if self.approved.contains(&id) {
            if self.approved_always.as_ref() == Some(&id) {
                return Some(Decision::ApprovedAlways);
            }
            return Some(Decision::Approved);
        }
        match &self.refused {
            Some((refused, why)) if *refused == id => Some(Decision::Denied(why.clone())),
            _ => None,
        }
    }

    /// The answers the state and the retry hold for `questions`, if they hold one for each.
    pub fn replayed(&self, questions: &[ClientQuestion]) -> Option<Vec<serde_json::Value>> {
        questions
            .iter()
            .map(|q| {
                self.answers
                    .get(&q.key)
                    .filter(|a| a.question == question_digest(q))
                    .map(|a| a.answer.clone())
            })
            .collect()
    }

    /// The call stopped at something it could not answer: a question (approval or the
    /// component's) to ask, or one the client lacks the capability for.
    pub fn waiting(&self) -> bool {
        self.missed_capability()
            || self.missed_question().is_some()
            || self.pending.lock().map_or(true, |p| p.is_some())
            || self
                .pending_questions
                .lock()
                .map_or(true, |q| !q.is_empty())
    }

    /// The input-required result asking the pending questions, if the call stopped at any.
    pub fn input_required(&self) -> Result<Option<InputRequiredResult>, StateError> {
        let poisoned = || StateError::Unavailable("a lock was poisoned".into());
        let pending = self.pending.lock().map_err(|_| poisoned())?.take();
        let questions =
            std::mem::take(&mut *self.pending_questions.lock().map_err(|_| poisoned())?);
        if pending.is_none() && questions.is_empty() {
            return Ok(None);
        }
        let states = states()?;
        let mut approved: Vec<String> = self.approved.iter().cloned().collect();
        approved.sort();
        let mut requests = BTreeMap::new();
        if let Some(request) = &pending {
            let params = question(request).map_err(StateError::Unavailable)?;
            let ask = InputRequest::Elicitation(ElicitRequest::new(params));
            requests.insert(APPROVAL_KEY.to_owned(), ask);
        }
        let mut asked = BTreeMap::new();
        for (key, (digest, request)) in questions {
            requests.insert(key.clone(), request);
            asked.insert(key, digest);
        }
        let state = State {
            nonce: random_nonce()?,
            approved,
            asked: pending.as_ref().map(digest).unwrap_or_default(),
            answers: self.answers.clone(),
            questions: asked,
        };
        let payload =
            serde_json::to_vec(&state).map_err(|e| StateError::Unavailable(e.to_string()))?;
        let bound = binding(&self.client, &self.tool, &self.args_json);
        let sealed = states.codec.seal_with(
            &payload,
            &SealOptions::new().associated_data(&bound).ttl(STATE_TTL),
        );
        Ok(Some(InputRequiredResult::new(Some(requests), Some(sealed))))
    }
}

/// Verify `sealed` for `bound` and accept it once.
fn redeem(sealed: &str, bound: &[u8]) -> Result<State, StateError> {
    let states = states()?;
    let payload = states
        .codec
        .open_with(sealed, bound)
        .map_err(|e| StateError::Invalid(e.to_string()))?;
    let state: State =
        serde_json::from_slice(&payload).map_err(|e| StateError::Invalid(e.to_string()))?;
    let mut redeemed = states
        .redeemed
        .lock()
        .map_err(|_| StateError::Unavailable("a lock was poisoned".into()))?;
    let now = Instant::now();
    if redeemed.len() >= MAX_REDEEMED {
        // A state past its TTL can no longer be opened, so its nonce need not be remembered.
        redeemed.retain(|_, at| now.duration_since(*at) < STATE_TTL);
        if redeemed.len() >= MAX_REDEEMED {
            return Err(StateError::Busy(STATE_TTL));
        }
    }
    if redeemed.insert(state.nonce.clone(), now).is_some() {
        return Err(StateError::Replayed);
    }
    Ok(state)
}

#[async_trait::async_trait]
impl Approver for InputApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        if let Some(decision) = self.recorded(request) {
            return decision;
        }
        if !self.can_elicit {
            self.missed_capability.store(true, Ordering::Relaxed);
            return Decision::Denied(format!(
                "`{}` ({}) needs a person's approval because {}, but this client did not \
                 declare the elicitation capability, so it cannot ask",
                request.tool, request.component, request.reason
            ));
        }
        if let Ok(mut pending) = self.pending.lock()
            && pending.is_none()
        {
            *pending = Some(request.clone());
        }
        Decision::Denied(format!(
            "`{}` is waiting for a person's approval (asked through an input-required result)",
            request.tool
        ))
    }
}

#[async_trait::async_trait]
impl ClientAsker for InputApprover {
    fn declared(&self) -> Vec<ClientMethod> {
        self.declared.clone()
    }

    /// The answers, when the state and the retry hold one for every question; otherwise the
    /// unanswered questions are kept for the input-required result and the component is told
    /// to stop.
    async fn ask(&self, questions: &[ClientQuestion]) -> Result<Vec<serde_json::Value>, String> {
        self.missed.check(&self.declared, questions)?;
        let mut answers = Vec::with_capacity(questions.len());
        let mut unanswered = Vec::new();
        for q in questions {
            let digest = question_digest(q);
            match self.answers.get(&q.key) {
                Some(a) if a.question == digest => answers.push(a.answer.clone()),
                _ => unanswered.push((q.key.clone(), (digest, input_request(q)?))),
            }
        }
        if unanswered.is_empty() {
            return Ok(answers);
        }
        self.pending_questions
            .lock()
            .map_err(|_| "a lock was poisoned".to_owned())?
            .extend(unanswered);
        Err(
            "waiting for the client's answers (asked through an input-required result); the \
             call is run again with them"
                .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elicit() -> Vec<ClientMethod> {
        vec![ClientMethod::Elicit]
    }

    /// The client the tests' questions are put to.
    fn me() -> ClientId {
        ClientId::own("peer:127.0.0.1")
    }

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            tool: "shell_run".into(),
            component: "chitin/shell".into(),
            reason: "the policy asks".into(),
            args_json: r#"{"cmd":"ls"}"#.into(),
        }
    }

    fn approve_answer() -> InputResponses {
        BTreeMap::from([(
            APPROVAL_KEY.to_owned(),
            serde_json::json!({"action": "accept", "content": {"approve": true}}),
        )])
    }

    async fn first_round() -> String {
        let approver =
            InputApprover::new("shell_run", r#"{"cmd":"ls"}"#, &me(), elicit(), None, None)
                .expect("new");
        assert!(matches!(
            approver.approve(&request()).await,
            Decision::Denied(_)
        ));
        let result = approver.input_required().expect("state").expect("asks");
        assert!(
            result
                .input_requests
                .expect("requests")
                .contains_key(APPROVAL_KEY)
        );
        result.request_state.expect("state")
    }

    #[tokio::test]
    async fn an_always_answer_is_passed_on_to_be_remembered() {
        let state = first_round().await;
        let answer = BTreeMap::from([(
            APPROVAL_KEY.to_owned(),
            serde_json::json!({"action": "accept", "content": {"approve": true, "always": true}}),
        )]);
        let retry = InputApprover::new(
            "shell_run",
            r#"{"cmd":"ls"}"#,
            &me(),
            elicit(),
            Some(&state),
            Some(&answer),
        )
        .expect("verified");
        assert_eq!(retry.approve(&request()).await, Decision::ApprovedAlways);
    }

    #[tokio::test]
    async fn an_approved_answer_approves_the_retry_once() {
        let state = first_round().await;
        let answer = approve_answer();
        let retry = InputApprover::new(
            "shell_run",
            r#"{"cmd":"ls"}"#,
            &me(),
            elicit(),
            Some(&state),
            Some(&answer),
        )
        .expect("verified");
        assert_eq!(retry.approve(&request()).await, Decision::Approved);
        assert_eq!(retry.recorded(&request()), Some(Decision::Approved));
        assert!(retry.input_required().expect("state").is_none());
        let replay = InputApprover::new(
            "shell_run",
            r#"{"cmd":"ls"}"#,
            &me(),
            elicit(),
            Some(&state),
            Some(&answer),
        );
        assert!(matches!(replay, Err(StateError::Replayed)));
    }

    #[tokio::test]
    async fn a_state_for_other_arguments_another_client_or_tampered_is_refused() {
        let state = first_round().await;
        let answer = approve_answer();
        let other = InputApprover::new(
            "shell_run",
            r#"{"cmd":"rm -rf /"}"#,
            &me(),
            elicit(),
            Some(&state),
            Some(&answer),
        );
        assert!(matches!(other, Err(StateError::Invalid(_))));
        // Another client that learnt the state cannot run the call on its answers.
        let stranger = InputApprover::new(
            "shell_run",
            r#"{"cmd":"ls"}"#,
            &ClientId::own("peer:127.0.0.2"),
            elicit(),
            Some(&state),
            Some(&answer),
        );
        assert!(matches!(stranger, Err(StateError::Invalid(_))));
        let mut tampered = state.clone();
        tampered.insert(tampered.len() / 2, 'x');
        let forged = InputApprover::new(
            "shell_run",
            r#"{"cmd":"ls"}"#,
            &me(),
            elicit(),
            Some(&tampered),
            Some(&answer),
        );
        assert!(matches!(forged, Err(StateError::Invalid(_))));
    }

    #[tokio::test]
    async fn a_declined_answer_refuses_the_call() {
        let state = first_round().await;
        let answer = BTreeMap::from([(
            APPROVAL_KEY.to_owned(),
            serde_json::json!({"action": "decline"}),
        )]);
        let retry = InputApprover::new(
            "shell_run",
            r#"{"cmd":"ls"}"#,
            &me(),
            elicit(),
            Some(&state),
            Some(&answer),
        )
        .expect("verified");
        let Decision::Denied(why) = retry.approve(&request()).await else {
            panic!("a declined approval must refuse");
        };
        assert!(why.contains("declined"), "{why}");
        assert!(retry.input_required().expect("state").is_none());
    }

    #[tokio::test]
    async fn a_client_without_elicitation_is_not_asked() {
        let approver = InputApprover::new(
            "shell_run",
            r#"{"cmd":"ls"}"#,
            &me(),
            Vec::new(),
            None,
            None,
        )
        .expect("new");
        assert!(matches!(
            approver.approve(&request()).await,
            Decision::Denied(_)
        ));
        assert!(approver.missed_capability());
        assert!(approver.input_required().expect("state").is_none());
    }

    fn named(key: &str, message: &str) -> ClientQuestion {
        ClientQuestion {
            key: key.into(),
            method: ClientMethod::Elicit,
            params: serde_json::json!({"mode": "form", "message": message,
                "requestedSchema": {"type": "object", "properties": {}}}),
        }
    }

    #[tokio::test]
    async fn answers_are_replayed_from_the_state_and_bound_to_their_question() {
        let args = r#"{"cmd":"ls"}"#;
        let first =
            InputApprover::new("shell_run", args, &me(), elicit(), None, None).expect("new");
        assert!(first.ask(&[named("step1", "name?")]).await.is_err());
        let round1 = first.input_required().expect("state").expect("asks");
        assert!(
            round1
                .input_requests
                .expect("requests")
                .contains_key("step1")
        );
        let answer = serde_json::json!({"action": "accept", "content": {"name": "Ada"}});
        // An answer to a key the state did not ask is ignored.
        let responses = BTreeMap::from([
            ("step1".to_owned(), answer.clone()),
            ("other".to_owned(), serde_json::json!({"action": "accept"})),
        ]);
        let second = InputApprover::new(
            "shell_run",
            args,
            &me(),
            elicit(),
            round1.request_state.as_deref(),
            Some(&responses),
        )
        .expect("verified");
        let got = second
            .ask(&[named("step1", "name?")])
            .await
            .expect("replayed");
        assert_eq!(got, std::slice::from_ref(&answer));
        // Replayed without recording anything, as a gathering call that became a task asks.
        assert_eq!(
            second.replayed(&[named("step1", "name?")]),
            Some(vec![answer.clone()])
        );
        assert_eq!(second.replayed(&[named("step1", "another?")]), None);
        assert!(second.ask(&[named("other", "x?")]).await.is_err());
        assert!(second.ask(&[named("step2", "color?")]).await.is_err());
        let round2 = second.input_required().expect("state").expect("asks");
        let asked = round2.input_requests.expect("requests");
        assert!(asked.contains_key("step2") && asked.contains_key("other"));
        assert!(!asked.contains_key("step1"));
        // The first answer rides in the new state; a different question under its key is asked
        // again.
        let third = InputApprover::new(
            "shell_run",
            args,
            &me(),
            elicit(),
            round2.request_state.as_deref(),
            None,
        )
        .expect("verified");
        assert_eq!(
            third
                .ask(&[named("step1", "name?")])
                .await
                .expect("replayed"),
            [answer]
        );
        assert!(third.ask(&[named("step1", "another?")]).await.is_err());
    }
}
