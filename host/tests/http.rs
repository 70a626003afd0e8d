//! Outbound HTTP end to end: the `http`, `web_fetch` and `html_to_markdown` components against a
//! real HTTPS server on 127.0.0.1 (test CA), admitted by a test-only policy entry; the default
//! policy refuses the same address. Redirects, size caps (honest, lying and missing lengths),
//! deadlines, the per-call request cap, rate limits, leak scanning, credential injection (and the
//! secret store failing under it), and a certificate from a CA the policy does not trust.

use crate::common;
use crate::https_server;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use chitin_host::approver::{ApprovalRequest, Approver, CallContext, Decision};
use chitin_host::policy::{DEFAULT_POLICY, Policy};
use chitin_host::secrets::{MasterKey, SecretStore};
use chitin_host::state_db::StateDb;
use chitin_host::{CallReport, Host, Limits, Runtime, ToolError};
use common::{component, fixture, resign, services, test_engine};
use https_server::TestServer;
use serde_json::{Value, json};

/// The default policy with its `[http]` keys replaced: `ca_files` always names the server's CA
/// (so a refusal is the address rule's, not TLS's); `lab` adds the test-only entry admitting
/// 127.0.0.1; `rate` replaces the rate-limit ceiling.
fn policy_for(server: &TestServer, lab: bool, rate: Option<&str>) -> Policy {
    Policy::parse(
        &policy_text(server, lab, rate),
        Path::new("test-policy.toml"),
    )
    .expect("policy")
}

/// The text of [`policy_for`].
fn policy_text(server: &TestServer, lab: bool, rate: Option<&str>) -> String {
    let mut text = DEFAULT_POLICY.replace(
        "ca_files = []",
        &format!("ca_files = [{:?}]", server.ca_file),
    );
    if lab {
        text = text.replace("allow_addresses = []", "allow_addresses = [\"127.0.0.1\"]");
    }
    if let Some(rate) = rate {
        text = text.replace(
            "rate_limit = { per_minute = 60, per_hour = 1000 }",
            &format!("rate_limit = {rate}"),
        );
    }
    text
}

/// The test-only entry admitting the server: its address and its CA.
fn lab_policy(server: &TestServer) -> Policy {
    policy_for(server, true, None)
}

/// Approves every request, as a person at a terminal would.
struct Yes;

#[async_trait::async_trait]
impl Approver for Yes {
    async fn approve(&self, _: &ApprovalRequest) -> Decision {
        Decision::Approved
    }
}

/// `wasm` (built from `components/<dir>`) re-signed with its own manifest, its `host = "*"`
/// entries narrowed to the test server's port: the built-in grants admit port 443 only.
fn on_port(wasm: &Path, dir: &str, port: u16, out: &Path) -> PathBuf {
    let manifest = std::fs::read_to_string(
        common::repo()
            .join("components")
            .join(dir)
            .join("manifest.toml"),
    )
    .expect("manifest")
    .replace("host = \"*\"", &format!("host = \"*\", port = {port}"));
    let signed = resign(&std::fs::read(wasm).expect("wasm"), &manifest);
    let path = out.join(format!("{dir}-{port}.wasm"));
    std::fs::write(&path, signed).expect("write");
    path
}

/// A host under `policy` with the markdown library and the three web components loaded (their
/// grants narrowed to `server`'s port), plus any extra component files.
async fn host(
    data: &Path,
    server: &TestServer,
    policy: Policy,
    limits: Option<Limits>,
    extra: &[&Path],
) -> Host {
    let mut policy = policy;
    if let Some(limits) = limits {
        policy.limits = chitin_host::PolicyLimits::fixed(limits);
    }
    let ws = data.join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    let port = server.addr.port();
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut host = Host::new(runtime, policy, services(data, &ws));
    for c in [
        component("markdown"),
        on_port(&component("http"), "http", port, data),
        on_port(&component("web-fetch"), "web-fetch", port, data),
        component("html-to-markdown"),
    ] {
        host.load_path(&c).await.expect("load");
    }
    for path in extra {
        host.load_path(path).await.expect("load extra");
    }
    host
}

/// A caller whose approver says yes (the `http` tool asks before every call).
fn approving() -> CallContext {
    CallContext {
        approver: Arc::new(Yes),
        ..CallContext::default()
    }
}

async fn call(host: &Host, tool: &str, args: Value) -> CallReport {
    host.call_in(tool, &args.to_string(), &approving()).await
}

async fn ok(host: &Host, tool: &str, args: Value) -> Value {
    match call(host, tool, args.clone()).await.result {
        Ok(out) => out.json().expect("JSON result"),
        Err(e) => panic!("{tool} {args}: {e}"),
    }
}

async fn err(host: &Host, tool: &str, args: Value) -> ToolError {
    match call(host, tool, args.clone()).await.result {
        Ok(out) => panic!("{tool} {args} succeeded: {}", out.text),
        Err(e) => e,
    }
}

fn get(url: &str) -> Value {
    json!({"method": "GET", "url": url})
}

#[tokio::test]
async fn a_get_reaches_the_lab_server_and_the_default_policy_refuses_it() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;

    let lab = host(
        &data.path().join("lab"),
        &server,
        lab_policy(&server),
        None,
        &[],
    )
    .await;
    // The http tool asks a person first: with nobody to ask, it is refused.
    let refused = lab
        .call("http", &get(&server.url("/echo")).to_string())
        .await
        .result
        .expect_err("needs approval");
    assert!(refused.to_string().contains("approval"), "{refused}");
    let out = ok(&lab, "http", get(&server.url("/echo?x=1"))).await;
    assert_eq!(out["status"], 200);
    assert_eq!(out["body"]["method"], "GET");
    assert_eq!(out["body"]["target"], "/echo?x=1");

    // Same address, same CA, but no test-only entry admitting 127.0.0.1: refused as loopback,
    // and nothing reaches the server.
    let before = server.hits.load(Ordering::SeqCst);
    let default = host(
        &data.path().join("default"),
        &server,
        policy_for(&server, false, None),
        None,
        &[],
    )
    .await;
    let e = err(&default, "http", get(&server.url("/echo"))).await;
    assert!(matches!(e, ToolError::PermissionDenied(_)), "{e:?}");
    assert!(e.to_string().contains("loopback"), "{e}");
    assert_eq!(server.hits.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn a_component_without_an_http_grant_is_refused_and_the_refusal_logged() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let manifest = std::fs::read_to_string(common::repo().join("components/http/manifest.toml"))
        .expect("manifest");
    let (ungranted, _) = manifest
        .split_once("[capabilities.http]")
        .expect("the manifest grants http");
    let wasm = std::fs::read(component("http")).expect("wasm");
    let path = data.path().join("http-ungranted.wasm");
    std::fs::write(&path, resign(&wasm, ungranted)).expect("write");
    let ws = data.path().join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut host = Host::new(runtime, lab_policy(&server), services(data.path(), &ws));
    host.load_path(&path).await.expect("load");
    let report = call(&host, "http", get(&server.url("/echo"))).await;
    let e = report.result.expect_err("no grant, no request");
    assert!(matches!(e, ToolError::PermissionDenied(_)), "{e:?}");
    assert!(e.to_string().contains("no HTTP grant"), "{e}");
    let log = format!("{:?}", report.log);
    assert!(log.contains("chitin no-grant"), "{log}");
    assert_eq!(server.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_certificate_from_a_ca_the_policy_does_not_trust_is_refused() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    // The lab entry admits the address, but the policy trusts only the public roots, not the
    // server's test CA: the handshake fails and no request reaches the server.
    let untrusted = Policy::parse(
        &DEFAULT_POLICY.replace("allow_addresses = []", "allow_addresses = [\"127.0.0.1\"]"),
        Path::new("test-policy.toml"),
    )
    .expect("policy");
    let h = host(data.path(), &server, untrusted, None, &[]).await;
    let before = server.hits.load(Ordering::SeqCst);
    let e = err(&h, "http", get(&server.url("/echo"))).await;
    let text = e.to_string().to_lowercase();
    assert!(text.contains("tls") || text.contains("certificate"), "{e}");
    assert_eq!(server.hits.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn redirects_reach_the_tool_unfollowed() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    let out = ok(&h, "http", get(&server.url("/redirect"))).await;
    assert_eq!(out["status"], 302);
    let location = out["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .find(|h| h["name"] == "location")
        .expect("location header");
    assert_eq!(
        location["value"],
        "https://169.254.169.254/latest/meta-data"
    );
    let fetched = ok(&h, "web_fetch", json!({"url": server.url("/redirect")})).await;
    assert_eq!(fetched["status"], 302);
    assert_eq!(
        fetched["location"],
        "https://169.254.169.254/latest/meta-data"
    );
    // And following it by hand is refused: a metadata address.
    let metadata = format!(
        "https://169.254.169.254:{}/latest/meta-data",
        server.addr.port()
    );
    let e = err(&h, "http", get(&metadata)).await;
    assert!(e.to_string().contains("metadata"), "{e}");
}

#[tokio::test]
async fn responses_over_5_mib_are_refused_whatever_their_length_says() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    for path in ["/big", "/lying", "/unsized"] {
        let e = err(&h, "http", get(&server.url(path))).await;
        let text = e.to_string();
        assert!(
            text.contains("5242880") || text.contains("too large") || text.contains("exceeds"),
            "{path}: {text}"
        );
        // The messages only: never the host's backtrace (`RUST_BACKTRACE` set where it runs).
        assert!(
            !text.contains(".rs:") && text.len() < 1000,
            "{path}: {text}"
        );
    }
    // A HEAD answer has no body, whatever length it declares.
    let head = json!({"method": "HEAD", "url": server.url("/declared")});
    let out = ok(&h, "http", head).await;
    assert_eq!(out["status"], 200);
    assert_eq!(out["bytes"], 0);
    // The host carries on.
    let out = ok(&h, "http", get(&server.url("/echo"))).await;
    assert_eq!(out["status"], 200);
}

#[tokio::test]
async fn a_slow_server_meets_the_call_deadline() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let limits = Limits {
        timeout_ms: 2_000,
        ..Limits::default()
    };
    let h = host(data.path(), &server, lab_policy(&server), Some(limits), &[]).await;
    let started = std::time::Instant::now();
    let e = err(&h, "http", get(&server.url("/slow"))).await;
    assert!(
        matches!(e, ToolError::Timeout(_) | ToolError::ExternalService(_)),
        "{e:?}"
    );
    // The server holds the body for 15 s; the call ended on its own deadline instead.
    assert!(started.elapsed() < std::time::Duration::from_secs(12));
}

#[tokio::test]
async fn a_body_that_trickles_in_meets_the_tools_own_timeout() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    let started = std::time::Instant::now();
    let args = json!({"method": "GET", "url": server.url("/drip"), "timeout_secs": 1});
    let e = err(&h, "http", args).await;
    assert!(matches!(e, ToolError::Timeout(_)), "{e:?}");
    // A byte every 200 ms for 20 s: the tool's 1 s holds for the whole exchange.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_rate_limit_answers_with_when_to_retry() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let policy = policy_for(&server, true, Some("{ per_minute = 3, per_hour = 100 }"));
    let h = host(data.path(), &server, policy, None, &[]).await;
    for _ in 0..3 {
        ok(&h, "http", get(&server.url("/echo"))).await;
    }
    let before = server.hits.load(Ordering::SeqCst);
    let e = err(&h, "http", get(&server.url("/echo"))).await;
    assert!(matches!(e, ToolError::RateLimited(_)), "{e:?}");
    assert!(e.to_string().contains("retry"), "{e}");
    assert_eq!(server.hits.load(Ordering::SeqCst), before);
}

/// A data directory, a test server, and a host on both whose policy admits the server's
/// address with the rate limit `rate`.
async fn rated_host(rate: Option<&str>) -> (tempfile::TempDir, TestServer, Host) {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let policy = policy_for(&server, true, rate);
    let h = host(data.path(), &server, policy, None, &[]).await;
    (data, server, h)
}

/// Another chitin process on the data directory `data`: `chitin call --yes http` with a GET
/// of `url` under `rate`; whether it passed, and what it printed.
fn call_elsewhere(
    data: &Path,
    server: &TestServer,
    rate: Option<&str>,
    url: &str,
) -> (bool, String) {
    let policy_file = data.join("policy.toml");
    std::fs::write(&policy_file, policy_text(server, true, rate)).expect("policy");
    let trust_file = data.join("trusted_keys");
    common::test_trust().save(&trust_file).expect("trust file");
    let http = data.join(format!("http-{}.wasm", server.addr.port()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_chitin"))
        .env_remove("CHITIN_COMPONENTS")
        .env_remove("CHITIN_POLICY")
        .env("CHITIN_DATA_DIR", data)
        .env("CHITIN_CACHE_DIR", common::shared_cache())
        .env("CHITIN_TRUSTED_KEYS", &trust_file)
        .arg("--policy")
        .arg(&policy_file)
        .arg("--components")
        .arg(&http)
        .arg("--workspace")
        .arg(data.join("workspace"))
        .args(["call", "--yes", "http"])
        .arg(get(url).to_string())
        .output()
        .expect("run chitin call");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The windows live in the data directory's database: requests sent by this process and by a
/// separate `chitin call` process on the same data directory count against one limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_is_shared_with_other_processes() {
    let rate = Some("{ per_minute = 3, per_hour = 100 }");
    let (data, server, h) = rated_host(rate).await;
    let echo = server.url("/echo");
    ok(&h, "http", get(&echo)).await;
    let (passed, text) = call_elsewhere(data.path(), &server, rate, &echo);
    assert!(
        passed,
        "the other process's first request is within the limit: {text}"
    );
    ok(&h, "http", get(&echo)).await;
    let before = server.hits.load(Ordering::SeqCst);
    let (passed, text) = call_elsewhere(data.path(), &server, rate, &echo);
    assert!(
        !passed,
        "the fourth request, from the other process, is over: {text}"
    );
    assert!(
        text.contains("rate limit of 3 requests per minute"),
        "{text}"
    );
    let e = err(&h, "http", get(&echo)).await;
    assert!(matches!(e, ToolError::RateLimited(_)), "{e:?}");
    assert_eq!(server.hits.load(Ordering::SeqCst), before);
}

/// A slot one process reserved and did not use counts for every other process until it comes
/// back; across processes the minute still lets exactly its limit through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_one_process_reserved_count_for_the_others_and_come_back_unused() {
    // 16 a minute is the least that reserves: 2 slots a commit at most.
    let rate = Some("{ per_minute = 16, per_hour = 1000 }");
    let (data, server, h) = rated_host(rate).await;
    let echo = server.url("/echo");
    // Two requests back to back: the second commit reserves a slot it does not use.
    ok(&h, "http", get(&echo)).await;
    ok(&h, "http", get(&echo)).await;
    // Another process gets the rest of the minute and no more: 16 less this host's two and
    // its reserved slot.
    for i in 0..13 {
        let (passed, text) = call_elsewhere(data.path(), &server, rate, &echo);
        assert!(passed, "request {i} of the other process: {text}");
    }
    let (passed, text) = call_elsewhere(data.path(), &server, rate, &echo);
    assert!(!passed, "the minute is full with the reserved slot: {text}");
    assert!(
        text.contains("rate limit of 16 requests per minute"),
        "{text}"
    );
    // The lease has ended: this host's next request gives the unused slot back and takes it.
    ok(&h, "http", get(&echo)).await;
    let before = server.hits.load(Ordering::SeqCst);
    let e = err(&h, "http", get(&echo)).await;
    assert!(matches!(e, ToolError::RateLimited(_)), "{e:?}");
    assert_eq!(
        server.hits.load(Ordering::SeqCst),
        before,
        "16 in the minute"
    );
}

/// The files library re-signed as `chitin/NAME` with its HTTP grant narrowed to `port` and
/// limited to `per_minute`, and the composed tool re-signed to depend on it by that name.
fn library_and_tool(name: &str, port: u16, per_minute: u32, out: &Path) -> [PathBuf; 2] {
    let manifest = |dir: &str| {
        std::fs::read_to_string(
            common::repo()
                .join("components")
                .join(dir)
                .join("manifest.toml"),
        )
        .expect("manifest")
    };
    let library = manifest("test-lib-files")
        .replace("name = \"test-lib-files\"", &format!("name = \"{name}\""))
        .replace(
            "allow = [{ host = \"*\" }]",
            &format!(
                "allow = [{{ host = \"*\", port = {port} }}]\n\
                 rate_limit = {{ per_minute = {per_minute}, per_hour = 100 }}"
            ),
        );
    let tool = manifest("test-composed").replace(
        "name = \"chitin/test-lib-files\"",
        &format!("name = \"chitin/{name}\""),
    );
    [("test-lib-files", library), ("test-composed", tool)].map(|(fixture_name, text)| {
        let signed = resign(&std::fs::read(fixture(fixture_name)).expect("wasm"), &text);
        let path = out.join(format!("{name}-{fixture_name}.wasm"));
        std::fs::write(&path, signed).expect("write");
        path
    })
}

/// A host with the composed tool on the files library of [`library_and_tool`].
async fn library_host(data: &Path, server: &TestServer, name: &str, per_minute: u32) -> Host {
    let [library, tool] = library_and_tool(name, server.addr.port(), per_minute, data);
    for granted in ["libdir", "rootdir"] {
        std::fs::create_dir_all(data.join("workspace").join(granted)).expect("granted dir");
    }
    let text = fixture("test-lib-text");
    let extra = [text.as_path(), library.as_path(), tool.as_path()];
    host(data, server, lab_policy(server), None, &extra).await
}

/// A library's requests count in windows of its own, per calling user, under its own grant's
/// limits: never in another library's, nor in another user's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_librarys_requests_count_under_the_library_and_the_calling_user() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let fetch = json!({ "url": server.url("/echo") });
    // Another process on the same data directory, whose library may send 50 a minute, sends
    // three first.
    let busy = library_host(data.path(), &server, "test-lib-busy", 50).await;
    for _ in 0..3 {
        ok(&busy, "lib_fetch", fetch.clone()).await;
    }
    drop(busy);
    // A library allowed 2 a minute still has its two...
    let h = library_host(data.path(), &server, "test-lib-files", 2).await;
    for _ in 0..2 {
        let out = ok(&h, "lib_fetch", fetch.clone()).await;
        assert!(out["text"].as_str().is_some_and(|t| !t.is_empty()), "{out}");
    }
    // ...and no third.
    let before = server.hits.load(Ordering::SeqCst);
    let e = err(&h, "lib_fetch", fetch.clone()).await;
    assert!(
        e.to_string()
            .contains("rate limit of 2 requests per minute"),
        "{e}"
    );
    assert_eq!(server.hits.load(Ordering::SeqCst), before);
    // Another user's calls count apart.
    let alice = CallContext {
        user: "alice".into(),
        ..approving()
    };
    let report = h.call_in("lib_fetch", &fetch.to_string(), &alice).await;
    assert!(report.result.is_ok(), "{:?}", report.result.err());
}

#[tokio::test]
async fn url_tricks_are_refused_before_anything_is_sent() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    let port = server.addr.port();
    for url in [
        format!("https://user:pass@127.0.0.1:{port}/echo"),
        format!("https://127.0.0.1:{port}/a%2f..%2fecho"),
        format!("https://127.0.0.1:{port}/bad%zzescape"),
        format!("http://127.0.0.1:{port}/echo"),
        format!("ftp://127.0.0.1:{port}/echo"),
        "https://[::ffff:127.0.0.1]/echo".to_owned(),
        "https://2130706433/echo".to_owned(),
        "https://0x7f.1/echo".to_owned(),
        "https://10.0.0.1/".to_owned(),
        "https://100.64.0.1/".to_owned(),
        "https://localhost/".to_owned(),
    ] {
        let before = server.hits.load(Ordering::SeqCst);
        let e = err(&h, "http", get(&url)).await;
        assert!(
            matches!(
                e,
                ToolError::PermissionDenied(_) | ToolError::InvalidArgs(_)
            ),
            "{url}: {e:?}"
        );
        assert_eq!(
            server.hits.load(Ordering::SeqCst),
            before,
            "{url} reached the server"
        );
    }
    // A legitimately encoded path still passes.
    let out = ok(
        &h,
        "http",
        get(&server.url("/echo?q=caf%C3%A9%20au%20lait")),
    )
    .await;
    assert_eq!(out["status"], 200);
}

#[tokio::test]
async fn a_response_past_the_calls_output_budget_is_cut_to_whole_json() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    // `/echo` answers JSON holding the body sent: 72 KB of quotes, twice that as JSON, and
    // twice again once the tool's result quotes it, past the default 64 KiB budget.
    let sent = "\"quoted\" ".repeat(8000);
    let args = json!({"method": "POST", "url": server.url("/echo"), "body": sent,
                      "max_chars": 1_000_000});
    let out = call(&h, "http", args).await.result.expect("answered");
    assert_eq!(
        out.truncated_from, None,
        "fitted by the tool, not cut by the host"
    );
    assert!(out.text.len() <= 64 * 1024, "{} bytes", out.text.len());
    let value = out.json().expect("JSON result");
    assert_eq!(value["status"], 200);
    assert_eq!(value["truncated"], true);
    let body = value["body"].as_str().expect("the JSON body, cut, as text");
    assert!(body.starts_with("{\""), "{}", &body[..40]);
    assert!(body.len() > 16 * 1024, "{}", body.len());
}

#[tokio::test]
async fn web_fetch_returns_markdown_and_html_to_markdown_converts() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    let out = ok(&h, "web_fetch", json!({"url": server.url("/page")})).await;
    assert_eq!(out["status"], 200);
    assert!(
        out["content_type"]
            .as_str()
            .unwrap_or_default()
            .contains("text/html")
    );
    assert!(out["bytes"].as_u64().unwrap_or_default() > 100);
    let md = out["content"].as_str().expect("content");
    assert!(md.contains("long-chain polymer"), "{md}");
    assert!(!md.contains("<p>"), "{md}");

    let out = ok(
        &h,
        "html_to_markdown",
        json!({"html": "<h1>Title</h1><p>Some <b>bold</b> text and a <a href=\"/x\">link</a>.</p>"}),
    )
    .await;
    let md = out["markdown"].as_str().expect("markdown");
    assert!(md.contains("**bold**"), "{md}");
    // web_fetch is GET only: its grant allows no other method, whatever the tool is asked.
    let e = err(&h, "web_fetch", json!({"url": "ftp://example.com/"})).await;
    assert!(
        matches!(
            e,
            ToolError::InvalidArgs(_) | ToolError::PermissionDenied(_)
        ),
        "{e:?}"
    );
}

/// The http component re-signed with credential mappings, admitted to the lab server's port.
fn http_with_credentials(dir: &Path, port: u16, mapping: &str) -> PathBuf {
    let wasm = std::fs::read(component("http")).expect("http component");
    let manifest = format!(
        "schema = 1\n\n[component]\nname = \"http\"\nnamespace = \"chitin\"\nversion = \"0.1.0\"\n\
         publisher = \"chitin\"\ndescription = \"http with a credential\"\n\n\
         [capabilities.http]\nallow = [{{ host = \"*\", port = {port}, methods = [\"GET\", \"POST\"] }}]\n\n\
         {mapping}\n\n[capabilities.secrets]\nnames = [\"test_*\"]\n"
    );
    let path = dir.join("http-cred.wasm");
    std::fs::write(&path, resign(&wasm, &manifest)).expect("write");
    path
}

#[tokio::test]
async fn a_secret_store_failing_at_injection_is_a_host_fault_and_nothing_is_sent() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    // The store was created under a master key kept elsewhere: the key this host finds in the
    // data directory opens nothing in it, which injection finds out when it reads the secret.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(StateDb::new(&data.path().join("chitin.db")));
    SecretStore::with_key(db, MasterKey::load(elsewhere.path(), None).expect("key"))
        .expect("store")
        .set("unrelated", "value-0123456789")
        .expect("set");
    let comp = http_with_credentials(
        data.path(),
        server.addr.port(),
        "[[capabilities.http.credentials]]\nsecret = \"test_token\"\nhosts = [\"127.0.0.1\"]\n\
         inject = \"bearer\"",
    );
    let ws = data.path().join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut h = Host::new(runtime, lab_policy(&server), services(data.path(), &ws));
    h.load_path(&comp).await.expect("load");
    let before = server.hits.load(Ordering::SeqCst);
    match call(&h, "http", get(&server.url("/echo"))).await.result {
        Err(ToolError::HostFault(fault)) => {
            assert!(fault.contains("secrets store failed"), "{fault}");
            assert!(
                fault.contains("does not match the secrets store"),
                "{fault}"
            );
        }
        other => panic!("expected a host fault, got {other:?}"),
    }
    assert_eq!(
        server.hits.load(Ordering::SeqCst),
        before,
        "nothing was sent"
    );
}

#[tokio::test]
async fn credentials_are_injected_by_the_host_and_never_reach_the_agent() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let secret = "s3cr3t-VALUE-9f8e7d6c5b4a";
    let comp = http_with_credentials(
        data.path(),
        server.addr.port(),
        "[[capabilities.http.credentials]]\nsecret = \"test_token\"\nhosts = [\"127.0.0.1\"]\n\
         inject = \"bearer\"\n\n[[capabilities.http.credentials]]\nsecret = \"test_other\"\n\
         hosts = [\"api.example.com\"]\ninject = \"placeholder\"\nplaceholder = \"{{OTHER}}\"",
    );
    let policy = lab_policy(&server);
    let ws = data.path().join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut h = Host::new(runtime, policy, services(data.path(), &ws));
    h.services()
        .secrets()
        .expect("secret store")
        .set("test_token", secret)
        .expect("set secret");
    h.services()
        .secrets()
        .expect("secret store")
        .set("test_other", "other-VALUE-0a1b2c3d4e")
        .expect("set secret");
    h.load_path(&comp).await.expect("load");

    let args = json!({"method": "GET", "url": server.url("/echo"),
                      "headers": [{"name": "x-other", "value": "{{OTHER}}"}]});
    let report = call(&h, "http", args).await;
    let out = report.result.expect("call");
    // The server echoes the Authorization header it received: the host put the secret there,
    // and the agent sees it redacted.
    assert!(!out.text.contains(secret), "{}", out.text);
    assert!(
        out.text.contains("Bearer [REDACTED:test_token]"),
        "{}",
        out.text
    );
    // The placeholder belongs to api.example.com: sent to another host it stays literal.
    assert!(out.text.contains("{{OTHER}}"), "{}", out.text);
    assert!(!out.text.contains("other-VALUE"), "{}", out.text);
    let log = format!("{:?}", report.log);
    assert!(!log.contains(secret), "{log}");
    // The log names the secret the request carried, and not the one it did not.
    assert!(
        log.contains("chitin credentials: test_token added to the request to 127.0.0.1"),
        "{log}"
    );
    assert!(!log.contains("test_other added"), "{log}");

    // The component never sees the value either, so cutting the echo just short of its end
    // (`max_chars`) hands the agent no part of it: the result's redactor finds whole values only.
    let plain = json!({"method": "GET", "url": server.url("/echo")});
    let out = call(&h, "http", plain).await.result.expect("call");
    let echoed = serde_json::to_string(&out.json().expect("JSON")["body"]).expect("text");
    let start = echoed.find("Bearer [REDACTED:").expect("the echoed header") + "Bearer ".len();
    let cut = start + secret.len() - 1;
    let args = json!({"method": "GET", "url": server.url("/echo"), "max_chars": cut});
    let out = call(&h, "http", args).await.result.expect("call");
    let body = out.json().expect("JSON")["body"].clone();
    let body = body.as_str().expect("the cut body, as text");
    assert!(!body.contains(&secret[..8]), "{body}");
    assert!(body.contains("Bearer [REDACT"), "{body}");
}

#[tokio::test]
async fn secret_shaped_values_in_a_request_are_refused() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    let token = format!("ghp_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8");
    let before = server.hits.load(Ordering::SeqCst);
    for args in [
        json!({"method": "POST", "url": server.url("/echo"), "body": format!("token={token}")}),
        json!({"method": "GET", "url": server.url(&format!("/echo?t={token}"))}),
        json!({"method": "GET", "url": server.url("/echo"),
               "headers": [{"name": "x-note", "value": token.clone()}]}),
    ] {
        let e = err(&h, "http", args.clone()).await;
        assert!(matches!(e, ToolError::PermissionDenied(_)), "{args}: {e:?}");
        assert!(!e.to_string().contains(&token), "{e}");
    }
    assert_eq!(server.hits.load(Ordering::SeqCst), before);
    // Writing about tokens is not a leak.
    let out = ok(
        &h,
        "http",
        json!({"method": "POST", "url": server.url("/echo"),
               "body": "rotate the API token and the password: see the runbook"}),
    )
    .await;
    assert_eq!(out["status"], 200);
}

#[tokio::test]
async fn one_call_sends_at_most_50_requests() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(
        data.path(),
        &server,
        policy_for(
            &server,
            true,
            Some("{ per_minute = 1000, per_hour = 1000 }"),
        ),
        None,
        &[&on_port(
            &fixture("test-http"),
            "test-http",
            server.addr.port(),
            data.path(),
        )],
    )
    .await;
    let before = server.hits.load(Ordering::SeqCst);
    let out = ok(
        &h,
        "fetch_many",
        json!({"url": server.url("/echo"), "n": 60}),
    )
    .await;
    assert_eq!(out["sent"], 50, "{out}");
    let error = out["first_error"].as_str().expect("an error after 50");
    assert!(error.contains("50 requests"), "{error}");
    assert_eq!(server.hits.load(Ordering::SeqCst) - before, 50);
}

#[tokio::test]
async fn secrets_answer_existence_only_inside_the_grant() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let fixture = on_port(
        &fixture("test-http"),
        "test-http",
        server.addr.port(),
        data.path(),
    );
    let h = host(data.path(), &server, lab_policy(&server), None, &[&fixture]).await;
    let store = h.services().secrets().expect("secret store");
    store.set("test_present", "value-1234567890").expect("set");
    store.set("other_present", "value-0987654321").expect("set");
    let out = ok(&h, "secret_exists", json!({"name": "test_present"})).await;
    assert_eq!(out["exists"], true);
    let out = ok(&h, "secret_exists", json!({"name": "test_absent"})).await;
    assert_eq!(out["exists"], false);
    // Outside the grant the answer is the same refusal whether the secret exists or not.
    let present = err(&h, "secret_exists", json!({"name": "other_present"})).await;
    let absent = err(&h, "secret_exists", json!({"name": "other_absent"})).await;
    assert!(
        matches!(present, ToolError::PermissionDenied(_)),
        "{present:?}"
    );
    assert_eq!(
        present.to_string().replace("other_present", "X"),
        absent.to_string().replace("other_absent", "X")
    );
}

#[tokio::test]
async fn credentials_injected_into_the_query_reach_the_server() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let secret = "q-VALUE-5e4d3c2b1a09";
    let comp = http_with_credentials(
        data.path(),
        server.addr.port(),
        "[[capabilities.http.credentials]]\nsecret = \"test_key\"\nhosts = [\"127.0.0.1\"]\n\
         inject = \"query\"\nparam = \"key\"",
    );
    let ws = data.path().join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut h = Host::new(runtime, lab_policy(&server), services(data.path(), &ws));
    h.services()
        .secrets()
        .expect("secret store")
        .set("test_key", secret)
        .expect("set secret");
    h.load_path(&comp).await.expect("load");
    let out = ok(&h, "http", get(&server.url("/echo?x=1&key=mine"))).await;
    // The server saw the host's value in place of the component's (redacted on the way back).
    assert_eq!(out["body"]["target"], "/echo?x=1&key=[REDACTED:test_key]");
}

#[tokio::test]
async fn sequential_gets_of_one_component_share_one_connection() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    for _ in 0..3 {
        let out = ok(&h, "http", get(&server.url("/echo"))).await;
        assert_eq!(out["status"], 200);
    }
    assert_eq!(server.hits.load(Ordering::SeqCst), 3);
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    let report = call(&h, "http", get(&server.url("/echo"))).await;
    let log = format!("{:?}", report.log);
    assert!(log.contains("kept-alive connection"), "{log}");
}

#[tokio::test]
async fn two_components_never_share_a_connection() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    for _ in 0..2 {
        ok(&h, "http", get(&server.url("/page"))).await;
        ok(&h, "web_fetch", json!({"url": server.url("/page")})).await;
    }
    // Each component kept its own connection to the same server and reused only that.
    assert_eq!(server.hits.load(Ordering::SeqCst), 4);
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_server_closing_idle_connections_gets_a_new_one() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    ok(&h, "http", get(&server.url("/brief"))).await;
    // `/brief` closes a connection idle for 100 ms.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let out = ok(&h, "http", get(&server.url("/brief"))).await;
    assert_eq!(out["status"], 200);
    assert_eq!(server.hits.load(Ordering::SeqCst), 2);
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_response_cut_short_is_never_followed_on_its_connection() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    ok(&h, "http", get(&server.url("/echo"))).await;
    let slow = json!({"method": "GET", "url": server.url("/slow"), "timeout_secs": 1});
    // Each of these goes out on the connection the /echo before it left idle, and leaves it
    // mid-response: over the cap as declared, over the cap while streaming, silent past the
    // between-bytes timeout.
    let mut expected = 1;
    for args in [get(&server.url("/big")), get(&server.url("/lying")), slow] {
        err(&h, "http", args.clone()).await;
        assert_eq!(
            server.connections.load(Ordering::SeqCst),
            expected,
            "{args}"
        );
        ok(&h, "http", get(&server.url("/echo"))).await;
        expected += 1;
        assert_eq!(
            server.connections.load(Ordering::SeqCst),
            expected,
            "after {args}"
        );
    }
}

#[tokio::test]
async fn a_post_is_never_sent_twice() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), &server, lab_policy(&server), None, &[]).await;
    ok(&h, "http", get(&server.url("/echo"))).await;
    let before = server.hits.load(Ordering::SeqCst);
    // Sent on the kept-alive connection; the server reads it and closes without answering.
    let post = json!({"method": "POST", "url": server.url("/drop"), "body": "once"});
    let e = err(&h, "http", post).await;
    assert!(matches!(e, ToolError::ExternalService(_)), "{e:?}");
    assert_eq!(server.hits.load(Ordering::SeqCst), before + 1);
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
}
