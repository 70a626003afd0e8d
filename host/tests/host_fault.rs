//! A database or secret store failing under a running call ends the call as
//! `ToolError::HostFault`, naming what failed, whatever the component does with the error it was
//! handed: key-value buckets, HTTP rate windows, the secrets capability, and a fault under an
//! invoked tool. Other tools keep working.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use chitin_host::secrets::{MasterKey, SecretStore};
use chitin_host::state_db::StateDb;
use chitin_host::{Limits, ToolError};
use common::{TestEnv, component, fixture, resign};
use serde_json::{Value, json};

/// Replace the database with bytes that are not one (it was created at load, by the pins).
fn break_database(data: &Path) -> std::path::PathBuf {
    let db = data.join("chitin.db");
    std::fs::write(&db, b"this is not a database").expect("write");
    db
}

/// The host fault a call ended with, or a panic naming what it ended with instead.
async fn host_fault(env: &TestEnv, tool: &str, args: Value) -> String {
    match env.call(tool, args).await.result {
        Err(ToolError::HostFault(fault)) => fault,
        other => panic!("{tool}: expected a host fault, got {other:?}"),
    }
}

#[tokio::test]
async fn a_broken_database_under_memory_write_is_a_host_fault_naming_the_file() {
    let env = TestEnv::with(&[component("memory"), component("echo")]).await;
    env.ok("memory_write", json!({"content": "before"})).await;
    let db = break_database(env.data.path());
    let fault = host_fault(&env, "memory_write", json!({"content": "after"})).await;
    assert!(fault.contains(&db.display().to_string()), "{fault}");
    assert!(fault.contains("corrupt"), "{fault}");
    let fault = host_fault(&env, "memory_read", json!({"path": "MEMORY.md"})).await;
    assert!(fault.contains("chitin.db"), "{fault}");
    // Only the calls that need the database fail.
    env.ok("echo", json!({"message": "still here"})).await;
}

#[tokio::test]
async fn a_directory_where_the_database_should_be_is_a_host_fault() {
    let env = TestEnv::with(&[component("memory")]).await;
    let db = env.data.path().join("chitin.db");
    std::fs::remove_file(&db).ok();
    std::fs::create_dir(&db).expect("a directory in its place");
    let fault = host_fault(&env, "memory_write", json!({"content": "x"})).await;
    assert!(fault.contains(&db.display().to_string()), "{fault}");
}

#[tokio::test]
async fn a_broken_database_under_the_http_rate_windows_is_a_host_fault() {
    // The rate check comes before the allowlist and any address: nothing is sent.
    let env = TestEnv::with(&[component("markdown"), component("web-fetch")]).await;
    break_database(env.data.path());
    let fault = host_fault(&env, "web_fetch", json!({"url": "https://example.com/"})).await;
    assert!(fault.contains("rate limit"), "{fault}");
    assert!(fault.contains("chitin.db"), "{fault}");
}

#[tokio::test]
async fn a_secrets_store_under_another_key_is_a_host_fault_of_the_call_asking() {
    let data = tempfile::tempdir().expect("tempdir");
    // The store was created under another master key (one kept elsewhere), so the key this
    // host finds in the data directory opens nothing in it.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(StateDb::new(&data.path().join("chitin.db")));
    let other = MasterKey::load(elsewhere.path(), None).expect("key");
    SecretStore::with_key(db, other)
        .expect("store")
        .set("unrelated", "value-0123456789")
        .expect("set");
    let host = TestEnv::host_in(data.path(), &[fixture("test-http")], Limits::default()).await;
    let report = host
        .call("secret_exists", &json!({"name": "test_token"}).to_string())
        .await;
    match report.result {
        Err(ToolError::HostFault(fault)) => {
            assert!(
                fault.contains("does not match the secrets store"),
                "{fault}"
            )
        }
        other => panic!("expected a host fault, got {other:?}"),
    }
    // A name outside the grant is still a plain refusal the component is told.
    let report = host
        .call("secret_exists", &json!({"name": "github"}).to_string())
        .await;
    assert!(
        matches!(report.result, Err(ToolError::PermissionDenied(ref m)) if m.contains("outside this component's grant")),
        "{:?}",
        report.result
    );
}

#[tokio::test]
async fn a_host_fault_under_an_invoked_tool_is_the_invoking_calls_host_fault() {
    let work = tempfile::tempdir().expect("tempdir");
    let wasm = std::fs::read(fixture("test-invoke")).expect("test-invoke");
    let manifest =
        std::fs::read_to_string(common::repo().join("components/test-invoke/manifest.toml"))
            .expect("manifest")
            .replace("tools = { ", "tools = { mem = \"memory_write\", ");
    let relay = work.path().join("test-invoke-mem.wasm");
    std::fs::write(&relay, resign(&wasm, &manifest)).expect("write");
    // The fixture's own files grant names `mine/`.
    std::fs::create_dir_all(work.path().join("workspace/mine")).expect("mine");
    let host = TestEnv::host_in(
        work.path(),
        &[component("memory"), relay],
        Limits::default(),
    )
    .await;
    break_database(work.path());
    // The relay hands the invoked tool's error back as its own; the host fault still wins.
    let report = host
        .call(
            "relay",
            &json!({"alias": "mem", "args": {"content": "x"}}).to_string(),
        )
        .await;
    match report.result {
        Err(ToolError::HostFault(fault)) => assert!(fault.contains("chitin.db"), "{fault}"),
        other => panic!("expected a host fault, got {other:?}"),
    }
}
