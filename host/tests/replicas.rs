//! Replicas sharing PostgreSQL: two `chitin serve --http` processes with separate data
//! directories and one throwaway database. A write through A is found through B after A is
//! SIGKILLed; with the database stopped, state calls fail with a typed error naming it while
//! `echo` keeps working and readiness goes false, and both recover on their own when it
//! returns. An approval revoked through B's CLI is asked again on A; the outbound rate limit
//! per (user, tool) counts calls through both; a component installed through the CLI into the
//! shared set is fetched from a real OCI registry, verified and served by both, whose sessions
//! get `tools/list_changed`; a moved tag is refused by its pinned digest. Real processes, real
//! PostgreSQL, loopback only, bounded in time.

use crate::common;
use crate::https_server;
use crate::postgres;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use postgres::Postgres;

/// A running `chitin serve --http` replica.
struct Replica {
    child: Child,
    addr: String,
    token: String,
    /// What it said on stderr after its banner.
    said: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// How a replica is started besides its data directory and database.
struct Setup {
    /// Component files or directories it serves (`--components`).
    components: Vec<PathBuf>,
    /// Its policy file, when not the built-in one.
    policy: Option<PathBuf>,
    /// Its trust store.
    trust: PathBuf,
}

impl Setup {
    /// memory and echo under the built-in policy, trusting the development key.
    fn memory_and_echo() -> Self {
        Self {
            components: vec![common::component("memory"), common::component("echo")],
            policy: None,
            trust: common::repo().join("build/trusted_keys"),
        }
    }
}

impl Replica {
    async fn start(data: &Path, pg: &Postgres) -> Self {
        Self::start_with(data, pg, &Setup::memory_and_echo()).await
    }

    async fn start_with(data: &Path, pg: &Postgres, setup: &Setup) -> Self {
        let workspace = data.join("workspace");
        std::fs::create_dir_all(&workspace).expect("workspace");
        let mut command = Command::new(env!("CARGO_BIN_EXE_chitin"));
        command.args(["serve", "--no-watch", "--http", "127.0.0.1:0"]);
        for component in &setup.components {
            command.arg("--components").arg(component);
        }
        if let Some(policy) = &setup.policy {
            command.arg("--policy").arg(policy);
        }
        let mut child = command
            .env("CHITIN_DATA_DIR", data)
            // Compiled code comes from the run's cache; what replicas share is under test, not it.
            .env("CHITIN_CACHE_DIR", common::shared_cache())
            .env("CHITIN_WORKSPACE", &workspace)
            .env("CHITIN_STATE_URL", pg.url())
            .env("CHITIN_TRUSTED_KEYS", &setup.trust)
            .env_remove("CHITIN_COMPONENTS")
            .env_remove("CHITIN_POLICY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn chitin serve --http");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let addr = loop {
            let line = lines
                .next_line()
                .await
                .expect("read the banner")
                .expect("chitin serve --http exited before listening");
            if let Some(at) = line.find("over HTTP at http://") {
                let rest = &line[at + "over HTTP at http://".len()..];
                break rest.split('/').next().unwrap_or_default().to_owned();
            }
        };
        // What the replica says goes to the test's output, shown when a test fails.
        let shown = addr.clone();
        let said = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = said.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[replica {shown}] {line}");
                keep.lock().expect("log").push(line);
            }
        });
        let token = std::fs::read_to_string(data.join("http-token")).expect("token");
        Self {
            child,
            addr,
            token: token.trim().to_owned(),
            said,
        }
    }

    /// Wait up to 30 s until a line it said contains every one of `words`; that line.
    async fn said(&self, words: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let found = self
                .said
                .lock()
                .expect("log")
                .iter()
                .find(|l| words.iter().all(|w| l.contains(w)))
                .cloned();
            if let Some(line) = found {
                return line;
            }
            assert!(
                Instant::now() < deadline,
                "the replica never said {words:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// GET `path`: the status and body.
    async fn get(&self, path: &str) -> (u16, String) {
        let request = Request::get(path)
            .header("host", &self.addr)
            .body(Full::new(Bytes::new()))
            .expect("request");
        self.send(request).await
    }

    /// A 2026-07-28 stateless `tools/call`: the result, or the JSON-RPC error.
    async fn call(&self, tool: &str, arguments: Value) -> Value {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "replicas-test", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}}}});
        let request = Request::post("/mcp")
            .header("host", &self.addr)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("request");
        let (status, text) = self.send(request).await;
        assert_eq!(status, 200, "{text}");
        // A JSON body, or an event stream whose data line holds the response.
        let json = text
            .lines()
            .find_map(|l| l.strip_prefix("data:"))
            .unwrap_or(&text)
            .trim();
        let response: Value = serde_json::from_str(json).expect("JSON-RPC response");
        response
            .get("result")
            .or_else(|| response.get("error"))
            .cloned()
            .unwrap_or(response)
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> (u16, String) {
        let stream = TcpStream::connect(&self.addr).await.expect("connect");
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("HTTP/1.1 handshake");
        tokio::spawn(connection);
        let response = sender.send_request(request).await.expect("send");
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }
}

fn text_of(result: &Value) -> String {
    result.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_state_through_postgres_and_survive_its_outage() {
    tokio::time::timeout(Duration::from_secs(240), run())
        .await
        .expect("the test finishes within four minutes");
}

async fn run() {
    let pg = tokio::task::spawn_blocking(Postgres::start)
        .await
        .expect("start PostgreSQL");
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut a = Replica::start(dir_a.path(), &pg).await;
    let b = Replica::start(dir_b.path(), &pg).await;

    // Written through A, acknowledged, then A is killed: B finds it.
    let wrote = a
        .call(
            "memory_write",
            json!({"content": "the replicamarker fact\n", "target": "shared.md"}),
        )
        .await;
    assert_eq!(wrote["isError"], false, "{wrote}");
    a.child.start_kill().expect("SIGKILL A");
    a.child.wait().await.expect("A exits");
    let found = b
        .call("memory_search", json!({"query": "replicamarker"}))
        .await;
    assert!(text_of(&found).contains("replicamarker"), "{found}");

    // Probes need no token.
    assert_eq!(b.get("/healthz").await.0, 200);
    let (status, body) = b.get("/readyz").await;
    assert_eq!(status, 200, "{body}");

    // The database goes away: calls needing state fail naming it, echo works, not ready.
    tokio::task::block_in_place(|| pg.halt());
    let failed = b
        .call("memory_search", json!({"query": "replicamarker"}))
        .await;
    // A database fault is the operator's, not the tool's: a JSON-RPC error, not a tool result.
    let text = text_of(&failed);
    assert_eq!(failed["code"], -32603, "{failed}");
    assert!(text.contains("host fault"), "{failed}");
    assert!(text.contains("state database"), "{failed}");
    assert!(text.contains("cannot be reached"), "{failed}");
    let echoed = b.call("echo", json!({"message": "still here"})).await;
    assert_eq!(echoed["isError"], false, "{echoed}");
    let (status, body) = b.get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("state database"), "{body}");

    // It comes back: readiness and state calls recover without a restart.
    tokio::task::block_in_place(|| pg.resume());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = b.get("/readyz").await;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "not ready again: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let found = b
        .call("memory_search", json!({"query": "replicamarker"}))
        .await;
    assert!(text_of(&found).contains("replicamarker"), "{found}");
}

/// `http` re-signed with its `host = "*"` grants narrowed to `port` (the built-in grants admit
/// port 443 only), written under `dir`.
fn http_on_port(port: u16, dir: &Path) -> PathBuf {
    let manifest = std::fs::read_to_string(common::repo().join("components/http/manifest.toml"))
        .expect("manifest")
        .replace("host = \"*\"", &format!("host = \"*\", port = {port}"));
    let wasm = std::fs::read(common::component("http")).expect("http.wasm");
    let path = dir.join(format!("http-{port}.wasm"));
    std::fs::write(&path, common::resign(&wasm, &manifest)).expect("write");
    path
}

/// The built-in policy admitting the test HTTPS server (its address and CA), with a limit of
/// three requests a minute per (user, tool).
fn lab_policy(server: &https_server::TestServer) -> String {
    chitin_host::policy::DEFAULT_POLICY
        .replace(
            "ca_files = []",
            &format!("ca_files = [{:?}]", server.ca_file),
        )
        .replace("allow_addresses = []", "allow_addresses = [\"127.0.0.1\"]")
        .replace(
            "rate_limit = { per_minute = 60, per_hour = 1000 }",
            "rate_limit = { per_minute = 3, per_hour = 100 }",
        )
}

/// A `chitin` command line on `data` (its own workspace beside it) against `pg`.
fn cli(data: &Path, trust: &Path, args: &[&str]) -> std::process::Output {
    let workspace = data.join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    std::process::Command::new(env!("CARGO_BIN_EXE_chitin"))
        .env("CHITIN_DATA_DIR", data)
        .env("CHITIN_CACHE_DIR", common::shared_cache())
        .env("CHITIN_WORKSPACE", &workspace)
        .env("CHITIN_TRUSTED_KEYS", trust)
        .env_remove("CHITIN_COMPONENTS")
        .env_remove("CHITIN_POLICY")
        .env_remove("CHITIN_STATE_URL")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run chitin")
}

fn ok(out: &std::process::Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

/// An MCP client (a 2025-11-25 session over Streamable HTTP) whose person approves every
/// question with "always allow", counting the questions and the `tools/list_changed` it gets.
struct Listener {
    changed: tokio::sync::mpsc::UnboundedSender<()>,
    asked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl rmcp::ClientHandler for Listener {
    async fn on_tool_list_changed(
        &self,
        _: rmcp::service::NotificationContext<rmcp::service::RoleClient>,
    ) {
        let _ = self.changed.send(());
    }

    async fn create_elicitation(
        &self,
        _: rmcp::model::ElicitRequestParams,
        _: rmcp::service::RequestContext<rmcp::service::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(
            rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept)
                .with_content(json!({"approve": true, "always": true})),
        )
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut capabilities = rmcp::model::ClientCapabilities::default();
        let mut elicitation = rmcp::model::ElicitationCapability::new();
        elicitation.form = Some(rmcp::model::FormElicitationCapability::default());
        capabilities.elicitation = Some(elicitation);
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("replicas-test", "0"),
        )
    }
}

type Session = rmcp::service::RunningService<rmcp::service::RoleClient, Listener>;

/// A session with `replica`: the client, its `tools/list_changed` and how many questions its
/// person answered.
async fn session(
    replica: &Replica,
) -> (
    Session,
    tokio::sync::mpsc::UnboundedReceiver<()>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", replica.addr))
            .auth_header(replica.token.clone());
    let (changed, rx) = tokio::sync::mpsc::unbounded_channel();
    let asked = std::sync::Arc::default();
    let listener = Listener {
        changed,
        asked: std::sync::Arc::clone(&asked),
    };
    let client = listener
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize over HTTP");
    (client, rx, asked)
}

/// Call `tool` in `session`: the result, whether the tool succeeded or failed.
async fn call_raw(session: &Session, tool: &str, arguments: Value) -> Value {
    let params = rmcp::model::CallToolRequestParams::new(tool.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap_or_default());
    let result = session.call_tool(params).await.expect("tools/call");
    serde_json::to_value(&result).expect("json")
}

/// Call `tool` in `session`, requiring success.
async fn call_in(session: &Session, tool: &str, arguments: Value) -> Value {
    let result = call_raw(session, tool, arguments).await;
    assert_eq!(result["isError"], false, "{tool}: {result}");
    result
}

async fn tool_names(session: &Session) -> Vec<String> {
    let tools = session.list_all_tools().await.expect("tools/list");
    tools.into_iter().map(|t| t.name.to_string()).collect()
}

/// Anyone may read and write: the publisher's push needs no credentials in this test.
fn oci_registry(storage: &Path) -> container_registry::test_support::RunningRegistry {
    container_registry::ContainerRegistry::builder()
        .storage(storage)
        .build_for_testing()
        .run_in_background()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_approvals_rate_limits_and_the_installed_set() {
    tokio::time::timeout(Duration::from_secs(300), shared_by_replicas())
        .await
        .expect("the test finishes within five minutes");
}

async fn shared_by_replicas() {
    // The MCP client's TLS stack wants a process-wide provider: ring, as chitin itself uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pg = tokio::task::spawn_blocking(Postgres::start)
        .await
        .expect("start PostgreSQL");
    let root = tempfile::tempdir().expect("tempdir");
    let root = root.path();
    let server = https_server::start(root).await;
    let storage = root.join("oci");
    std::fs::create_dir_all(&storage).expect("storage");
    let registry = oci_registry(&storage);
    let registry_url = format!("oci+http://127.0.0.1:{}", registry.bound_addr().port());

    // Both replicas trust the development and test keys, serve fs and the lab-narrowed http
    // under the lab policy, and name the OCI registry `lab`.
    let trust = root.join("trusted_keys");
    common::test_trust().save(&trust).expect("trust store");
    let policy = root.join("policy.toml");
    std::fs::write(&policy, lab_policy(&server)).expect("policy");
    let setup = Setup {
        components: vec![
            common::component("fs"),
            http_on_port(server.addr.port(), root),
        ],
        policy: Some(policy),
        trust: trust.clone(),
    };
    let (dir_a, dir_b) = (root.join("a"), root.join("b"));
    for dir in [&dir_a, &dir_b] {
        std::fs::create_dir_all(dir).expect("data dir");
        std::fs::write(
            dir.join("registries.toml"),
            format!("[registries.lab]\nurl = \"{registry_url}\"\n"),
        )
        .expect("registries.toml");
    }
    let a = Replica::start_with(&dir_a, &pg, &setup).await;
    let b = Replica::start_with(&dir_b, &pg, &setup).await;

    // An approval remembered ("always allow") through A, revoked through B's CLI: A asks
    // again.
    let (session_a, mut changed_a, asked_a) = session(&a).await;
    let (session_b, mut changed_b, _) = session(&b).await;
    let count =
        |asked: &std::sync::atomic::AtomicUsize| asked.load(std::sync::atomic::Ordering::SeqCst);
    let write = json!({"path": "note.txt", "content": "from A\n"});
    call_in(&session_a, "write_file", write.clone()).await;
    assert_eq!(count(&asked_a), 1, "write_file asks for approval");
    call_in(&session_a, "write_file", write.clone()).await;
    assert_eq!(count(&asked_a), 1, "remembered, so not asked again");
    let out = cli(
        &dir_b,
        &trust,
        &[
            "approvals",
            "revoke",
            "write_file",
            "--state-url",
            &pg.url(),
        ],
    );
    assert!(ok(&out).contains("revoked approval"), "{}", ok(&out));
    call_in(&session_a, "write_file", write.clone()).await;
    assert_eq!(count(&asked_a), 2, "revoked through B, so A asks again");

    // The rate limit per (user, tool) is one across the replicas: three requests a minute in
    // all, through A and B together.
    let get = json!({"method": "GET", "url": server.url("/echo")});
    for session in [&session_a, &session_b, &session_a] {
        call_in(session, "http", get.clone()).await;
    }
    let refused = call_raw(&session_b, "http", get.clone()).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text_of(&refused).contains("rate"), "{refused}");

    // A component installed through the CLI into the shared set: both replicas fetch it from
    // the registry, verify it and serve it, and tell their sessions the tool list changed.
    let publisher = root.join("publisher");
    let echo = std::fs::read(common::component("echo")).expect("echo.wasm");
    let manifest = "schema = 1\n[component]\nname = \"relay\"\nnamespace = \"test\"\n\
                    version = \"1.0.0\"\npublisher = \"tests\"\n\
                    description = \"Echo, installed on every replica\"\n";
    std::fs::create_dir_all(&publisher).expect("publisher");
    let relay = publisher.join("relay.wasm");
    std::fs::write(&relay, common::resign(&echo, manifest)).expect("relay.wasm");
    ok(&cli(
        &publisher,
        &trust,
        &[
            "publish",
            relay.to_str().expect("utf-8"),
            "--registry",
            &registry_url,
        ],
    ));
    assert!(!tool_names(&session_a).await.contains(&"test__echo".into()));
    let out = cli(
        &dir_b,
        &trust,
        &[
            "install",
            "test/relay",
            "--registry",
            "lab",
            "--yes",
            "--state-url",
            &pg.url(),
        ],
    );
    assert!(ok(&out).contains("shared installed set"), "{}", ok(&out));
    for changed in [&mut changed_a, &mut changed_b] {
        tokio::time::timeout(Duration::from_secs(30), changed.recv())
            .await
            .expect("tools/list_changed within 30 s")
            .expect("the session is open");
    }
    for session in [&session_a, &session_b] {
        let names = tool_names(session).await;
        assert!(names.contains(&"test__echo".into()), "{names:?}");
    }
    let echoed = b.call("test__echo", json!({"message": "fleet"})).await;
    assert!(text_of(&echoed).contains("fleet"), "{echoed}");
    let echoed = call_in(&session_a, "test__echo", json!({"message": "fleet"})).await;
    assert!(text_of(&echoed).contains("fleet"), "{echoed}");
    let listed = ok(&cli(
        &dir_a,
        &trust,
        &["list", "--installed", "--state-url", &pg.url()],
    ));
    assert!(listed.contains("test/relay"), "{listed}");

    // A component signed by a key the terminal trusts but the replicas do not: each replica
    // refuses it by name and keeps serving the set it had.
    let stranger = chitin_registry::keys::SigningKey::generate();
    let mut terminal_trust = common::test_trust();
    terminal_trust
        .add(
            chitin_registry::trust_store::TrustedKey::new(
                stranger.public().clone(),
                "stranger",
                vec![chitin_registry::trust_store::Scope::parse("test/*").expect("scope")],
            )
            .expect("entry"),
        )
        .expect("trust the stranger");
    let terminal_keys = root.join("terminal_keys");
    terminal_trust.save(&terminal_keys).expect("trust store");
    let other = publisher.join("other.wasm");
    let other_manifest = manifest
        .replace("name = \"relay\"", "name = \"other\"")
        .replace("on every replica", "by a stranger");
    let bare = chitin_registry::signature::strip(&echo).expect("strip");
    let embedded = chitin_registry::artifact::embed_manifest(
        &bare,
        &common::with_recorded_specs(&echo, &other_manifest),
    )
    .expect("embed");
    let signed = chitin_registry::signature::sign(&embedded, &stranger).expect("sign");
    std::fs::write(&other, signed).expect("other.wasm");
    let before = tool_names(&session_a).await;
    ok(&cli(
        &publisher,
        &terminal_keys,
        &[
            "publish",
            other.to_str().expect("utf-8"),
            "--registry",
            &registry_url,
        ],
    ));
    ok(&cli(
        &dir_b,
        &terminal_keys,
        &[
            "install",
            "test/other",
            "--registry",
            "lab",
            "--yes",
            "--state-url",
            &pg.url(),
        ],
    ));
    for replica in [&a, &b] {
        let line = replica.said(&["test/other@1.0.0", "trust store"]).await;
        assert!(line.contains("still serving the previous set"), "{line}");
    }
    assert_eq!(tool_names(&session_a).await, before);
    let echoed = a.call("test__echo", json!({"message": "kept"})).await;
    assert!(text_of(&echoed).contains("kept"), "{echoed}");
    let removed = ok(&cli(
        &dir_b,
        &trust,
        &["remove", "test/other", "--state-url", &pg.url()],
    ));
    assert!(removed.contains("shared installed set"), "{removed}");

    // The publisher moves the 1.0.0 tag to other content: a new replica refuses it by its
    // pinned digest, names the component, and serves the set it had (none).
    let moved = common::resign(
        &echo,
        &manifest.replace("on every replica", "on every replica, moved"),
    );
    std::fs::write(&relay, moved).expect("moved relay.wasm");
    ok(&cli(
        &publisher,
        &trust,
        &[
            "publish",
            relay.to_str().expect("utf-8"),
            "--registry",
            &registry_url,
            "--replace",
        ],
    ));
    let dir_c = root.join("c");
    std::fs::create_dir_all(&dir_c).expect("data dir");
    std::fs::write(
        dir_c.join("registries.toml"),
        format!("[registries.lab]\nurl = \"{registry_url}\"\n"),
    )
    .expect("registries.toml");
    let fs = common::component("fs");
    let out = cli(
        &dir_c,
        &trust,
        &[
            "list",
            "--components",
            fs.to_str().expect("utf-8"),
            "--state-url",
            &pg.url(),
        ],
    );
    let text = ok(&out);
    assert!(text.contains("test/relay"), "{text}");
    assert!(text.contains("digest"), "{text}");
    assert!(!text.contains("test__echo"), "{text}");

    for session in [session_a, session_b] {
        let _ = session.cancel().await;
    }
}
