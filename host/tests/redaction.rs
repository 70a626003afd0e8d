//! One redactor for everything a component sends out: the `test-http` fixture's `leak` tool
//! puts the value of a secret it can reach into one channel at a time (result, error, log,
//! stdout, progress, approval reason), and the value reaches no caller, event sink or person.

use crate::common;

use std::sync::{Arc, Mutex};

use chitin_host::approver::{ApprovalRequest, Approver, CallContext, Decision};
use chitin_host::events::{CallEvent, CallEvents};
use chitin_host::{CallReport, Limits};
use common::{TestEnv, fixture};
use serde_json::json;

/// The secret's value: long enough to be looked for, unlike any ordinary text.
const VALUE: &str = "leak-VALUE-7c1e9b3a5d2f";

/// Records every question put to it; denies the component's own requests, naming the reason it
/// was given (as a person's refusal might quote it back), and approves the host's.
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

#[async_trait::async_trait]
impl Approver for Recorder {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let asked = format!(
            "{} | {} | {}",
            request.tool, request.reason, request.args_json
        );
        self.0.lock().expect("lock").push(asked);
        if request.reason.starts_with("the component asks") {
            Decision::Denied(format!("no: {}", request.reason))
        } else {
            Decision::Approved
        }
    }
}

/// Call `leak` with `channel`: everything the call produced, as text, for searching.
async fn leak(env: &TestEnv, channel: &str, text: &str) -> String {
    let recorder = Arc::new(Recorder::default());
    let (events, mut rx) = CallEvents::channel();
    let ctx = CallContext {
        approver: recorder.clone(),
        events,
        ..CallContext::default()
    };
    let args = json!({"channel": channel, "text": text}).to_string();
    let report: CallReport = env.host.call_in("leak", &args, &ctx).await;
    drop(ctx);
    let mut seen = vec![format!("{:?}", report.result), format!("{:?}", report.log)];
    while let Ok(event) = rx.try_recv() {
        seen.push(match event {
            CallEvent::Progress { message, .. } => format!("progress {message:?}"),
            CallEvent::Log(entry) => format!("log {entry:?}"),
        });
    }
    seen.extend(recorder.0.lock().expect("lock").iter().cloned());
    seen.join("\n")
}

async fn env() -> TestEnv {
    let env = TestEnv::new(&[], Limits::default()).await;
    env.host
        .services()
        .secrets()
        .expect("secret store")
        .set("test_token", VALUE)
        .expect("set secret");
    let mut env = env;
    env.host
        .load_path(&fixture("test-http"))
        .await
        .expect("load test-http");
    env
}

/// Each channel carries the text somewhere the test can see (so a passing test is not an empty
/// one), and never the secret's value.
async fn assert_redacted(channel: &str, marker: &str) {
    let env = env().await;
    let seen = leak(&env, channel, &format!("token={VALUE}")).await;
    assert!(
        !seen.contains(VALUE),
        "{channel} leaked the secret:\n{seen}"
    );
    assert!(
        seen.contains(marker),
        "{channel}: expected {marker} in what the call produced:\n{seen}"
    );
}

#[tokio::test]
async fn results_are_redacted() {
    assert_redacted("result", "token=[REDACTED:test_token]").await;
}

#[tokio::test]
async fn errors_are_redacted() {
    assert_redacted("error", "token=[REDACTED:test_token]").await;
}

#[tokio::test]
async fn log_entries_are_redacted_in_the_record_and_the_stream() {
    let env = env().await;
    let seen = leak(&env, "log", &format!("token={VALUE}")).await;
    assert!(!seen.contains(VALUE), "{seen}");
    assert!(
        seen.lines()
            .any(|l| l.starts_with("log ") && l.contains("[REDACTED:test_token]")),
        "the streamed entry is there, redacted:\n{seen}"
    );
}

#[tokio::test]
async fn stdout_and_stderr_are_redacted() {
    assert_redacted("stdout", "token=[REDACTED:test_token]").await;
}

#[tokio::test]
async fn progress_messages_are_redacted() {
    let env = env().await;
    let seen = leak(&env, "progress", &format!("token={VALUE}")).await;
    assert!(!seen.contains(VALUE), "{seen}");
    assert!(
        seen.contains("progress Some(\"token=[REDACTED:test_token]\")"),
        "{seen}"
    );
}

#[tokio::test]
async fn approval_reasons_and_the_answer_quoting_them_are_redacted() {
    let env = env().await;
    let seen = leak(&env, "approval", &format!("token={VALUE}")).await;
    assert!(!seen.contains(VALUE), "{seen}");
    assert!(
        seen.contains("the component asks: token=[REDACTED:test_token]"),
        "the person saw the question, redacted:\n{seen}"
    );
    // The person is told which call asks: the tool and its arguments (redacted too).
    assert!(
        seen.lines()
            .any(|l| l.starts_with("leak | the component asks")
                && l.contains(r#""channel":"approval""#)),
        "the question names the tool and its arguments:\n{seen}"
    );
}

#[tokio::test]
async fn a_private_key_in_a_progress_message_is_withheld_whole() {
    let env = env().await;
    let pem = format!(
        "-----BEGIN {}PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END {}PRIVATE KEY-----",
        "RSA ", "RSA "
    );
    let seen = leak(&env, "progress", &pem).await;
    assert!(!seen.contains("MIIEvQIBADANBg"), "{seen}");
    assert!(seen.contains("progress message withheld"), "{seen}");
}
