//! `chitin:host/client` end to end through the conformance fixture: questions reach the call's
//! asker within the grant, the answers come back to the component, the policy's cut and a call
//! with no MCP client fail closed.

use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use chitin_host::approver::CallContext;
use chitin_host::client::{ClientAsker, ClientMethod, ClientQuestion};
use chitin_host::policy::Policy;
use chitin_host::{Host, Limits, Runtime, ToolError};
use common::{fixture, policy, services, test_engine};
use serde_json::{Value, json};

/// Declares `declared` and answers each question as a person named Ada would, recording them.
struct Recorder {
    declared: Vec<ClientMethod>,
    asked: Mutex<Vec<(String, &'static str)>>,
}

impl Recorder {
    fn new(declared: &[ClientMethod]) -> Arc<Self> {
        Arc::new(Self {
            declared: declared.to_vec(),
            asked: Mutex::new(Vec::new()),
        })
    }

    fn asked(&self) -> Vec<(String, &'static str)> {
        self.asked.lock().expect("lock").clone()
    }
}

#[async_trait::async_trait]
impl ClientAsker for Recorder {
    fn declared(&self) -> Vec<ClientMethod> {
        self.declared.clone()
    }

    async fn ask(&self, questions: &[ClientQuestion]) -> Result<Vec<Value>, String> {
        let mut asked = self.asked.lock().expect("lock");
        Ok(questions
            .iter()
            .map(|q| {
                asked.push((q.key.clone(), q.mcp_method()));
                match q.method {
                    ClientMethod::Elicit => json!({"action": "accept", "content": {"name": "Ada"}}),
                    ClientMethod::Sample => json!({"role": "assistant",
                        "content": {"type": "text", "text": "Paris"}, "model": "m"}),
                    ClientMethod::ListRoots => json!({"roots": [{"uri": "file:///ada"}]}),
                }
            })
            .collect())
    }
}

async fn host(data: &Path, policy: Policy) -> Host {
    let ws = data.join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut host = Host::new(runtime, policy, services(data, &ws));
    host.load_path(&fixture("test-conformance"))
        .await
        .expect("load");
    host
}

async fn call(host: &Host, tool: &str, asker: Arc<dyn ClientAsker>) -> Result<String, ToolError> {
    let ctx = CallContext {
        client: asker,
        ..CallContext::default()
    };
    let report = host.call_in(tool, "{}", &ctx).await;
    report.result.map(|out| {
        let v = out.json().expect("JSON");
        v["$content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    })
}

#[tokio::test]
async fn questions_reach_the_asker_and_the_answers_the_component() {
    let data = tempfile::tempdir().expect("tempdir");
    let h = host(data.path(), policy(Limits::default())).await;
    let all = [
        ClientMethod::Elicit,
        ClientMethod::Sample,
        ClientMethod::ListRoots,
    ];
    let recorder = Recorder::new(&all);
    let text = call(
        &h,
        "test_input_required_result_multiple_inputs",
        recorder.clone(),
    )
    .await
    .expect("answered");
    assert_eq!(text, "name: Ada; greeting: Paris; roots: file:///ada");
    assert_eq!(
        recorder.asked(),
        [
            ("user_name".to_owned(), "elicitation/create"),
            ("greeting".to_owned(), "sampling/createMessage"),
            ("client_roots".to_owned(), "roots/list"),
        ]
    );

    // Only what the client declared is supported: the fixture asks the sampling alone.
    let sampler = Recorder::new(&[ClientMethod::Sample]);
    let text = call(
        &h,
        "test_input_required_result_capabilities",
        sampler.clone(),
    )
    .await
    .expect("answered");
    assert_eq!(text, "1 answers received");
    assert_eq!(
        sampler.asked(),
        [("capital_question".to_owned(), "sampling/createMessage")]
    );
}

#[tokio::test]
async fn without_a_client_or_with_the_section_cut_nobody_is_asked() {
    let data = tempfile::tempdir().expect("tempdir");
    let h = host(data.path(), policy(Limits::default())).await;
    let report = h.call("test_input_required_result_elicitation", "{}").await;
    let Err(ToolError::PermissionDenied(why)) = report.result else {
        panic!(
            "a call with no MCP client must be refused: {:?}",
            report.result
        );
    };
    assert!(why.contains("no MCP client made this call"), "{why}");

    let mut cut = policy(Limits::default());
    cut.capabilities.allow.retain(|c| c != "client");
    let data = tempfile::tempdir().expect("tempdir");
    let h = host(data.path(), cut).await;
    let recorder = Recorder::new(&[ClientMethod::Elicit]);
    let err = call(
        &h,
        "test_input_required_result_elicitation",
        recorder.clone(),
    )
    .await
    .expect_err("the policy cut the section");
    assert!(
        err.to_string().contains("policy's capabilities.allow"),
        "{err}"
    );
    assert!(recorder.asked().is_empty());
}
