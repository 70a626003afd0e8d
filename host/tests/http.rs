//! Outbound HTTP end to end: the `http`, `web_fetch` and `html_to_markdown` components against a
//! real HTTPS server on 127.0.0.1 (test CA), admitted by a test-only policy entry; the default
//! policy refuses the same address. Redirects, size caps (honest, lying and missing lengths),
//! deadlines, the per-call request cap, rate limits, leak scanning and credential injection.

mod common;
#[path = "https_server/mod.rs"]
mod https_server;

use std::path::Path;
use std::sync::atomic::Ordering;

use chitin_host::policy::{DEFAULT_POLICY, Policy};
use chitin_host::{CallReport, Host, Limits, Runtime, ToolError};
use common::{component, fixture, resign, services, test_engine};
use https_server::TestServer;
use serde_json::{Value, json};

/// The default policy plus `extra` TOML (an `[http]` section).
fn policy_with(extra: &str) -> Policy {
    Policy::parse(&format!("{DEFAULT_POLICY}\n{extra}"), Path::new("test-policy.toml"))
        .expect("test policy")
}

/// The test-only entry admitting the server: its address and its CA.
fn lab_policy(server: &TestServer, more: &str) -> Policy {
    policy_with(&format!(
        "[http]\nallow_addresses = [\"127.0.0.1\"]\nca_files = [{:?}]\n{more}",
        server.ca_file
    ))
}

fn cache() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
        .path()
}

/// A host under `policy` with the markdown library and the three web components loaded, plus
/// any extra component files.
async fn host(data: &Path, policy: Policy, limits: Option<Limits>, extra: &[&Path]) -> Host {
    let mut policy = policy;
    if let Some(limits) = limits {
        policy.limits = limits;
    }
    let ws = data.join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    let runtime = Runtime::new(cache(), &test_engine()).expect("runtime");
    let mut host = Host::new(runtime, policy, services(data, &ws));
    for c in [
        component("markdown"),
        component("http"),
        component("web-fetch"),
        component("html-to-markdown"),
    ] {
        host.load_path(&c).await.expect("load");
    }
    for path in extra {
        host.load_path(path).await.expect("load extra");
    }
    host
}

async fn call(host: &Host, tool: &str, args: Value) -> CallReport {
    host.call(tool, &args.to_string()).await
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

    let lab = host(&data.path().join("lab"), lab_policy(&server, ""), None, &[]).await;
    let out = ok(&lab, "http", get(&server.url("/echo?x=1"))).await;
    assert_eq!(out["status"], 200);
    assert_eq!(out["body"]["method"], "GET");
    assert_eq!(out["body"]["target"], "/echo?x=1");

    // Same address, same CA, but no test-only entry admitting 127.0.0.1: refused as loopback,
    // and nothing reaches the server.
    let before = server.hits.load(Ordering::SeqCst);
    let default = host(
        &data.path().join("default"),
        policy_with(&format!("[http]\nca_files = [{:?}]\n", server.ca_file)),
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
async fn redirects_reach_the_tool_unfollowed() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), lab_policy(&server, ""), None, &[]).await;
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
    let e = err(&h, "http", get("https://169.254.169.254/latest/meta-data")).await;
    assert!(e.to_string().contains("metadata"), "{e}");
}

#[tokio::test]
async fn responses_over_5_mib_are_refused_whatever_their_length_says() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), lab_policy(&server, ""), None, &[]).await;
    for path in ["/big", "/lying", "/unsized"] {
        let e = err(&h, "http", get(&server.url(path))).await;
        let text = e.to_string();
        assert!(
            text.contains("5242880") || text.contains("too large") || text.contains("exceeds"),
            "{path}: {text}"
        );
    }
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
    let h = host(data.path(), lab_policy(&server, ""), Some(limits), &[]).await;
    let started = std::time::Instant::now();
    let e = err(&h, "http", get(&server.url("/slow"))).await;
    assert!(
        matches!(e, ToolError::Timeout | ToolError::ExternalService(_)),
        "{e:?}"
    );
    // The server holds the body for 15 s; the call ended on its own deadline instead.
    assert!(started.elapsed() < std::time::Duration::from_secs(12));
}

#[tokio::test]
async fn the_rate_limit_answers_with_when_to_retry() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let policy = lab_policy(&server, "rate_limit = { per_minute = 3, per_hour = 100 }\n");
    let h = host(data.path(), policy, None, &[]).await;
    for _ in 0..3 {
        ok(&h, "http", get(&server.url("/echo"))).await;
    }
    let before = server.hits.load(Ordering::SeqCst);
    let e = err(&h, "http", get(&server.url("/echo"))).await;
    assert!(matches!(e, ToolError::RateLimited(_)), "{e:?}");
    assert!(e.to_string().contains("retry"), "{e}");
    assert_eq!(server.hits.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn url_tricks_are_refused_before_anything_is_sent() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), lab_policy(&server, ""), None, &[]).await;
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
            matches!(e, ToolError::PermissionDenied(_) | ToolError::InvalidArgs(_)),
            "{url}: {e:?}"
        );
        assert_eq!(server.hits.load(Ordering::SeqCst), before, "{url} reached the server");
    }
    // A legitimately encoded path still passes.
    let out = ok(&h, "http", get(&server.url("/echo?q=caf%C3%A9%20au%20lait"))).await;
    assert_eq!(out["status"], 200);
}

#[tokio::test]
async fn web_fetch_returns_markdown_and_html_to_markdown_converts() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), lab_policy(&server, ""), None, &[]).await;
    let out = ok(&h, "web_fetch", json!({"url": server.url("/page")})).await;
    assert_eq!(out["status"], 200);
    assert!(out["content_type"].as_str().unwrap_or_default().contains("text/html"));
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
    assert!(matches!(e, ToolError::InvalidArgs(_) | ToolError::PermissionDenied(_)), "{e:?}");
}

/// The http component re-signed with a credential mapping for the lab server's address.
fn http_with_credentials(dir: &Path, mapping: &str) -> std::path::PathBuf {
    let wasm = std::fs::read(component("http")).expect("http component");
    let manifest = format!(
        "schema = 1\n\n[component]\nname = \"http\"\nnamespace = \"chitin\"\nversion = \"0.1.0\"\n\
         publisher = \"chitin\"\ndescription = \"http with a credential\"\n\n\
         [capabilities.http]\nallow = [{{ host = \"*\", methods = [\"GET\", \"POST\"] }}]\n\n\
         {mapping}\n\n[capabilities.secrets]\nnames = [\"test_*\"]\n"
    );
    let path = dir.join("http-cred.wasm");
    std::fs::write(&path, resign(&wasm, &manifest)).expect("write");
    path
}

#[tokio::test]
async fn credentials_are_injected_by_the_host_and_never_reach_the_agent() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let secret = "s3cr3t-VALUE-9f8e7d6c5b4a";
    let comp = http_with_credentials(
        data.path(),
        "[[capabilities.http.credentials]]\nsecret = \"test_token\"\nhosts = [\"127.0.0.1\"]\ninject = \"bearer\"",
    );
    let policy = lab_policy(&server, "");
    let ws = data.path().join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    let runtime = Runtime::new(cache(), &test_engine()).expect("runtime");
    let mut h = Host::new(runtime, policy, services(data.path(), &ws));
    h.services()
        .secrets()
        .expect("secret store")
        .set("test_token", secret)
        .expect("set secret");
    h.load_path(&comp).await.expect("load");

    let report = call(&h, "http", get(&server.url("/echo"))).await;
    let out = report.result.expect("call");
    // The server echoes the Authorization header it received; the agent sees it redacted.
    assert!(!out.text.contains(secret), "{}", out.text);
    assert!(out.text.contains("[REDACTED:test_token]"), "{}", out.text);
    let log = format!("{:?}", report.log);
    assert!(!log.contains(secret), "{log}");
}

#[tokio::test]
async fn secret_shaped_values_in_a_request_are_refused() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = https_server::start(data.path()).await;
    let h = host(data.path(), lab_policy(&server, ""), None, &[]).await;
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
        lab_policy(&server, "rate_limit = { per_minute = 1000, per_hour = 1000 }\n"),
        None,
        &[&fixture("test-http")],
    )
    .await;
    let before = server.hits.load(Ordering::SeqCst);
    let out = ok(&h, "fetch_many", json!({"url": server.url("/echo"), "n": 60})).await;
    assert_eq!(out["sent"], 50, "{out}");
    let error = out["first_error"].as_str().expect("an error after 50");
    assert!(error.contains("50 requests"), "{error}");
    assert_eq!(server.hits.load(Ordering::SeqCst) - before, 50);
}
