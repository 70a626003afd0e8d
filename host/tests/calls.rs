//! How many tool calls the host, and one OAuth user on it, run at once.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chitin_host::ToolError;
use chitin_host::approver::{ApprovalRequest, Approver, CallContext, Consenter, Decision};
use chitin_host::policy::{ApprovalRule, Policy};
use chitin_registry::manifest::ApprovalHint;
use common::{TestEnv, component};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// Approves every call once the test opens it, counting those waiting.
struct Gate {
    asked: AtomicUsize,
    open: Semaphore,
}

#[async_trait::async_trait]
impl Approver for Gate {
    async fn approve(&self, _: &ApprovalRequest) -> Decision {
        self.asked.fetch_add(1, Ordering::SeqCst);
        match self.open.acquire().await {
            Ok(permit) => {
                permit.forget();
                Decision::Approved
            }
            Err(_) => Decision::Denied("the gate was closed".into()),
        }
    }
}

/// `echo` of `message` for `consenter`, approvals put to `gate`.
async fn echo_as(
    env: &TestEnv,
    gate: &Arc<Gate>,
    consenter: Consenter,
    message: &str,
) -> Result<Value, ToolError> {
    let ctx = CallContext {
        approver: gate.clone(),
        consenter,
        ..CallContext::default()
    };
    let args = json!({ "message": message }).to_string();
    let report = env.host.call_in("echo", &args, &ctx).await;
    report.result.map(|out| out.json().expect("JSON result"))
}

fn holder(app: &str, user: &str) -> Consenter {
    Consenter::Holder {
        holder: format!("oauth:{app:?} for {user:?}").into(),
        person: format!("oauth user {user:?}").into(),
    }
}

/// `echo` served under the built-in policy with `max_running` calls on the host and
/// `per_user` for one OAuth user, and a closed gate: an `echo` of "hold" waits at it for a
/// person, a call held open without a process.
async fn held_at_a_gate(max_running: usize, per_user: usize) -> (Arc<TestEnv>, Arc<Gate>) {
    let mut policy = Policy::builtin().expect("built-in policy");
    policy.calls.max_running = max_running;
    policy.calls.max_running_per_user = per_user;
    policy.approval.insert(
        0,
        ApprovalRule {
            tool: "echo".into(),
            arg: Some("message".into()),
            matches: vec!["hold".into()],
            mode: ApprovalHint::Always,
        },
    );
    let env = Arc::new(TestEnv::with_policy(&[component("echo")], policy).await);
    let gate = Arc::new(Gate {
        asked: AtomicUsize::new(0),
        open: Semaphore::new(0),
    });
    (env, gate)
}

/// `n` calls of "hold" by `consenter`, once each waits at the gate.
async fn hold(
    env: &Arc<TestEnv>,
    gate: &Arc<Gate>,
    consenter: &Consenter,
    n: usize,
) -> Vec<tokio::task::JoinHandle<Result<Value, ToolError>>> {
    let held = (0..n)
        .map(|_| {
            let (env, gate, consenter) = (env.clone(), gate.clone(), consenter.clone());
            tokio::spawn(async move { echo_as(&env, &gate, consenter, "hold").await })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    while gate.asked.load(Ordering::SeqCst) < n {
        assert!(
            Instant::now() < deadline,
            "the held calls were not all asked about"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    held
}

#[tokio::test]
async fn one_oauth_user_runs_only_so_many_calls_at_once() {
    let (env, gate) = held_at_a_gate(1000, 3).await;
    let alice = holder("app", "alice");
    let held = hold(&env, &gate, &alice, 3).await;
    // Her fourth, through this application or another of her own, is refused at once...
    for (how, consenter) in [
        ("again", alice.clone()),
        ("elsewhere", holder("another app", "alice")),
    ] {
        match echo_as(&env, &gate, consenter, "hi").await {
            Err(ToolError::RateLimited(why)) => assert!(
                why.contains("\"alice\" already runs 3 tool calls")
                    && why.contains("`[calls] max_running_per_user`"),
                "{why}"
            ),
            other => panic!("alice's fourth call ({how}) was not refused: {other:?}"),
        }
    }
    // ...and nobody was asked about it.
    assert_eq!(gate.asked.load(Ordering::SeqCst), 3);
    // Others still call.
    for (who, consenter) in [
        ("bob", holder("app", "bob")),
        ("the operator", Consenter::Operator),
    ] {
        let out = echo_as(&env, &gate, consenter, "hi")
            .await
            .unwrap_or_else(|e| panic!("{who} was refused while alice held her share: {e}"));
        assert_eq!(out["message"], "hi", "{who}");
    }
    gate.open.add_permits(3);
    for call in held {
        let out = call.await.expect("join").expect("alice's held call");
        assert_eq!(out["message"], "hold");
    }
    let out = echo_as(&env, &gate, alice, "hi")
        .await
        .expect("alice's slots came back");
    assert_eq!(out["message"], "hi");
}

#[tokio::test]
async fn the_policy_bounds_the_calls_the_whole_host_runs_at_once() {
    let (env, gate) = held_at_a_gate(2, 2).await;
    // The operator's own calls (a terminal, stdio, the bearer token) hold the host's two.
    let held = hold(&env, &gate, &Consenter::Operator, 2).await;
    for (who, consenter) in [
        ("the operator", Consenter::Operator),
        ("alice", holder("app", "alice")),
    ] {
        match echo_as(&env, &gate, consenter, "hi").await {
            Err(ToolError::RateLimited(why)) => assert!(
                why.contains("2 tool calls are already running in this chitin process")
                    && why.contains("`[calls] max_running`"),
                "{who}: {why}"
            ),
            other => panic!("{who}'s third call on the host was not refused: {other:?}"),
        }
    }
    assert_eq!(
        gate.asked.load(Ordering::SeqCst),
        2,
        "a refused call was asked about"
    );
    gate.open.add_permits(2);
    for call in held {
        let out = call.await.expect("join").expect("a held call");
        assert_eq!(out["message"], "hold");
    }
    let out = echo_as(&env, &gate, holder("app", "alice"), "hi")
        .await
        .expect("the host's slots came back");
    assert_eq!(out["message"], "hi");
}
