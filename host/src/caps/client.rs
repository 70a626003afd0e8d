//! `chitin:host/client`: a component asks the MCP client that made the call (its user, its
//! model, its roots), within the methods its grant names. The host passes the questions to the
//! call's [`ClientAsker`]; what a component asks passes the call's redactor first (a question is
//! a way out too), and a call may ask only so much, so a component cannot flood a person.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;
use wasmtime::component::{HasData, Linker};

use chitin_registry::manifest::ClientGrant;

use crate::call::Call;
use crate::capability::{Capability, CapabilityError, Cut, Holds, Load};
use crate::client::{ClientAsker, ClientMethod, ClientQuestion};
use crate::leak::LeakScanner;

/// `ask` calls one call may make; more are refused without asking.
pub const MAX_ASKS_PER_CALL: u32 = 8;
/// Questions in one `ask`.
pub const MAX_QUESTIONS: usize = 8;
/// Bytes of one question's key.
pub const MAX_KEY_BYTES: usize = 64;
/// Bytes of one question's params.
pub const MAX_PARAMS_BYTES: usize = 64 * 1024;
/// The prefix of the host's own approval questions' keys, so no component question's may start
/// with it.
const RESERVED_PREFIX: &str = "approval";

/// Host bindings of `chitin:host/client`.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        inline: "package chitin:client-host;
                 world client-host { import chitin:host/client@0.1.0; }",
        imports: { default: async },
    });
}

use bindings::chitin::host::client::{Method, Question};

/// The per-call state of the client capability.
pub struct ClientCtx {
    asker: Arc<dyn ClientAsker>,
    granted: Arc<[ClientMethod]>,
    scanner: Arc<LeakScanner>,
    asked: u32,
}

impl ClientCtx {
    /// Questions within `granted` go to `asker`, redacted by `scanner`.
    pub fn new(
        asker: Arc<dyn ClientAsker>,
        granted: Arc<[ClientMethod]>,
        scanner: Arc<LeakScanner>,
    ) -> Self {
        Self {
            asker,
            granted,
            scanner,
            asked: 0,
        }
    }

    /// The methods granted and declared by the client.
    pub fn supported(&self) -> Vec<ClientMethod> {
        let declared = self.asker.declared();
        self.granted
            .iter()
            .copied()
            .filter(|m| declared.contains(m))
            .collect()
    }

    /// Check `questions` and ask them; the answers as JSON text, in order.
    pub async fn ask(
        &mut self,
        questions: Vec<(String, ClientMethod, String)>,
    ) -> Result<Vec<String>, String> {
        if self.asked >= MAX_ASKS_PER_CALL {
            return Err(format!(
                "refused without asking: a call may ask its client at most {MAX_ASKS_PER_CALL} \
                 times"
            ));
        }
        self.asked += 1;
        let questions = self.checked(questions)?;
        let answers = self.asker.ask(&questions).await?;
        answers
            .iter()
            .map(|a| serde_json::to_string(a).map_err(|e| format!("cannot pass an answer on: {e}")))
            .collect()
    }

    fn checked(
        &self,
        questions: Vec<(String, ClientMethod, String)>,
    ) -> Result<Vec<ClientQuestion>, String> {
        if questions.is_empty() || questions.len() > MAX_QUESTIONS {
            return Err(format!(
                "ask between 1 and {MAX_QUESTIONS} questions at once, not {}",
                questions.len()
            ));
        }
        let mut keys = HashSet::new();
        let mut checked = Vec::with_capacity(questions.len());
        for (key, method, params) in questions {
            if key.is_empty() || key.len() > MAX_KEY_BYTES || key.starts_with(RESERVED_PREFIX) {
                return Err(format!(
                    "question key `{key}` is refused: keys are 1 to {MAX_KEY_BYTES} bytes, and \
                     those starting with `{RESERVED_PREFIX}` are the host's own"
                ));
            }
            if !keys.insert(key.clone()) {
                return Err(format!("question key `{key}` is used twice in one ask"));
            }
            if !self.granted.contains(&method) {
                return Err(format!(
                    "this component's grant does not let it ask `{}`: its manifest's \
                     [capabilities.client] methods do not name it, or the policy's \
                     capabilities.allow cut the section",
                    method.as_str()
                ));
            }
            if params.len() > MAX_PARAMS_BYTES {
                return Err(format!(
                    "question `{key}` has {} bytes of params, more than {MAX_PARAMS_BYTES}",
                    params.len()
                ));
            }
            let redacted = self.scanner.redact(&params, "question");
            let params: Value = serde_json::from_str(&redacted)
                .map_err(|e| format!("question `{key}`: params are not JSON: {e}"))?;
            if !params.is_object() {
                return Err(format!("question `{key}`: params must be a JSON object"));
            }
            checked.push(ClientQuestion {
                key,
                method,
                params,
            });
        }
        Ok(checked)
    }
}

fn from_wit(method: Method) -> ClientMethod {
    match method {
        Method::Elicit => ClientMethod::Elicit,
        Method::Sample => ClientMethod::Sample,
        Method::ListRoots => ClientMethod::ListRoots,
    }
}

fn to_wit(method: ClientMethod) -> Method {
    match method {
        ClientMethod::Elicit => Method::Elicit,
        ClientMethod::Sample => Method::Sample,
        ClientMethod::ListRoots => Method::ListRoots,
    }
}

impl bindings::chitin::host::client::Host for &mut ClientCtx {
    async fn supported(&mut self) -> Vec<Method> {
        ClientCtx::supported(self).into_iter().map(to_wit).collect()
    }

    async fn ask(&mut self, questions: Vec<Question>) -> Result<Vec<String>, String> {
        let questions = questions
            .into_iter()
            .map(|q| (q.key, from_wit(q.method), q.params))
            .collect();
        ClientCtx::ask(self, questions).await
    }
}

/// The client capability (and its `HasData` marker).
pub struct Client;

impl HasData for Client {
    type Data<'a> = &'a mut ClientCtx;
}

impl Capability for Client {
    type Section = ClientGrant;
    type Config = Arc<[ClientMethod]>;
    type Ctx = ClientCtx;
    const LINKS: &'static [&'static str] = &["chitin:host/client@"];

    fn configure(
        section: Option<&ClientGrant>,
        _load: &Load<'_>,
        _cuts: &mut Vec<Cut>,
    ) -> Result<Self::Config, CapabilityError> {
        Ok(section
            .map(|c| c.methods.iter().copied().collect())
            .unwrap_or_default())
    }

    fn ctx(config: &Self::Config, call: &Call<'_>) -> ClientCtx {
        ClientCtx::new(
            call.context.client.clone(),
            config.clone(),
            call.scanner.clone(),
        )
    }

    fn add_to_linker<T: Holds<Self>>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        fn get<T: Holds<Client>>(state: &mut T) -> &mut ClientCtx {
            state.parts().0
        }
        bindings::chitin::host::client::add_to_linker::<T, Client>(linker, get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Declares elicitation and answers every question with its own key.
    struct Echo;

    #[async_trait::async_trait]
    impl ClientAsker for Echo {
        fn declared(&self) -> Vec<ClientMethod> {
            vec![ClientMethod::Elicit, ClientMethod::Sample]
        }

        async fn ask(&self, questions: &[ClientQuestion]) -> Result<Vec<Value>, String> {
            Ok(questions
                .iter()
                .map(|q| serde_json::json!({"key": q.key, "params": q.params}))
                .collect())
        }
    }

    fn ctx(granted: &[ClientMethod], secret: Option<(&str, &str)>) -> ClientCtx {
        ClientCtx::new(
            Arc::new(Echo),
            granted.iter().copied().collect(),
            Arc::new(LeakScanner::new(secret).expect("scanner")),
        )
    }

    fn q(key: &str, method: ClientMethod, params: &str) -> (String, ClientMethod, String) {
        (key.to_owned(), method, params.to_owned())
    }

    #[tokio::test]
    async fn only_granted_methods_declared_by_the_client_are_supported_and_asked() {
        let mut ctx = ctx(&[ClientMethod::Elicit, ClientMethod::ListRoots], None);
        assert_eq!(ctx.supported(), [ClientMethod::Elicit]);
        let answers = ctx
            .ask(vec![q("name", ClientMethod::Elicit, r#"{"message":"hi"}"#)])
            .await
            .expect("asked");
        assert_eq!(answers.len(), 1);
        let refused = ctx
            .ask(vec![q("s", ClientMethod::Sample, "{}")])
            .await
            .expect_err("sampling is not granted");
        assert!(
            refused.contains("[capabilities.client] methods"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn bad_keys_params_and_floods_are_refused_and_secrets_redacted() {
        let mut ctx = ctx(&[ClientMethod::Elicit], Some(("token", "s3cr3t-value")));
        let e = ClientMethod::Elicit;
        for bad in [
            vec![q("approval", e, "{}")],
            vec![q("", e, "{}")],
            vec![q("a", e, "{}"), q("a", e, "{}")],
            vec![q("a", e, "not json")],
            vec![q("a", e, "[1]")],
            Vec::new(),
        ] {
            assert!(ctx.ask(bad).await.is_err());
        }
        let answers = ctx
            .ask(vec![q("a", e, r#"{"message":"s3cr3t-value"}"#)])
            .await
            .expect("asked");
        assert!(!answers[0].contains("s3cr3t-value"), "{}", answers[0]);
        for _ in 0..MAX_ASKS_PER_CALL {
            let _ = ctx.ask(vec![q("a", e, "{}")]).await;
        }
        let flood = ctx.ask(vec![q("a", e, "{}")]).await.expect_err("too many");
        assert!(flood.contains("at most"), "{flood}");
    }
}
