//! Bad input: each a clear, typed error, never a panic.

use crate::common;

use std::path::PathBuf;

use chitin_host::contract::ContractError;
use chitin_host::engine::EngineOptions;
use chitin_host::{Host, Limits, LoadError, Runtime, ToolError};
use common::{TestEnv, component, fixture, policy, services, test_engine};
use serde_json::json;

async fn runtime() -> (tempfile::TempDir, Runtime) {
    let data = tempfile::tempdir().expect("tempdir");
    let rt = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    (data, rt)
}

fn env_of(data: &tempfile::TempDir) -> std::sync::Arc<chitin_host::Services> {
    services(data.path(), data.path())
}

async fn load_err(bytes: &[u8]) -> LoadError {
    let (data, rt) = runtime().await;
    match rt
        .load_bytes(
            &PathBuf::from("bad.wasm"),
            bytes,
            &policy(Limits::default()),
            &env_of(&data),
        )
        .await
    {
        Ok(_) => panic!("bad bytes loaded"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn malformed_json_arguments_are_invalid_args() {
    let env = TestEnv::with(&[component("echo")]).await;
    let report = env.host.call("echo", "{\"message\": ").await;
    assert!(
        matches!(&report.result, Err(ToolError::InvalidArgs(m)) if m.contains("not valid JSON")),
        "{:?}",
        report.result
    );
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_invalid_args() {
    let env = TestEnv::with(&[component("echo")]).await;
    let report = env.call("echo", json!(["message"])).await;
    assert!(
        matches!(report.result, Err(ToolError::InvalidArgs(_))),
        "{:?}",
        report.result
    );
}

#[tokio::test]
async fn an_unknown_tool_is_not_found_and_lists_the_known_ones() {
    let env = TestEnv::with(&[component("echo")]).await;
    let report = env.call("ech0", json!({})).await;
    assert!(
        matches!(&report.result, Err(ToolError::NotFound(m)) if m.contains("ech0") && m.contains("echo")),
        "{:?}",
        report.result
    );
}

#[tokio::test]
async fn a_core_module_is_refused_as_not_a_component() {
    let core = wat::parse_str("(module (func (export \"f\")))").expect("wat");
    let err = load_err(&core).await;
    assert!(
        err.to_string()
            .contains("core WebAssembly module, not a component"),
        "{err}"
    );
}

#[tokio::test]
async fn a_file_that_is_not_wasm_is_refused() {
    let err = load_err(b"#!/bin/sh\necho hi\n").await;
    assert!(err.to_string().contains("not a WebAssembly file"), "{err}");
}

#[tokio::test]
async fn a_truncated_component_is_refused() {
    let bytes = std::fs::read(component("echo")).expect("echo");
    for cut in [4, 8, 100, bytes.len() / 2, bytes.len() - 1] {
        let err = load_err(&bytes[..cut]).await;
        let text = err.to_string();
        // The signature check comes first: a cut inside a signed file no longer matches it.
        assert!(
            text.contains("truncated")
                || text.contains("unsigned")
                || text.contains("malformed signature data")
                || text.contains("tampered code"),
            "cut at {cut}: {text}"
        );
    }
}

#[tokio::test]
async fn a_contract_version_the_host_does_not_accept_is_refused() {
    let (data, rt) = runtime().await;
    let path = fixture("test-future-contract");
    let err = match rt
        .load(&path, &policy(Limits::default()), &env_of(&data))
        .await
    {
        Ok(_) => panic!("future contract loaded"),
        Err(e) => e,
    };
    match &err {
        LoadError::Contract {
            cause: ContractError::UnsupportedVersion { found, .. },
            ..
        } => assert_eq!(found, "0.2.0"),
        other => panic!("expected an unsupported contract version, got {other}"),
    }
    assert!(err.to_string().contains("^0.1"), "{err}");
}

#[tokio::test]
async fn two_components_carrying_the_same_tool_name_are_refused() {
    let data = tempfile::tempdir().expect("tempdir");
    let rt = Runtime::new(
        common::shared_cache(),
        &EngineOptions {
            max_live_instances: 8,
            ..test_engine()
        },
    )
    .expect("runtime");
    let mut host = Host::new(rt, policy(Limits::default()), env_of(&data));
    host.load_file(&component("echo")).await.expect("echo");
    let copy = data.path().join("echo-copy.wasm");
    std::fs::copy(component("echo"), &copy).expect("copy");
    let err = host.load_file(&copy).await.expect_err("duplicate");
    assert!(matches!(err, LoadError::DuplicateTool { .. }), "{err}");
    assert!(err.to_string().contains("`echo`"), "{err}");
}
